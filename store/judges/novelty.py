"""New information in what an agent reports: what the stall signals judge (pure, no database).

A heartbeat may say what the step did (``action``), what it learned (``result``) and how it goes
(``observation``). What is **judged** is the result when there is one, else the observation, else
the action: new information is what the agent learned, not what it tried. The judged text is split
into lines; each line is **normalised** so that what changes without meaning does not look new:
case folded, white space collapsed, volatile tokens replaced by a placeholder — UUIDs, timestamps
and dates, times of day, durations, temporary paths, hex and random ids, numbers (counters
included; a lone ``0`` is kept: "0 results" is not "12 results"), runs of one symbol. Digits
inside a **file name** (``part-0004.parquet``, ``tests/test_17.py``) are kept: another file is
another thing. The original text is kept for display; only the judgement uses the normalised form.

A line is **new** when, within the same attempt (a retry starts afresh: every digest includes the
attempt), it is none of:

* a line seen before (its normalised form), or a **near copy** (difflib ratio ≥ ``NEAR``) of a
  line of the last ``RECENT_TEXT`` observations;
* a **paraphrase**: its concepts (``store/judges/concepts.py``: content words, stemmed, synonyms, order
  ignored) bring no new name of a thing (a *specific* token: ``test_login``, ``src/a.py``), at most
  one new word per ``NEW_WORDS_PER`` beyond the first (none in a line of one to four), and match an earlier line's concepts — the same set, or
  one word added, dropped or swapped (indexed in the seen memory, so the whole attempt is
  searched at a constant cost), or an overlap of at least ``PARA`` with a line of the last
  ``RECENT`` observations.

A **result** (a tool's output) is judged more strictly than a narrative: one whose every concept
the attempt has met before taught nothing, whatever its wording (a narrative must also match an
earlier line). The most general concepts (``concepts.WEAK``: failed, none, result …) never make a
narrative's line new by themselves. Its concepts are judged **without
the action's**: a result that repeats the query it answered ("no results for 'moth index'") adds
nothing by echoing it.

An observation's **identity** (what ``repeating`` and the cycle check compare) is its normalised
text's digest — or, when it adds nothing new and matches (exactly, nearly or as a paraphrase)
≥ ``OBS_NEAR`` of the lines of one of the last ``RECENT`` observations both ways, that
observation's identity. With an action, the identity is the pair (action, result identity): the
same action with the same result repeats; other actions with the same result do not (they are
judged by ``no_new_info``, which names the result and how many actions got it).

The work per observation is bounded whatever the agent sends: at most ``MAX_LINES`` lines are
examined, each cut to ``MAX_LINE_CHARS`` characters, at most ``CONCEPT_LINES`` of them judged by
their concepts (the rest by their form), at most ``MAX_COMPARISONS`` character comparisons; what
is left out is counted (``Prepared.dropped_lines``, ``cut_lines``).

The memory is a set of digests (``seen_line`` in the ledger, a ``set`` in :class:`Tracker`):
:func:`prepare` works out which digests matter (pure), the caller looks them up, and
:func:`judge` decides with what was found. ``judge_sequence`` reads a sequence of identities
(oldest first) for a repeat (period 1) or a cycle (period 2-8).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Iterable, Sequence

from store.judges.concepts import MAX_CONCEPTS, WEAK, advanced, concepts, fractions, is_specific

MAX_LINES = 1000  # lines of one observation examined (the rest counted as dropped)
MAX_LINE_CHARS = 512  # characters of a line that make its identity
MAX_COMPARISONS = 600  # character similarity comparisons per observation
MAX_CONCEPT_VISITS = 20_000  # concept index entries visited per observation (recent paraphrases)
CONCEPT_LINES = 64  # lines of one observation judged by their concepts (the rest by their form)
RECENT = 8  # observations an observation is compared with (paraphrases, echoes, cycles up to 8)
RECENT_TEXT = 4  # … of which these are also compared character by character (near copies)
NEAR = 0.9  # similarity (difflib ratio) from which two lines are near-duplicates …
NEAR_MIN_CHARS = 16  # … when the line has at least this many characters (shorter: exact only)
OBS_NEAR = 0.9  # share of lines matched both ways from which two observations are near copies
NEW_WORDS_PER = 4  # a paraphrase brings at most one new concept word per 4 beyond the first (none in 1-4)
PARA = 0.6  # concept overlap |a ∩ b| / max(|a|, |b|) from which two lines say the same
EDIT_SIZES = (3, 12)  # concept sets of these sizes are indexed for one-word edits
STORED_KEYS = 256  # lines of an observation whose keys are stored for later comparisons
# digests one observation may add to the memory: its lines, and for each concept-judged line its
# words, its set and (sizes within EDIT_SIZES) the set less each word
MAX_MEMORY = MAX_LINES + CONCEPT_LINES * (2 * MAX_CONCEPTS + 1)

_MONTHS = (r"(?:jan|january|feb|february|mar|march|apr|april|may|jun|june|jul|july|aug|august|sep|sept|september|"
           r"oct|october|nov|november|dec|december)")
_DAYS = r"(?:mon|monday|tue|tues|tuesday|wed|wednesday|thu|thur|thurs|thursday|fri|friday|sat|saturday|sun|sunday)"
_UNITS = r"(?:ns|us|µs|ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?|d|days?)"
_DIGITS = str.maketrans("0123456789", "".join(chr(0xE000 + i) for i in range(10)))
_UNDIGITS = str.maketrans({chr(0xE000 + i): str(i) for i in range(10)})
# a file name: letters/digits/_/- (and directories) ending in .ext (a letter first); not a temp name
_FILE = re.compile(r"(?<![\w.])(?:[\w-]+[/\\])*[\w-]*[a-z_-][\w-]*\.[a-z][a-z0-9]{0,7}\b")
_RANDOM = re.compile(r"tmp[a-z0-9_]{5,}|[0-9a-f]{7,}|[0-9a-f]{8}-[0-9a-f]{4}")
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
    (r"(?<![\w.,])0+(?![\w.,])", "0"),  # a lone zero stays: "0 results" is not "12 results"
    (r"[-+]?(?<![\d])(?!0+(?![\w.,]))\d+(?:[.,]\d+)*(?:e[-+]?\d+)?", "<n>"),
    # runs of one symbol: progress bars, spinners, rules
    (r"([^\w\s<>])\1{2,}", r"\1\1\1"),
))


def _keep_file_digits(m: re.Match[str]) -> str:
    name = m.group(0)
    return name if _RANDOM.search(name) else name.translate(_DIGITS)


def normalise_line(line: str) -> str:
    """One line's normalised form ('' for a blank line)."""
    s = " ".join(line.casefold().split())
    if "." in s:
        s = _FILE.sub(_keep_file_digits, s)
    for pattern, repl in _VOLATILE:
        s = pattern.sub(repl, s)
    return " ".join(s.translate(_UNDIGITS).split())


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


