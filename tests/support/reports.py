"""Workloads of action/result reports, run like the other stall families (tests/support/stalls.py): heartbeat
reports with ``action=`` / ``result=`` / ``observation=``, loops that change their words but learn
nothing, and progress whose text changes only in a number.

Loops (recall: alarmed within 5 observations of the loop's first report, or within two periods
plus two for a cycle):

* **searches**: other queries (tools, wordings), every result empty — the same text, or "nothing"
  in other words, with or without the query echoed;
* **tool errors**: the same error for other arguments (the argument echoed in the error);
* **retries told in other words** (observation only), plain or with attempt counters and
  timestamps; two template banks (``wording.BANK_A`` / ``BANK_B``, the second held back);
* **a growing log** whose new tail rewords what it already said (the whole log each time, or
  only its tail);
* **cycles of 5-8 steps**: texts, action/result pairs, with counters;
* **the same action with the same result**.

Progress (no stall alarm may fire): a number moving toward a stated total in many formats and
positions, with ``units_done`` rising or not reported; numbered generated files; searches and
reads that find new things (now and then an empty one); test runs per file; healthy narratives;
the text repeated verbatim while ``units_done`` rises.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterator

from . import wording as W
from .stalls import Script, Step, beat_gaps, lease_for, neighbours, pick_rate

Report = tuple[str | None, str | None, str | None]  # observation, action, result
ReportGen = Callable[[random.Random], Iterator[Report]]


def _stamp(rng: random.Random) -> Iterator[str]:
    t = datetime(2027, 3, 2, 9, 0, tzinfo=timezone.utc) + timedelta(seconds=rng.randint(0, 80000))
    f = rng.randrange(3)
    while True:
        t += timedelta(seconds=rng.uniform(2, 120))
        yield (t.strftime("%Y-%m-%dT%H:%M:%SZ"), t.strftime("[%H:%M:%S]"), t.strftime("%b %d %H:%M:%S"))[f]


# ---------------------------------------------------------------------- healthy reports
def healthy_search(rng: random.Random) -> Iterator[Report]:
    """Searches that find something new (now and then nothing, never twice in a row)."""
    empty_last = True
    for action, _ in W.searches(rng):
        if not empty_last and rng.random() < 0.15:
            empty_last = True
            yield None, action, rng.choice(W.EMPTY).replace("{{", "{").replace("}}", "}")
        else:
            empty_last = False
            yield None, action, W.found(rng)


def healthy_reads(rng: random.Random) -> Iterator[Report]:
    """read_file(path) → a few lines of new content."""
    while True:
        path = rng.choice(W.FOUND_FILES).format(a=W.name(rng), b=W.name(rng))
        body = "\n".join(rng.choice([f"def {W.func(rng)}({W.name(rng)}):", f"    return {W.name(rng)}.{W.func(rng)}()",
                                     f"class {W.name(rng).title().replace('_', '')}:", f"# {W.narrative(rng)}",
                                     f"import {W.name(rng)}"]) for _ in range(rng.randint(2, 6)))
        yield None, rng.choice([f"read_file({path!r})", f"cat {path}", f"open {path}"]), body


def healthy_narrative(rng: random.Random) -> Iterator[Report]:
    while True:
        yield W.narrative(rng), None, None


def healthy_narrative_actions(rng: random.Random) -> Iterator[Report]:
    """A narrative as the observation, a tool call as the action, its output as the result."""
    gens = [healthy_search(rng), healthy_reads(rng)]
    while True:
        _, action, result = next(rng.choice(gens))
        yield W.narrative(rng), action, result


HEALTHY: dict[str, ReportGen] = {
    "searches that find new things": healthy_search, "reads of other files": healthy_reads,
    "narratives": healthy_narrative, "narrative + action + result": healthy_narrative_actions,
}


# ---------------------------------------------------------------------- loops
def loop_search_same(rng: random.Random) -> Iterator[Report]:
    empty = rng.choice(W.EMPTY).replace("{{", "{").replace("}}", "}")
    for action, _ in W.searches(rng):
        yield None, action, empty


def loop_search_worded(rng: random.Random) -> Iterator[Report]:
    echo = rng.random() < 0.5
    for action, q in W.searches(rng):
        pool = W.EMPTY_ECHO if echo and rng.random() < 0.7 else W.EMPTY
        yield None, action, rng.choice(pool).format(q=q).replace("{{", "{").replace("}}", "}")


def loop_tool_error(rng: random.Random) -> Iterator[Report]:
    shape = rng.randrange(3)
    while True:
        path = rng.choice(W.FOUND_FILES).format(a=W.name(rng), b=W.name(rng))
        if shape == 0:
            yield None, f"read_file({path!r})", f"FileNotFoundError: [Errno 2] No such file or directory: {path!r}"
        elif shape == 1:
            yield None, f"pytest {path}", f"ERROR: file or directory not found: {path}\n\nno tests ran in 0.01s"
        else:
            yield None, f"git checkout {W.name(rng)}", "error: pathspec did not match any file(s) known to git"


def loop_retry_worded(bank: list[str], decorate: bool = False) -> ReportGen:
    def gen(rng: random.Random) -> Iterator[Report]:
        stamps = _stamp(rng)
        n = rng.randint(1, 5)
        for text in W.reworded_failure(rng, bank):
            n += 1
            if decorate:
                text = rng.choice([f"{next(stamps)} {text}", f"[attempt {n}] {text}", f"{text} (try #{n})",
                                   f"{next(stamps)} retry {n}: {text}"])
            yield text, None, None
    return gen


def loop_growing_log(tail_only: bool) -> ReportGen:
    """A log: healthy lines first (``PREFIX`` of them come before the loop), then each report adds
    one or two lines that reword something the log said before."""
    def gen(rng: random.Random) -> Iterator[Report]:
        stamps = _stamp(rng)
        level = rng.random() < 0.6
        log: list[str] = []

        def line(text: str, lvl: str) -> str:
            return f"{next(stamps)} {lvl + ' ' if level else ''}{text}"

        failure = W.reworded_failure(rng, W.BANK_A + W.BANK_B)
        facts = [W.narrative(rng) for _ in range(3)]
        for i in range(LOG_PREFIX):
            log.append(line(facts[i % 3] if i < 3 else next(failure), "INFO" if i < 3 else "ERROR"))
            yield ("\n".join(log[-3:]) if tail_only else "\n".join(log)), None, None
        while True:
            for _ in range(rng.choice((1, 1, 2))):
                log.append(line(next(failure), "ERROR"))
            yield ("\n".join(log[-3:]) if tail_only else "\n".join(log)), None, None
    return gen


LOG_PREFIX = 5  # reports a growing log makes before its loop: 3 healthy lines, then the failure told twice


def loop_cycle(period: int, style: str) -> ReportGen:
    def gen(rng: random.Random) -> Iterator[Report]:
        steps = []
        for _ in range(period):
            if style == "pairs":
                action = rng.choice(W.TOOLS).format(q=W.name(rng) + " " + W.name(rng))
                steps.append((None, action, rng.choice([W.found(rng), "0 results", "permission denied"])))
            else:
                steps.append((W.narrative(rng), None, None))
        n = rng.randint(1, 9)
        stamps = _stamp(rng)
        i = 0
        while True:
            text, action, result = steps[i % period]
            if style == "counters" and text is not None:
                n += 1
                text = f"{next(stamps)} (step {n}) {text}"
            yield text, action, result
            i += 1
    return gen


def loop_same_pair(rng: random.Random) -> Iterator[Report]:
    action = rng.choice(W.TOOLS).format(q=W.name(rng))
    result = rng.choice(["0 results", "permission denied", W.found(rng), "HTTP 503 Service Unavailable"])
    while True:
        yield None, action, result


LOOPS: dict[str, ReportGen] = {
    "search: other queries, the same empty result": loop_search_same,
    "search: other queries, empty results worded differently": loop_search_worded,
    "tool calls: other arguments, the same error": loop_tool_error,
    "retry told in other words (bank A)": loop_retry_worded(W.BANK_A),
    "retry told in other words (bank B, held back)": loop_retry_worded(W.BANK_B),
    "retry in other words + counters and timestamps": loop_retry_worded(W.BANK_A + W.BANK_B, decorate=True),
    "growing log, reworded tail": loop_growing_log(False),
    "growing log (tail only), reworded": loop_growing_log(True),
    "cycle of 5 narratives": loop_cycle(5, "text"),
    "cycle of 6 action/result pairs": loop_cycle(6, "pairs"),
    "cycle of 7 with counters": loop_cycle(7, "counters"),
    "cycle of 8 narratives": loop_cycle(8, "text"),
    "the same action, the same result": loop_same_pair,
}
PREFIX = {"growing log, reworded tail": LOG_PREFIX, "growing log (tail only), reworded": LOG_PREFIX}
PERIOD = {"cycle of 5 narratives": 5, "cycle of 6 action/result pairs": 6, "cycle of 7 with counters": 7,
          "cycle of 8 narratives": 8}


def report_loop_script(rng: random.Random, name: str) -> Script:
    """0-6 healthy reports of a style near the loop's, then the loop (as long as it needs to be
    caught: 8 reports, or two periods + 4)."""
    rate = pick_rate(rng)
    lease = lease_for(rate)
    gaps = beat_gaps(rng, rate, lease, irregular=False)
    k = rng.randint(0, 6)
    healthy = rng.choice(list(HEALTHY.values()))(rng)
    total = rng.randint(10, 40)
    steps = []
    for i in range(k):
        text, action, result = next(healthy)
        steps.append(Step(next(gaps), text, (i + 1, total), action=action, result=result))
    looping = LOOPS[name](rng)
    for _ in range(PREFIX.get(name, 0)):  # the loop's own healthy beginning
        text, action, result = next(looping)
        steps.append(Step(next(gaps), text, (len(steps) + 1, total), action=action, result=result))
        k += 1
    frozen = (k, total) if rng.random() < 0.7 else None
    for _ in range(max(8, 2 * PERIOD.get(name, 0) + 4)):
        text, action, result = next(looping)
        steps.append(Step(next(gaps), text, frozen, action=action, result=result))
    within = 2 * PERIOD[name] + 2 if name in PERIOD else 5
    return Script(steps, lease, (0, k), neighbours(rng, rate), within)


# ---------------------------------------------------------------------- progress in numbers
COUNTERS = [
    "tests passed {n}/{t}", "[{n}/{t}] {what}", "page {n} of {t}", "{what}: {n} of {t} done",
    "Processed {n}/{t} files", "{what} ({p}%)", "epoch {n}/{t} loss={loss}", "row {n}000 of {t}000 migrated",
    "downloading chunk {n} of {t}", "{n} out of {t} modules checked", "{what} - {p}% complete",
    "[{bar}] {p}% {what}", "step {n}/{t} | {what}", "{left} files left", "remaining: {left} items",
    "uploaded part {n}/{t} of the backup", "{what}... {n}/{t}",
]
FILES = ["out/part-{n:04d}.parquet", "fixtures/case_{n:03d}.json", "gen/model_{n}.py", "frames/frame{n:05d}.png",
         "reports/2027-Q1/page-{n}.pdf", "shards/shard-{n:02d}-of-{t:02d}.tfrecord"]
WHAT = ["running the test suite", "migrating the orders table", "indexing documents", "rendering pages",
        "checking links", "exporting invoices", "training", "uploading", "scanning modules"]


def counter_progress(units: bool, files: bool = False) -> Callable[[random.Random], Script]:
    """Text identical but for a number moving toward a stated total (or a numbered file), one
    format per trial; ``units``: ``units_done`` rises with it (now and then it stays for a beat)."""
    def make(rng: random.Random) -> Script:
        rate = pick_rate(rng)
        lease = lease_for(rate)
        gaps = beat_gaps(rng, rate, lease, irregular=True)
        t = rng.randint(20, 120)
        start = rng.randint(0, t // 3)
        what = rng.choice(WHAT)
        tpl = rng.choice(FILES if files else COUNTERS)
        verb = rng.choice(["wrote", "generated", "saved", "created", "rendered"])
        count = rng.randint(20, 40)
        steps = []
        n = start
        for _ in range(count):
            if n >= t:
                break  # done: the step commits (a node at 100 % that keeps saying so is another story)
            n = min(t, n + rng.choice((1, 1, 1, 2, 3)))
            p = 100 * n // t
            body = tpl.format(n=n, t=t, p=p, what=what, loss=f"{rng.uniform(0.1, 3):.3f}", left=t - n,
                              bar="#" * (p // 10) + " " * (10 - p // 10))
            text = f"{verb} {body}" if files else body
            u = (n, t) if units else None
            steps.append(Step(next(gaps), text, u))
        return Script(steps, lease, None, neighbours(rng, rate))
    return make


def repeated_text_units_rising(rng: random.Random) -> Script:
    """The same line every time while ``units_done`` rises at every heartbeat."""
    rate = pick_rate(rng)
    lease = lease_for(rate)
    gaps = beat_gaps(rng, rate, lease, irregular=True)
    text = rng.choice(["working…", f"still {rng.choice(WHAT)}", "processing batch", "ok"])
    t = rng.randint(20, 60)
    return Script([Step(next(gaps), text, (i + 1, t)) for i in range(rng.randint(20, 40))], lease, None,
                  neighbours(rng, rate))


def test_runs(rng: random.Random) -> Script:
    """pytest per file → "N passed" (the same once normalised), units_done = files done."""
    rate = pick_rate(rng)
    lease = lease_for(rate)
    gaps = beat_gaps(rng, rate, lease, irregular=True)
    t = rng.randint(15, 40)
    steps = []
    for i in range(t):
        path = f"tests/test_{W.name(rng)}_{i}.py"
        steps.append(Step(next(gaps), None, (i + 1, t), action=f"pytest {path}",
                          result=f"{rng.randint(1, 60)} passed in {rng.uniform(0.1, 9):.2f}s"))
    return Script(steps, lease, None, neighbours(rng, rate))


def healthy_script(gen: ReportGen) -> Callable[[random.Random], Script]:
    def make(rng: random.Random) -> Script:
        rate = pick_rate(rng)
        lease = lease_for(rate)
        gaps = beat_gaps(rng, rate, lease, irregular=True)
        it = gen(rng)
        t = rng.randint(10, 60)
        steps = []
        done = 0
        for _ in range(rng.randint(20, 40)):
            text, action, result = next(it)
            done = min(t, done + rng.choice((0, 0, 1, 1, 2)))
            steps.append(Step(next(gaps), text, (done, t) if rng.random() < 0.6 else None, action=action,
                              result=result))
        return Script(steps, lease, None, neighbours(rng, rate))
    return make


PROGRESS: dict[str, Callable[[random.Random], Script]] = {
    "a number toward its total, units rising": counter_progress(True),
    "a number toward its total, no units": counter_progress(False),
    "numbered generated files, units rising": counter_progress(True, files=True),
    "numbered generated files, no units": counter_progress(False, files=True),
    "the same line while units rise": repeated_text_units_rising,
    "test runs per file (N passed), units rising": test_runs,
    **{f"healthy: {k}": healthy_script(g) for k, g in HEALTHY.items()},
}


def families() -> dict[str, tuple[bool, Callable[[random.Random], Script]]]:
    """name → (is a loop, script maker), for tests/support/stalls.py's runner."""
    out: dict[str, tuple[bool, Callable[[random.Random], Script]]] = {}
    for name in LOOPS:
        out[f"loop: {name}"] = (True, lambda rng, n=name: report_loop_script(rng, n))
    for name, make in PROGRESS.items():
        out[f"progress: {name}"] = (False, make)
    return out
