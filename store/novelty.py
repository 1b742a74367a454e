"""New information in an agent's observations: what the stall signals judge (pure, no database).

An observation is split into lines; each line is **normalised** so that what changes without
meaning does not look new: case folded, white space collapsed, and volatile tokens replaced by a
placeholder — UUIDs, timestamps and dates, times of day, durations, temporary paths, hex and
random ids, numbers (counters included), runs of one symbol (progress bars). The original text is
kept for display; only the judgement uses the normalised form.

A line is **new** when its normalised form was not seen before *in the same attempt* (a retry
starts afresh: its digest includes the attempt) and it is not a **near-duplicate** (similarity
≥ ``NEAR``) of a line of the last ``RECENT`` observations. An observation's **identity** (the
digest its ``repeating`` and cycle judgements compare) is its normalised text's digest, or — when
it adds nothing new and is a near copy of one of the last ``RECENT`` observations — that
observation's identity, so small random edits do not hide a repeat.

The work per observation is bounded whatever the agent sends: at most ``MAX_LINES`` lines are
examined, each cut to ``MAX_LINE_CHARS`` characters, and at most ``MAX_COMPARISONS`` similarity
comparisons are made; what is left out is counted (``Prepared.dropped_lines``, ``cut_lines``).

``judge_sequence`` reads a sequence of identities (oldest first) for a repeat (period 1) or a cycle
(period 2–4).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Iterable, Sequence

MAX_LINES = 1000  # lines of one observation examined (the rest counted as dropped)
MAX_LINE_CHARS = 512  # characters of a line that make its identity
MAX_COMPARISONS = 600  # similarity comparisons per observation
RECENT = 4  # observations an observation is compared with (near copies, cycles up to this period)
NEAR = 0.9  # similarity (difflib ratio) from which two lines are near-duplicates …
NEAR_MIN_CHARS = 16  # … when the line has at least this many characters (shorter: exact only)
OBS_NEAR = 0.9  # share of lines matched both ways from which two observations are near copies

_MONTHS = (r"(?:jan|january|feb|february|mar|march|apr|april|may|jun|june|jul|july|aug|august|sep|sept|september|"
           r"oct|october|nov|november|dec|december)")
_DAYS = r"(?:mon|monday|tue|tues|tuesday|wed|wednesday|thu|thur|thurs|thursday|fri|friday|sat|saturday|sun|sunday)"
_UNITS = r"(?:ns|us|µs|ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?|d|days?)"
# Order matters: the specific shapes first, plain numbers last.
_VOLATILE: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uuid>"),
    # ISO 8601 and friends: 2027-01-15T08:00:00.123Z, 2027/01/15 08:00:00 +0100
    (r"\b\d{4}[-/]\d{1,2}[-/]\d{1,2}(?:[t ]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?)?(?:z|\s?[+-]\d{2}:?\d{2}\b)?", "<time>"),
    # 15/01/2027, 01-15-27; 15/jan/2027:08:00:00 (access logs); jan 15 2027; 15 jan 2027
    (r"\b\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}\b", "<time>"),
    (r"\b\d{1,2}[-/ ]" + _MONTHS + r"[-/ ,]+\d{2,4}(?::\d{2}:\d{2}:\d{2})?", "<time>"),
    (r"\b(?:" + _DAYS + r",?\s+)?" + _MONTHS + r"\s+\d{1,2}(?:st|nd|rd|th)?\b,?(?:\s+\d{4}\b)?", "<time>"),
    (r"\b\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:\s?[ap]m\b)?(?:\s?(?:z|utc|[+-]\d{2}:?\d{2}))?", "<time>"),
    # temporary paths: /tmp/…, /var/folders/…, C:\Users\x\AppData\Local\Temp\…, tmpa1b2c3d4
    (r"(?:/private)?/(?:var/)?(?:tmp|folders|shm)/[^\s'\"<>|,;)]*", "<tmp>"),
    (r"/dev/shm/[^\s'\"<>|,;)]*", "<tmp>"),
    (r"[a-z]:\\(?:[^\s\\]+\\)*?(?:temp|tmp)\\[^\s'\"<>|,;)]*", "<tmp>"),
    (r"\btmp[a-z0-9_]{5,}\b", "<tmp>"),
    # hex ids (git, object ids, addresses): 7+ hex digits with a digit; long random tokens
    (r"\b(?:0x)?(?=[0-9a-f]*\d)[0-9a-f]{7,}\b", "<hex>"),
    (r"\b(?=[a-z0-9_-]*\d)(?=[a-z0-9_-]*[a-z])[a-z0-9_-]{16,}\b", "<id>"),
    # durations: 1.5s, 950ms, 2m30s, 1h 2m, 3 minutes
    (r"\b\d+(?:[.,]\d+)?\s?" + _UNITS + r"(?:\s?\d+(?:[.,]\d+)?\s?" + _UNITS + r")*\b", "<dur>"),
    (r"\b\d+(?:st|nd|rd|th)\b", "<n>"),
    (r"[-+]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?", "<n>"),
    # runs of one symbol: progress bars, spinners, rules
    (r"([^\w\s<>])\1{2,}", r"\1\1\1"),
))


def normalise_line(line: str) -> str:
    """One line's normalised form ('' for a blank line)."""
    s = " ".join(line.casefold().split())
    for pattern, repl in _VOLATILE:
        s = pattern.sub(repl, s)
    return " ".join(s.split())


