"""Observation generators for the stall signals: loops an agent falls into, and progress that must
not be mistaken for one. Each generator takes a ``random.Random`` and yields observation texts.

They are written to be broader than what the signals were tuned on (``docs/estimates.md`` lists
them): loops that only change a counter (an attempt or retry count, or a number with no total: a
number moving toward a stated total is progress, not a loop), a timestamp, an id, a temp path or a
duration; cycles of 2-4 texts; near copies with random edits; shuffles of old lines; stack traces with new addresses —
each in several shapes (one line, several, with or without a header), whitespace and case varied.
Progress brings new words: sentences built from a large random vocabulary, with counters,
timestamps and ids around them, similar-looking lines (``fixed test_x in tests/test_y.py``), a
large repeated context with one new line, an old line now and then.
"""

from __future__ import annotations

import random
import string
import uuid
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterator

Gen = Callable[[random.Random], Iterator[str]]

_SYL = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "pa", "qu", "fe", "do", "gi", "ha", "ju",
        "bel", "cor", "dan", "fin", "gor", "hal", "lin", "mor", "nas", "pel", "rin", "sol", "tar", "vel"]
_VERBS = ["checked", "parsed", "compiled", "rewrote", "fixed", "reviewed", "merged", "traced", "measured",
          "summarised", "renamed", "tested", "linted", "indexed", "migrated", "profiled", "documented"]
_NOUNS = ["module", "function", "table", "endpoint", "schema", "report", "config", "parser", "handler",
          "fixture", "query", "template", "cache", "worker", "pipeline", "section", "chapter"]


def word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYL) for _ in range(rng.randint(2, 4)))


def sentence(rng: random.Random) -> str:
    shape = rng.randrange(5)
    if shape == 0:
        return f"{rng.choice(_VERBS)} {rng.choice(_NOUNS)} {word(rng)} and {word(rng)}"
    if shape == 1:
        return f"the {word(rng)} {rng.choice(_NOUNS)} now calls {word(rng)}_{word(rng)}()"
    if shape == 2:
        return f"{rng.choice(_VERBS)} {word(rng)}.py: {rng.choice(_NOUNS)} {word(rng)} looks {word(rng)}"
    if shape == 3:
        return f"found {word(rng)} in {word(rng)}/{word(rng)}.{rng.choice(['py', 'md', 'sql', 'ts'])}"
    return f"{word(rng).capitalize()} {word(rng)} {word(rng)}: {rng.choice(_VERBS)} {word(rng)}"


def text(rng: random.Random, lines: tuple[int, int] = (1, 3)) -> str:
    return "\n".join(sentence(rng) for _ in range(rng.randint(*lines)))


# ---------------------------------------------------------------------- variation helpers
def vary_case_space(rng: random.Random, t: str) -> str:
    out = []
    for line in t.split("\n"):
        line = rng.choice([line, line.upper(), line.lower(), line.title(), line.swapcase()])
        words = line.split(" ")
        line = "".join(w + (" " * rng.randint(1, 3) if i < len(words) - 1 else "") for i, w in enumerate(words))
        out.append(" " * rng.randint(0, 3) + line + rng.choice(["", " ", "\t", "  "]))
    return "\n".join(out)


def edit(rng: random.Random, t: str, edits: int) -> str:
    s = list(t)
    for _ in range(edits):
        i = rng.randrange(len(s))
        op = rng.randrange(3)
        c = rng.choice(string.ascii_lowercase)
        if op == 0:
            s[i] = c
        elif op == 1:
            s.insert(i, c)
        elif len(s) > 10:
            del s[i]
    return "".join(s)


def stamp(rng: random.Random, t: datetime, f: int | None = None) -> str:
    """A timestamp in one of four shapes (``f``; random when None)."""
    f = rng.randrange(4) if f is None else f
    if f == 0:
        return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
    if f == 1:
        return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"
    if f == 2:
        return t.strftime("%a %b %d %H:%M:%S UTC %Y")
    return t.strftime("%H:%M:%S")