def normalise_lines(text: str, cache: dict[str, str] | None = None) -> list[str]:
    """Text → its normalised, non-blank lines (the examined ones). ``cache``: raw line → its
    normalised form, shared by the texts of one judgement (a growing log repeats its lines)."""
    lines, _, _ = iter_lines(str(text))
    if cache is None:
        return [x for x in (normalise_line(line) for line in lines) if x]
    out = []
    for line in lines:
        x = cache.get(line)
        if x is None:
            x = cache[line] = normalise_line(line)
        if x:
            out.append(x)
    return out


def line_digest(attempt: int, line: str) -> str:
    """The identity of a normalised line within one attempt (32 hex; ``seen_line.digest``)."""
    return hashlib.blake2b(f"{int(attempt)}\x00{line}".encode("utf-8"), digest_size=16).hexdigest()


def _memo(attempt: int, kind: str, words: Iterable[str]) -> str:
    """A digest of the memory that is not a line: a concept word (``w``), a concept set (``c``), a
    set less one word (``o``); attempt-scoped like lines, in the same ``seen_line`` table."""
    return line_digest(attempt, f"\x01{kind}\x00" + "\x00".join(sorted(words)))


def line_key(line: str) -> str:
    """A short attempt-free key of a normalised line (stored with an observation's concepts)."""
    return hashlib.blake2b(line.encode("utf-8"), digest_size=6).hexdigest()