def iter_lines(text: str, max_lines: int = MAX_LINES, max_chars: int = MAX_LINE_CHARS) -> tuple[list[str], int, int]:
    """(the first ``max_lines`` raw lines, each cut to ``max_chars``; lines not examined; lines cut).

    Never splits the whole text: a megabyte line or a million lines cost what ``max_lines`` do."""
    out: list[str] = []
    cut = 0
    pos = 0
    n = len(text)
    while pos <= n and len(out) < max_lines:
        end = text.find("\n", pos)
        if end < 0:
            end = n
        if end - pos > max_chars:
            cut += 1
            out.append(text[pos:pos + max_chars])
        else:
            out.append(text[pos:end])
        pos = end + 1
    dropped = text.count("\n", pos) + 1 if pos <= n else 0
    return out, dropped, cut


def normalise_lines(text: str) -> list[str]:
    """Observation → its normalised, non-blank lines (the examined ones)."""
    lines, _, _ = iter_lines(str(text))
    return [x for x in (normalise_line(line) for line in lines) if x]


def line_digest(attempt: int, line: str) -> str:
    """The identity of a normalised line within one attempt (32 hex; ``seen_line.digest``)."""
    return hashlib.blake2b(f"{int(attempt)}\x00{line}".encode("utf-8"), digest_size=16).hexdigest()