def _clock(rng: random.Random) -> Iterator[datetime]:
    t = datetime(2027, 1, 15, 8, 0, tzinfo=timezone.utc) + timedelta(seconds=rng.randint(0, 86400))
    while True:
        t += timedelta(seconds=rng.uniform(1, 90))
        yield t


# ---------------------------------------------------------------------- loops
def loop_exact(rng: random.Random) -> Iterator[str]:
    t = text(rng, (1, 4))
    while True:
        yield t


def loop_case_space(rng: random.Random) -> Iterator[str]:
    t = text(rng, (1, 3))
    while True:
        yield vary_case_space(rng, t)


def loop_cycle(period: int) -> Gen:
    def gen(rng: random.Random) -> Iterator[str]:
        texts = [text(rng, (1, 2)) for _ in range(period)]
        i = 0
        while True:
            yield texts[i % period]
            i += 1
    return gen


def loop_counter(rng: random.Random) -> Iterator[str]:
    shape = rng.randrange(4)
    body = sentence(rng)
    n = rng.randint(1, 50)
    total = rng.randint(60, 200)
    while True:
        n += rng.choice((1, 1, 1, 2))
        yield [f"retry #{n}: {body}", f"attempt {n} of {total}\n{body}", f"[{n}] {body}",
               f"{body} (try {n}, {n * 3} requests so far)"][shape]


def loop_counter_case_space(rng: random.Random) -> Iterator[str]:
    for t in loop_counter(rng):
        yield vary_case_space(rng, t)


def loop_counter_noise(rng: random.Random) -> Iterator[str]:
    body = sentence(rng) + " " + sentence(rng)
    n = rng.randint(1, 9)
    while True:
        n += 1
        yield f"retry {n}: " + edit(rng, body, rng.randint(1, 2))


def loop_timestamp_line(rng: random.Random) -> Iterator[str]:
    body = text(rng, (1, 3))
    what = sentence(rng)
    f = rng.randrange(4)
    for t in _clock(rng):
        yield f"{body}\n{stamp(rng, t, f)} {what}"


def loop_timestamp_header(rng: random.Random) -> Iterator[str]:
    body = text(rng, (2, 4))
    f = rng.randrange(4)
    for t in _clock(rng):
        yield f"=== {stamp(rng, t, f)} ===\n{body}"


def loop_ids(rng: random.Random) -> Iterator[str]:
    body = sentence(rng)
    shape = rng.randrange(4)
    while True:
        if shape == 0:
            yield f"request {uuid.UUID(int=rng.getrandbits(128))} failed: {body}"
        elif shape == 1:
            yield f"checking commit {rng.getrandbits(160):040x}: {body}"
        elif shape == 2:
            yield f"wrote /tmp/tmp{rng.getrandbits(40):010x}/out.json\n{body}"
        else:
            yield f"object at 0x{rng.getrandbits(48):012x}: {body} (session {rng.getrandbits(64):x})"


def loop_durations(rng: random.Random) -> Iterator[str]:
    body = sentence(rng)
    while True:
        yield f"{body}: failed after {rng.uniform(0.1, 99):.{rng.randint(1, 3)}f}{rng.choice(['s', 'ms', ' seconds'])}"