def text_digest(lines: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def pair_digest(action_key: str | None, content: str) -> str:
    """An observation's identity from its action (None: none given) and its content's identity."""
    if action_key is None:
        return content
    return hashlib.sha256(f"{action_key}\x00{content}".encode("utf-8")).hexdigest()


def action_key(action: str | None) -> str | None:
    """What an action is, once normalised (``search('moth v2')`` and ``search('moth v3')`` differ;
    a timestamp in it does not make it another action)."""
    if action is None:
        return None
    return text_digest(normalise_lines(action))[:32]


def excerpt(text: str | None, cap: int = 80) -> str | None:
    """An action or a result as the heartbeat event and the evidence carry it: one line, at most
    ``cap`` characters (agent text: the console shows it escaped)."""
    if text is None:
        return None
    t = " ".join(str(text).split())
    return t if len(t) <= cap else t[: cap - 1] + "…"


# ---------------------------------------------------------------------- recent observations
@dataclass(frozen=True)
class Recent:
    """One of the last observations of the same attempt, as far as a later one is compared with it:
    its identity, its content's identity, its normalised lines (for character comparisons; may be
    empty), its line keys with their concepts, and the fractions it stated."""

    digest: str
    lines: tuple[str, ...] = ()
    content: str | None = None  # the judged content's identity (the digest when no action)
    keys: tuple[str, ...] = ()
    sets: tuple[frozenset[str], ...] = ()  # the concepts of its first lines (≤ CONCEPT_LINES)
    fractions: tuple[tuple[str, float, float], ...] = ()

    @classmethod
    def of_lines(cls, digest: str, lines: Sequence[str], content: str | None = None,
                 fracs: tuple[tuple[str, float, float], ...] = ()) -> "Recent":
        lines = tuple(dict.fromkeys(lines))
        return cls(digest, lines, content, tuple(line_key(x) for x in lines[:STORED_KEYS]),
                   tuple(concepts(x) for x in lines[:CONCEPT_LINES]), fracs)

    @property
    def size(self) -> int:
        return max(len(self.keys), len(self.lines))


def encode_concepts(p: "Prepared") -> str:
    """An observation's line keys and concepts as stored (``observation.concepts``): a line per
    examined line (≤ ``STORED_KEYS``), its key then its concepts (≤ ``CONCEPT_LINES`` lines)."""
    out = []
    for i, line in enumerate(p.lines[:STORED_KEYS]):
        words = " ".join(sorted(p.sets[i])) if i < len(p.sets) else ""
        out.append(f"{line_key(line)} {words}".rstrip())
    return "\n".join(out)


def decode_concepts(digest: str, content: str | None, stored: str | None, lines: Sequence[str] = (),
                    fracs: tuple[tuple[str, float, float], ...] = ()) -> Recent:
    """A stored observation (its identity, content identity, ``concepts`` column, and — for the
    newest few — its normalised lines) → :class:`Recent`."""
    if not stored:
        return Recent.of_lines(digest, lines, content, fracs)
    keys: list[str] = []
    sets: list[frozenset[str]] = []
    for row in stored.split("\n"):
        key, _, words = row.partition(" ")
        keys.append(key)
        if len(sets) < CONCEPT_LINES:
            sets.append(frozenset(words.split()))
    return Recent(digest, tuple(lines), content, tuple(keys), tuple(sets), fracs)


# ---------------------------------------------------------------------- one observation
@dataclass
class Prepared:
    """What a heartbeat's report brings, before looking up what the attempt has seen."""

    lines: list[str]  # the judged text: normalised, non-blank, examined, distinct (in first-seen order)
    line_digests: list[str]  # attempt-scoped, parallel to ``lines``
    sets: list[frozenset[str]]  # concepts of the first CONCEPT_LINES lines
    near: list[bool]  # line i nearly copies (characters) or is a line of a recent observation
    window: list[bool]  # line i's concepts overlap a recent line's by ≥ PARA
    where: list[set[int]]  # line i matches (exactly, nearly, by concepts) these recent observations
    own_digest: str  # the digest of the judged text's normalised lines
    action: str | None  # the action's key (None: no action)
    attempt: int
    result: bool  # the judged text is a result (a tool's output), not a narrative
    recent_digests: list[str] = field(default_factory=list)
    recent_contents: list[str] = field(default_factory=list)
    recent_sizes: list[int] = field(default_factory=list)
    fractions: tuple[tuple[str, float, float], ...] = ()
    text_progress: bool = False  # a number moved toward its stated total since the last observation
    examined: int = 0  # non-blank lines examined (repeats included)
    dropped_lines: int = 0  # raw lines past MAX_LINES, not examined
    cut_lines: int = 0  # lines cut to MAX_LINE_CHARS
    comparisons: int = 0

    def lookups(self) -> list[str]:
        """Every digest of the memory whose presence :func:`judge` reads."""
        out = list(self.line_digests)
        for s in self.sets:
            out.extend(_memo(self.attempt, "w", (w,)) for w in s)
            out.extend(_queries(self.attempt, s))
        return list(dict.fromkeys(out))


def _queries(attempt: int, s: frozenset[str]) -> list[str]:
    """Digests that say an earlier line's concepts equal ``s`` up to one word added, dropped or swapped."""
    if not s:
        return []
    out = [_memo(attempt, "c", s)]
    n = len(s)
    if n >= 2:
        out.append(_memo(attempt, "o", s))  # an earlier set = s + one word
    if EDIT_SIZES[0] <= n <= EDIT_SIZES[1]:
        for w in s:
            rest = s - {w}
            out.append(_memo(attempt, "o", rest))  # one word swapped
            out.append(_memo(attempt, "c", rest))  # s = an earlier set + one word
    return out


def _entries(attempt: int, s: frozenset[str]) -> list[str]:
    """What a line's concepts add to the memory (its set; each set less one word)."""
    if not s:
        return []
    out = [_memo(attempt, "c", s)]
    if EDIT_SIZES[0] <= len(s) <= EDIT_SIZES[1] + 1:
        out.extend(_memo(attempt, "o", s - {w}) for w in s)
    return out


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / max(len(a), len(b))


def prepare(text: str | None, attempt: int, recent: Sequence[Recent] = (), *, action: str | None = None,
            result: str | None = None, cache: dict[str, str] | None = None) -> Prepared:
    """The judged text (the result, else ``text`` — the observation —, else the action) normalised
    and compared with the last observations of its attempt (``recent`` newest last). Pure and
    bounded (see the module doc). ``cache``: see :func:`normalise_lines`."""
    judged = result if result is not None else text if text is not None else action or ""
    raw, dropped, cut = iter_lines(str(judged))
    cache = {} if cache is None else cache
    examined = []
    for text_line in raw:
        x = cache.get(text_line)
        if x is None:
            x = cache[text_line] = normalise_line(text_line)
        if x:
            examined.append(x)
    lines = list(dict.fromkeys(examined))
    drop = concepts(" ".join(normalise_lines(action))) if result is not None and action else frozenset()
    sets = [concepts(x, drop) for x in lines[:CONCEPT_LINES]]
    recent = list(recent)[-RECENT:]
    near = [False] * len(lines)
    window = [False] * len(lines)
    where: list[set[int]] = [set() for _ in lines]
    budget = [MAX_COMPARISONS]
    if recent and lines:
        index: dict[str, list[int]] = {}  # concept word → the recent lines (ids in ``owners``) holding it
        owners: list[tuple[int, frozenset[str]]] = []
        for j, r in enumerate(recent):
            for s in r.sets:
                if s:
                    for w in s:
                        index.setdefault(w, []).append(len(owners))
                    owners.append((j, s))
        visits = [MAX_CONCEPT_VISITS]
        key_sets = [set(r.keys) for r in recent]
        line_sets = [set(r.lines) for r in recent]
        for i, line in enumerate(lines):
            k = line_key(line)
            for j in range(len(recent)):
                if k in key_sets[j] or line in line_sets[j]:
                    where[i].add(j)
            for j, r in enumerate(recent[-RECENT_TEXT:], start=len(recent) - min(RECENT_TEXT, len(recent))):
                if j not in where[i] and r.lines and _near_match(line, r.lines, budget):
                    where[i].add(j)
            near[i] = bool(where[i])
            if i < len(sets) and sets[i] and visits[0] > 0:
                found = _overlapping(sets[i], index, owners, visits)
                window[i] = bool(found - where[i]) or (bool(found) and not near[i])
                where[i] |= found
    fracs = fractions("\n".join(t for t in (text, action, result) if t))
    progress = bool(recent) and advanced(recent[-1].fractions, fracs)
    return Prepared(lines, [line_digest(attempt, x) for x in lines], sets, near, window, where, text_digest(lines),
                    action_key(action), attempt, result is not None, [r.digest for r in recent],
                    [r.content or r.digest for r in recent], [r.size for r in recent], fracs, progress, len(examined),
                    dropped, cut, MAX_COMPARISONS - budget[0])


def _overlapping(mine: frozenset[str], index: dict[str, list[int]], owners: Sequence[tuple[int, frozenset[str]]],
                 visits: list[int]) -> set[int]:
    """The recent observations holding a line whose concepts overlap ``mine`` by ≥ PARA (an
    inverted index: the work is the postings visited, capped by ``visits``)."""
    counts: dict[int, int] = {}
    for w in mine:
        posting = index.get(w, ())
        visits[0] -= len(posting)
        for o in posting:
            counts[o] = counts.get(o, 0) + 1
        if visits[0] <= 0:
            break
    out = set()
    for o, shared in counts.items():
        j, other = owners[o]
        if shared / max(len(mine), len(other)) >= PARA:
            out.add(j)
    return out


_DIGIT_RUN = re.compile(r"\d+")


def _near_match(line: str, others: Sequence[str], budget: list[int]) -> bool:
    """True when ``line`` nearly copies one of ``others`` (difflib ratio ≥ NEAR). Two lines that
    differ only in the digits a normalised line keeps (a file's number: ``part-0004.parquet``)
    name two things: not a near copy."""
    if len(line) < NEAR_MIN_CHARS:
        return False
    masked = _DIGIT_RUN.sub("#", line) if any(c.isdigit() for c in line) else None
    for other in others:
        if budget[0] <= 0:
            return False
        lo, hi = sorted((len(line), len(other)))
        if 2 * lo / (lo + hi) < NEAR:  # the length bound of the ratio
            continue
        if masked is not None and masked == _DIGIT_RUN.sub("#", other):
            continue
        budget[0] -= 1
        sm = SequenceMatcher(None, line, other, autojunk=False)
        if sm.quick_ratio() >= NEAR and sm.ratio() >= NEAR:
            return True
    return False


@dataclass(frozen=True)
class Verdict:
    """What one observation brought, judged against the attempt's memory."""

    new_units: int  # lines that are new information
    digest: str  # the observation's identity (repeats and cycles compare it)
    content: str  # the judged content's identity (the result's, with an action)
    remember: tuple[str, ...]  # digests the memory should hold from now on (not there yet)
    paraphrases: int = 0  # lines that were old only as paraphrases (their concepts)
    echo_lag: int | None = None  # how many observations back the echoed one is (1 = the previous)


def judge(p: Prepared, seen: Iterable[str]) -> Verdict:
    """Decide what ``p`` brings given the digests of the memory that ``seen`` holds (those of
    ``p.lookups()`` found there)."""
    seen = set(seen)
    memo = lambda kind, words: _memo(p.attempt, kind, words)  # noqa: E731
    said: set[str] = set()  # concept words of earlier lines of this observation
    earlier: list[frozenset[str]] = []
    new = paraphrases = 0
    remember: list[str] = []
    for i, line in enumerate(p.lines):
        d = p.line_digests[i]
        s = p.sets[i] if i < len(p.sets) else frozenset()
        old = d in seen or p.near[i]
        if not old and s:
            unseen = [w for w in s if w not in said and memo("w", (w,)) not in seen]
            fresh = [w for w in unseen if w not in WEAK]
            if p.result and not unseen:
                old = True  # a tool's output that names nothing new taught nothing new
                paraphrases += 1
            elif not any(is_specific(w) for w in fresh) and len(fresh) <= (len(s) - 1) // NEW_WORDS_PER:
                if (p.window[i] or any(q in seen for q in _queries(p.attempt, s))
                        or any(_overlap(s, e) >= PARA for e in earlier)):
                    old = True
                    paraphrases += 1
        if not old:
            new += 1
        remember.append(d)
        remember.extend(memo("w", (w,)) for w in s)
        remember.extend(_entries(p.attempt, s))
        said.update(s)
        earlier.append(s)
    content, lag = p.own_digest, None
    if new == 0 and p.recent_digests:
        content, lag = _echo(p)
    remember = [d for d in dict.fromkeys(remember) if d not in seen]
    return Verdict(new, pair_digest(p.action, content), content, tuple(remember), paraphrases, lag)


def _echo(p: Prepared) -> tuple[str, int | None]:
    """The content identity of the recent observation ``p`` repeats (exactly, nearly or in other
    words), and how far back it is; else ``p``'s own."""
    n = len(p.recent_contents)
    if p.own_digest in p.recent_contents:  # an exact repeat is its own echo
        j = max(i for i, c in enumerate(p.recent_contents) if c == p.own_digest)
        return p.own_digest, n - j
    best, found = 0.0, None
    for j in range(n - 1, -1, -1):  # newest first: ties go to the most recent
        size = p.recent_sizes[j]
        if not size:
            continue
        mine = sum(1 for w in p.where if j in w)
        sim = 2 * min(mine, size) / (len(p.lines) + size)
        if sim >= OBS_NEAR and sim > best:
            best, found = sim, j
    if found is None:
        return p.own_digest, None
    return p.recent_contents[found], n - found


class Tracker:
    """The novelty bookkeeping of one node kept in memory (the ledger keeps the same in its tables):
    ``observe(text, attempt, action=, result=)`` → (new lines, identity, Prepared)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.recent: list[Recent] = []
        self.attempt: int | None = None
        self.last: Verdict | None = None

    def observe(self, text: str | None, attempt: int, *, action: str | None = None,
                result: str | None = None) -> tuple[int, str, Prepared]:
        if attempt != self.attempt:
            self.attempt, self.recent = attempt, []
        p = prepare(text, attempt, self.recent, action=action, result=result)
        v = judge(p, (d for d in p.lookups() if d in self.seen))
        self.seen.update(v.remember)
        self.last = v
        self.recent = (self.recent + [Recent(v.digest, tuple(p.lines), v.content,
                                             tuple(line_key(x) for x in p.lines[:STORED_KEYS]), tuple(p.sets),
                                             p.fractions)])[-RECENT:]
        return v.new_units, v.digest, p


# ---------------------------------------------------------------------- sequences of identities
@dataclass(frozen=True)
class Repeat:
    period: int  # 1: the same observation again; 2-8: a cycle over that many
    run: int  # how many observations in a row repeat the one ``period`` before them
    start: int  # index (in the sequence given) of the first observation of the repeating stretch

    @property
    def observations(self) -> int:
        return self.run + self.period


def judge_sequence(digests: Sequence[str], *, min_repeat: int = 3, max_period: int = RECENT,
                   min_cycle_run: int = 2, long_cycle_run: int = 3, long_from: int = 5) -> Repeat | None:
    """The repeat ending at the newest observation, if there is one worth an alarm: the same
    identity ``min_repeat`` times in a row (period 1), or a cycle of 2..``max_period`` distinct
    identities whose newest ``min_cycle_run`` observations (``long_cycle_run`` from a period of
    ``long_from``) each repeat the one a period before. The shortest period wins."""
    n = len(digests)
    for p in range(1, max_period + 1):
        run = 0
        while run < n - p and digests[n - 1 - run] == digests[n - 1 - run - p]:
            run += 1
        if p == 1:
            if run + 1 >= min_repeat:
                return Repeat(1, run, n - 1 - run)
            continue
        need = long_cycle_run if p >= long_from else min_cycle_run
        if run >= need and len(set(digests[n - p:])) == p:
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