def text_digest(lines: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Recent:
    """One of the last observations of the same attempt: its identity and normalised lines."""

    digest: str
    lines: tuple[str, ...]


@dataclass
class Prepared:
    """What an observation brings, before looking up which of its lines were seen."""

    lines: list[str]  # normalised, non-blank, examined
    line_digests: list[str]  # distinct, attempt-scoped, in first-seen order
    near: set[str]  # digests of lines that are near copies of a recent line (never new)
    own_digest: str  # the digest of the normalised text
    echo: str | None  # the identity of the recent observation it nearly copies, if any
    echo_lag: int | None  # how many observations back that one is (1 = the previous)
    dropped_lines: int = 0  # raw lines past MAX_LINES, not examined
    cut_lines: int = 0  # lines cut to MAX_LINE_CHARS
    comparisons: int = 0

    def digest(self, new_units: int) -> str:
        """The observation's identity: the echoed observation's when it adds nothing new."""
        return self.echo if self.echo is not None and new_units == 0 else self.own_digest

    def new_digests(self, seen: Iterable[str]) -> list[str]:
        seen = set(seen)
        return [d for d in self.line_digests if d not in seen and d not in self.near]


def prepare(text: str, attempt: int, recent: Sequence[Recent] = ()) -> Prepared:
    """Normalise an observation and compare it with the last observations of its attempt
    (``recent`` newest last). Pure and bounded (see the module doc)."""
    raw, dropped, cut = iter_lines(str(text))
    lines = [x for x in (normalise_line(line) for line in raw) if x]
    digests = list(dict.fromkeys(line_digest(attempt, x) for x in lines))
    own = text_digest(lines)
    recent = list(recent)[-RECENT:]
    near: set[str] = set()
    echo = None
    lag = None
    budget = [MAX_COMPARISONS]
    if recent and lines:
        recent_sets = [set(r.lines) for r in recent]
        everything = set().union(*recent_sets)
        # each line of this observation: which recent observations hold it, exactly or nearly
        where: list[set[int]] = []
        for line in dict.fromkeys(lines):
            hit = {j for j, s in enumerate(recent_sets) if line in s}
            nearly = False
            for j, r in enumerate(recent):
                if j not in hit and _near_match(line, (r,), budget) is not None:
                    hit.add(j)
                    nearly = True
            if nearly and line not in everything:
                near.add(line_digest(attempt, line))
            where.append(hit)
        best = 0.0
        for j in range(len(recent) - 1, -1, -1):  # newest first: ties go to the most recent
            r = recent[j]
            mine = sum(1 for h in where if j in h)
            if not r.lines:
                continue
            sim = 2 * min(mine, len(set(r.lines))) / (len(where) + len(set(r.lines)))
            if sim >= OBS_NEAR and sim > best:
                best, echo, lag = sim, r.digest, len(recent) - j
        if own in (r.digest for r in recent):  # an exact repeat is its own echo
            j = max(i for i, r in enumerate(recent) if r.digest == own)
            echo, lag = own, len(recent) - j
    return Prepared(lines, digests, near, own, echo, lag, dropped, cut, MAX_COMPARISONS - budget[0])


def _near_match(line: str, recent: Sequence[Recent], budget: list[int]) -> str | None:
    """A line of the recent observations this one nearly copies (difflib ratio ≥ NEAR), if any."""
    if len(line) < NEAR_MIN_CHARS:
        return None
    for r in reversed(recent):
        for other in r.lines:
            if budget[0] <= 0:
                return None
            lo, hi = sorted((len(line), len(other)))
            if 2 * lo / (lo + hi) < NEAR:  # the length bound of the ratio
                continue
            budget[0] -= 1
            sm = SequenceMatcher(None, line, other, autojunk=False)
            if sm.quick_ratio() >= NEAR and sm.ratio() >= NEAR:
                return other
    return None


class Tracker:
    """The novelty bookkeeping of one node kept in memory (the ledger keeps the same in its tables):
    ``observe(text, attempt)`` → (new lines, identity, Prepared)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.recent: list[Recent] = []
        self.attempt: int | None = None

    def observe(self, text: str, attempt: int) -> tuple[int, str, Prepared]:
        if attempt != self.attempt:
            self.attempt, self.recent = attempt, []
        p = prepare(text, attempt, self.recent)
        new = p.new_digests(self.seen)
        self.seen.update(p.line_digests)
        digest = p.digest(len(new))
        self.recent = (self.recent + [Recent(digest, tuple(p.lines))])[-RECENT:]
        return len(new), digest, p


# ---------------------------------------------------------------------- sequences of identities
@dataclass(frozen=True)
class Repeat:
    period: int  # 1: the same observation again; 2-4: a cycle over that many
    run: int  # how many observations in a row repeat the one ``period`` before them
    start: int  # index (in the sequence given) of the first observation of the repeating stretch

    @property
    def observations(self) -> int:
        return self.run + self.period


def judge_sequence(digests: Sequence[str], *, min_repeat: int = 3, max_period: int = RECENT,
                   min_cycle_run: int = 2) -> Repeat | None:
    """The repeat ending at the newest observation, if there is one worth an alarm: the same
    identity ``min_repeat`` times in a row (period 1), or a cycle of 2..``max_period`` distinct
    identities whose newest ``min_cycle_run`` observations each repeat the one a period before.
    The shortest period wins."""
    n = len(digests)
    for p in range(1, max_period + 1):
        run = 0
        while run < n - p and digests[n - 1 - run] == digests[n - 1 - run - p]:
            run += 1
        if p == 1:
            if run + 1 >= min_repeat:
                return Repeat(1, run, n - 1 - run)
            continue
        if run >= min_cycle_run and len(set(digests[n - p:])) == p:
            return Repeat(p, run, n - run - p)
    return None


def left_out(p: Prepared) -> str:
    """'' or a short note of what the caps left out of an observation."""
    parts = []
    if p.dropped_lines:
        parts.append(f"{p.dropped_lines:,} lines past the first {MAX_LINES:,} not examined")
    if p.cut_lines:
        parts.append(f"{p.cut_lines:,} lines cut to {MAX_LINE_CHARS} characters")
    return "; ".join(parts)