def loop_near_copy(rng: random.Random) -> Iterator[str]:
    base = text(rng, (1, 3))
    while True:
        yield edit(rng, base, rng.randint(1, max(1, len(base) // 40)))


def loop_near_cycle(rng: random.Random) -> Iterator[str]:
    a, b = text(rng, (1, 2)), text(rng, (1, 2))
    i = 0
    while True:
        yield edit(rng, (a, b)[i % 2], rng.randint(1, 2))
        i += 1


def loop_shuffle(rng: random.Random) -> Iterator[str]:
    """Old lines reshuffled: its first text (all the lines, new) is the last one before the loop
    (``PREAMBLE``); the loop re-emits subsets of them."""
    lines = [sentence(rng) for _ in range(rng.randint(3, 6))]
    yield "\n".join(lines)
    while True:
        yield "\n".join(rng.sample(lines, rng.randint(1, len(lines))))


def loop_mixed(rng: random.Random) -> Iterator[str]:
    body = text(rng, (1, 2))
    n = rng.randint(1, 9)
    f = rng.randrange(4)
    for t in _clock(rng):
        n += 1
        yield vary_case_space(rng, f"{stamp(rng, t, f)} [req {uuid.UUID(int=rng.getrandbits(128))}] try {n}\n{body}")


def loop_traceback(rng: random.Random) -> Iterator[str]:
    frames = [(word(rng), word(rng)) for _ in range(rng.randint(2, 5))]
    err = sentence(rng)
    while True:
        tb = ["Traceback (most recent call last):"]
        for f, fn in frames:
            tb.append(f'  File "/tmp/tmp{rng.getrandbits(32):08x}/{f}.py", line {rng.randint(1, 900)}, in {fn}')
        tb.append(f"RuntimeError: {err} at 0x{rng.getrandbits(48):012x}")
        yield "\n".join(tb)


LOOPS: dict[str, Gen] = {
    "exact repeat": loop_exact,
    "whitespace / case": loop_case_space,
    "cycle of 2": loop_cycle(2),
    "cycle of 3": loop_cycle(3),
    "cycle of 4": loop_cycle(4),
    "counter only": loop_counter,
    "counter + whitespace / case": loop_counter_case_space,
    "counter + random edit": loop_counter_noise,
    "timestamp line": loop_timestamp_line,
    "timestamp header": loop_timestamp_header,
    "uuid / hex / temp path ids": loop_ids,
    "durations": loop_durations,
    "near copy (random edits)": loop_near_copy,
    "near-copy cycle of 2": loop_near_cycle,
    "old lines reshuffled": loop_shuffle,
    "timestamp + uuid + counter + case": loop_mixed,
    "traceback, new addresses": loop_traceback,
}


# ---------------------------------------------------------------------- progress
def progress_new(rng: random.Random) -> Iterator[str]:
    while True:
        yield text(rng, (1, 3))


def progress_counters(rng: random.Random) -> Iterator[str]:
    n = 0
    total = rng.randint(20, 90)
    f = rng.randrange(4)
    for t in _clock(rng):
        n += 1
        yield f"[{stamp(rng, t, f)}] step {n}/{total} ({n * 100 // total}%): {sentence(rng)}"


def progress_some_old(rng: random.Random) -> Iterator[str]:
    seen: list[str] = []
    last = ""
    while True:
        old = [x for x in seen if x != last]
        if old and rng.random() < 0.1:  # an old line again, never the previous observation
            last = rng.choice(old)
        else:
            new = [sentence(rng) for _ in range(rng.randint(1, 2))]
            seen.extend(new)
            last = "\n".join(new)
        yield last


def progress_context(rng: random.Random) -> Iterator[str]:
    context = [sentence(rng) for _ in range(rng.randint(5, 15))]
    n = 0
    while True:
        n += 1
        yield "\n".join(context + [f"next ({n}): {sentence(rng)}"])


def progress_similar(rng: random.Random) -> Iterator[str]:
    while True:
        a, b = word(rng), word(rng)
        yield rng.choice([f"fixed test_{a} in tests/test_{b}.py", f"renamed {a}_{b} to {b}_{a}",
                          f"checked module {a}.{b}", f"{rng.choice(_VERBS)} {a} {b}"])


def progress_ids(rng: random.Random) -> Iterator[str]:
    f = rng.randrange(4)
    for t in _clock(rng):
        yield (f"{stamp(rng, t, f)} commit {rng.getrandbits(160):040x}: {sentence(rng)}\n"
               f"request {uuid.UUID(int=rng.getrandbits(128))} took {rng.uniform(0.1, 9):.2f}s")


PREAMBLE = {loop_shuffle: 1}  # texts a loop generator yields before its loop starts

PROGRESS: dict[str, Gen] = {
    "new sentences": progress_new,
    "counters advancing with new content": progress_counters,
    "new content, an old line now and then": progress_some_old,
    "large repeated context + one new line": progress_context,
    "similar-looking new lines": progress_similar,
    "ids and timestamps around new content": progress_ids,
}
