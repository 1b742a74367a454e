"""New information in what an agent reports: what the stall signals judge (pure, no database).

A heartbeat may say what the step did (``action``), what it learned (``result``) and how it goes
(``observation``). What is **judged** is the result when there is one, else the observation, else
the action: new information is what the agent learned, not what it tried. A plain observation laid
out as a note, a command and its output (``store/judges/roles.py``) is judged the same way: its
output is the result, its command the action. The judged text is cut into **units** (lines; a long
paragraph into its sentences) and each is **normalised** by what its fields use
(``store/judges/units.py``, ``store/judges/fields.py``): numbers in any format, drawn ids, temporary
paths and every timestamp or duration come out as the same skeleton each time; digits inside a
file name with one short number are kept (another file is another thing). The original text is
kept for display; only the judgement uses the normalised form.

A unit is **new** when, within the same attempt (a retry starts afresh: every digest includes the
attempt), it is none of:

* a unit seen before (its normalised form), or a **near copy** (similarity ≥ ``NEAR``) of a
  unit of the last ``RECENT_TEXT`` observations;
* an **instance of a template** learnt from the stream (Drain-style, ``units.template_match``)
  whose fields hold nothing new: the values that differ only echo the step's action — unless the
  step is one the attempt had not taken and it did not fail (the next file converted, the next
  page fetched: doing a new step that works is news);
* a **paraphrase**: its concepts (``store/judges/concepts.py``: content words, stemmed, synonyms,
  order ignored) bring no new name of a thing (a *specific* token: ``test_login``, ``src/a.py``), at
  most one new word per ``NEW_WORDS_PER`` beyond the first (none in a unit of one to four), and
  match an earlier unit's concepts — the same set, or one word added, dropped or swapped (indexed
  in the seen memory, so the whole attempt is searched at a constant cost), or an overlap of at
  least ``PARA`` with a unit of the last ``RECENT`` observations.

A **result** (a tool's output) is judged more strictly than a narrative: one whose every concept
the attempt has met before taught nothing, whatever its wording — unless it is an instance of a
known template with new values in its fields (the next product page, the next ticket: new
values are news). The most general concepts (``concepts.WEAK``: failed, none, result …) never make
a narrative's unit new by themselves. Its concepts are judged **without the action's**: a result
that repeats the query it answered ("no results for 'moth index'") adds nothing by echoing it.

A result's unit old by its form is new when it holds **values** the attempt has not met
(``_measured``: plain counts, readings and record numbers kept; times, durations, ids masked) — a
listing's other records, a probe's moved reading — when such units are most of the result and no
unit of it failed (a failure whose numbers move is the same failure). A narrative's values are
remembered too: lines of the agent's notes coming back as a tool's output hold no unmet values.

An observation's **identity** (what ``repeating`` and the cycle check compare) is its normalised
text's digest — or, when it adds nothing new and matches (exactly, nearly or as a paraphrase)
≥ ``OBS_NEAR`` of the units of one of the last ``RECENT`` observations both ways, that
observation's identity. With an action, the identity is the pair (action, result identity): the
same action with the same result repeats; other actions with the same result do not (they are
judged by ``no_new_info``, which names the result and how many actions got it).

**Progress** read from the judged text and the note (never from the action: a page number the
agent asked for is not a page it got): numbers moving toward a stated total, in any format
(``fields.fractions``), and the next name of a numbered series (``fields.enumerations``).

The work per observation is bounded whatever the agent sends: at most ``MAX_LINES`` units are
examined, each line read up to ``units.LINE_READ`` characters and each unit cut to
``MAX_LINE_CHARS``, at most ``CONCEPT_LINES`` of them judged by their concepts (the rest by their
form), at most ``MAX_COMPARISONS`` similarity comparisons; what is left out is counted
(``Prepared.dropped_lines``, ``cut_lines``).

The memory is a set of digests (``seen_line`` in the ledger, a ``set`` in :class:`Tracker`):
:func:`prepare` works out which digests matter (pure), the caller looks them up, and
:func:`judge` decides with what was found. ``judge_sequence`` (``store/judges/sequence.py``)
reads a sequence of identities (oldest first) for a repeat (period 1) or a cycle (period 2-8).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from store.judges.concepts import MAX_CONCEPTS, WEAK, concepts, is_specific
from store.judges.fields import advanced, echo_tokens, mask_action, progress_marks
from store.judges.roles import split_report
from store.judges.sequence import Repeat, judge_sequence
from store.judges.units import (MAX_COMPARISONS, MAX_LINE_CHARS, MAX_LINES, NEAR, iter_lines, near_match, normalise_line,
                                normalise_lines, normalised, template_match)

MAX_CONCEPT_VISITS = 20_000  # concept index entries visited per observation (recent paraphrases)
CONCEPT_LINES = 64  # units of one observation judged by their concepts (the rest by their form)
RECENT = 8  # observations an observation is compared with (paraphrases, echoes, cycles up to 8)
RECENT_TEXT = 4  # … of which these are also compared character by character (near copies, templates)
OBS_NEAR = 0.9  # share of units matched both ways from which two observations are near copies
NEW_WORDS_PER = 4  # a paraphrase brings at most one new concept word per 4 beyond the first (none in 1-4)
PARA = 0.6  # concept overlap |a ∩ b| / max(|a|, |b|) from which two units say the same
EDIT_SIZES = (3, 12)  # concept sets of these sizes are indexed for one-word edits
STORED_KEYS = 256  # units of an observation whose keys are stored for later comparisons
FAILED = frozenset({"fail", "none", "missing", "refus", "denied", "timeout", "oom"})  # concepts of a failed or empty outcome
# digests one observation may add to the memory: its units, and for each concept-judged unit its
# words, its set and (sizes within EDIT_SIZES) the set less each word
MAX_MEMORY = MAX_LINES + CONCEPT_LINES * (2 * MAX_CONCEPTS + 1)


def line_digest(attempt: int, line: str) -> str:
    """The identity of a normalised unit within one attempt (32 hex; ``seen_line.digest``)."""
    return hashlib.blake2b(f"{int(attempt)}\x00{line}".encode("utf-8"), digest_size=16).hexdigest()


def _memo(attempt: int, kind: str, words: Iterable[str]) -> str:
    """A digest of the memory that is not a unit: a concept word (``w``), a concept set (``c``), a
    set less one word (``o``); attempt-scoped like units, in the same ``seen_line`` table."""
    return line_digest(attempt, f"\x01{kind}\x00" + "\x00".join(sorted(words)))


def line_key(line: str) -> str:
    """A short attempt-free key of a normalised unit (stored with an observation's concepts)."""
    return hashlib.blake2b(line.encode("utf-8"), digest_size=6).hexdigest()


def text_digest(lines: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def pair_digest(action_key: str | None, content: str) -> str:
    """An observation's identity from its action (None: none given) and its content's identity."""
    if action_key is None:
        return content
    return hashlib.sha256(f"{action_key}\x00{content}".encode("utf-8")).hexdigest()


def action_key(action: str | None) -> str | None:
    """What an action is, once normalised (``fields.mask_action``: ``search('moth v2')`` and
    ``search('moth v3')`` differ, so do two dates or pages asked for; a drawn id in it does not make
    it another action)."""
    if action is None:
        return None
    lines, _, _ = iter_lines(str(action))
    return text_digest([x for x in (mask_action(line) for line in lines) if x])[:32]


def excerpt(text: str | None, cap: int = 80) -> str | None:
    """An action or a result as the heartbeat event and the evidence carry it: one line, at most
    ``cap`` characters (agent text: the console shows it escaped)."""
    if text is None:
        return None
    t = " ".join(str(text).split())
    return t if len(t) <= cap else t[: cap - 1] + "…"


@dataclass(frozen=True)
class Judged:
    """What of a report is judged: the text (the result, a plain report's output, else the
    observation, else the action), whether it is a result, the action it answers, and the note
    (the agent's own words beside it, read for progress only)."""

    text: str
    result: bool
    action: str | None
    note: str | None


def judged_parts(text: str | None, action: str | None = None, result: str | None = None) -> Judged:
    """The parts of a report as they are judged (module doc)."""
    if result is not None:
        return Judged(str(result), True, action, text)
    if text is not None and action is None:
        parts = split_report(str(text))
        if parts is not None:
            out = parts.output if parts.output.strip() else (parts.command or "")
            return Judged(out, bool(parts.output.strip()), parts.command, parts.note)
        return Judged(str(text), False, None, None)
    return Judged(str(text) if text is not None else action or "", False, action, None)


def judged_lines(j: Judged, cache: dict[str, str] | None = None) -> list[str]:
    """The normalised units of what is judged of a report (an output keeps what its action named)."""
    return normalise_lines(j.text, cache, echo_tokens(j.action) if j.result else frozenset())


def measures_of(text: str | None, action: str | None = None, result: str | None = None) -> str:
    """The values a report measured (``fields.mask_line(measures=True)``: a loss, a count, a size —
    not a duration, a clock time or an id), as a digest: two reports with the same content identity
    and the same measures did the same step and measured the same, and a counter rising beside them
    is not progress."""
    j = judged_parts(text, action, result)
    raw, _, _ = iter_lines(j.text)
    values = [t for line in raw for t in normalise_line(line, measures=True).split() if any(c.isdigit() for c in t)]
    return text_digest(values)[:16]


def progress_of(text: str | None, action: str | None = None, result: str | None = None) -> tuple[tuple[str, float, float], ...]:
    """What a report states of its progress (module doc): read from its judged text and its note."""
    j = judged_parts(text, action, result)
    return progress_marks("\n".join(t for t in (j.note, j.text) if t))


# ---------------------------------------------------------------------- recent observations
@dataclass(frozen=True)
class Recent:
    """One of the last observations of the same attempt, as far as a later one is compared with it:
    its identity, its normalised units (for character comparisons; may be empty), its content's
    identity, its unit keys with their concepts, the progress it stated, and its action's key."""

    digest: str
    lines: tuple[str, ...] = ()
    content: str | None = None  # the judged content's identity (the digest when no action)
    keys: tuple[str, ...] = ()
    sets: tuple[frozenset[str], ...] = ()  # the concepts of its first units (≤ CONCEPT_LINES)
    fractions: tuple[tuple[str, float, float], ...] = ()
    action: str | None = None

    @classmethod
    def of_lines(cls, digest: str, lines: Sequence[str], content: str | None = None,
                 fracs: tuple[tuple[str, float, float], ...] = (), action: str | None = None) -> "Recent":
        lines = tuple(dict.fromkeys(lines))
        return cls(digest, lines, content, tuple(line_key(x) for x in lines[:STORED_KEYS]),
                   tuple(concepts(x) for x in lines[:CONCEPT_LINES]), fracs, action)

    @property
    def size(self) -> int:
        return max(len(self.keys), len(self.lines))


def encode_concepts(p: "Prepared") -> str:
    """An observation's unit keys and concepts as stored (``observation.concepts``): a line per
    examined unit (≤ ``STORED_KEYS``), its key then its concepts (≤ ``CONCEPT_LINES`` units)."""
    out = []
    for i, line in enumerate(p.lines[:STORED_KEYS]):
        words = " ".join(sorted(p.sets[i])) if i < len(p.sets) else ""
        out.append(f"{line_key(line)} {words}".rstrip())
    return "\n".join(out)


def decode_concepts(digest: str, content: str | None, stored: str | None, lines: Sequence[str] = (),
                    fracs: tuple[tuple[str, float, float], ...] = (), action: str | None = None) -> Recent:
    """A stored observation (its identity, content identity, ``concepts`` column, and — for the
    newest few — its normalised units) → :class:`Recent`."""
    if not stored:
        return Recent.of_lines(digest, lines, content, fracs, action)
    keys: list[str] = []
    sets: list[frozenset[str]] = []
    for row in stored.split("\n"):
        key, _, words = row.partition(" ")
        keys.append(key)
        if len(sets) < CONCEPT_LINES:
            sets.append(frozenset(words.split()))
    # distinct units, as :meth:`Recent.of_lines` and :func:`prepare` count them (a page repeating a
    # sentence is not bigger than the same page seen again)
    return Recent(digest, tuple(dict.fromkeys(lines)), content, tuple(keys), tuple(sets), fracs, action)


# ---------------------------------------------------------------------- one observation
@dataclass
class Prepared:
    """What a heartbeat's report brings, before looking up what the attempt has seen."""

    lines: list[str]  # the judged units: normalised, non-blank, examined, distinct (in first-seen order)
    line_digests: list[str]  # attempt-scoped, parallel to ``lines``
    sets: list[frozenset[str]]  # concepts of the first CONCEPT_LINES units
    near: list[bool]  # unit i nearly copies (characters) or is a unit of a recent observation
    window: list[bool]  # unit i's concepts overlap a recent unit's by ≥ PARA
    where: list[set[int]]  # unit i matches (exactly, nearly, by concepts) these recent observations
    own_digest: str  # the digest of the judged units
    action: str | None  # the action's key (None: no action; a plain report's command counts)
    attempt: int
    result: bool  # the judged text is a result (a tool's output), not a narrative
    recent_digests: list[str] = field(default_factory=list)
    recent_contents: list[str] = field(default_factory=list)
    recent_sizes: list[int] = field(default_factory=list)
    fractions: tuple[tuple[str, float, float], ...] = ()
    text_progress: bool = False  # a number moved toward its stated total, or a series moved on
    examined: int = 0  # non-blank units examined (repeats included)
    dropped_lines: int = 0  # raw lines past MAX_LINES, not examined
    cut_lines: int = 0  # units cut to MAX_LINE_CHARS
    comparisons: int = 0
    fields: list[str | None] = field(default_factory=list)  # unit i as a template instance (``_template``)
    failed: list[bool] = field(default_factory=list)  # unit i says the step failed or found nothing
    measured: list[tuple[str, ...]] = field(default_factory=list)  # unit i's measured forms' digests (``_measured``)

    def lookups(self) -> list[str]:
        """Every digest of the memory whose presence :func:`judge` reads."""
        out = list(self.line_digests)
        if self.action is not None:
            out.append(_memo(self.attempt, "a", (self.action,)))
        for m in self.measured:
            out.extend(m)
        for s in self.sets:
            out.extend(_memo(self.attempt, "w", (w,)) for w in s)
            out.extend(_queries(self.attempt, s))
        return list(dict.fromkeys(out))


def _queries(attempt: int, s: frozenset[str]) -> list[str]:
    """Digests that say an earlier unit's concepts equal ``s`` up to one word added, dropped or swapped."""
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
    """What a unit's concepts add to the memory (its set; each set less one word)."""
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
    """The judged text (module doc) normalised and compared with the last observations of its
    attempt (``recent`` newest last). Pure and bounded (see the module doc). ``cache``: see
    :func:`units.normalise_lines`."""
    j = judged_parts(text, action, result)
    raw, dropped, cut = iter_lines(j.text)
    cache = {} if cache is None else cache
    keep = echo_tokens(j.action) if j.result else frozenset()
    examined = normalised(raw, cache, keep)
    lines = list(dict.fromkeys(examined))
    act = j.action
    drop = concepts(" ".join(normalise_lines(act))) if j.result and act else frozenset()
    sets = [concepts(x, drop) for x in lines[:CONCEPT_LINES]]
    recent = list(recent)[-RECENT:]
    near = [False] * len(lines)
    window = [False] * len(lines)
    fields_: list[str | None] = [None] * len(lines)
    where: list[set[int]] = [set() for _ in lines]
    budget = [MAX_COMPARISONS]
    key = action_key(act)
    if recent and lines:
        index: dict[str, list[int]] = {}  # concept word → the recent units (ids in ``owners``) holding it
        owners: list[tuple[int, frozenset[str]]] = []
        for j_, r in enumerate(recent):
            for s in r.sets:
                if s:
                    for w in s:
                        index.setdefault(w, []).append(len(owners))
                    owners.append((j_, s))
        visits = [MAX_CONCEPT_VISITS]
        key_sets = [set(r.keys) for r in recent]
        line_sets = [set(r.lines) for r in recent]
        texts = recent[-RECENT_TEXT:]
        first_text = len(recent) - len(texts)
        shapes: dict[int, list[tuple[int, tuple[str, ...]]]] = {}  # token count → (recent index, tokens)
        if j.result:
            for k, r in enumerate(texts, start=first_text):
                for other in r.lines:
                    toks = tuple(other.split())
                    shapes.setdefault(len(toks), []).append((k, toks))
        echoes = {t.lower() for t in keep}
        for i, line in enumerate(lines):
            k_ = line_key(line)
            for jj in range(len(recent)):
                if k_ in key_sets[jj] or line in line_sets[jj]:
                    where[i].add(jj)
            # a unit naming what this step's action named is judged as an instance of its template
            # (the same outcome for another thing), never as a near copy of the last thing's
            named = bool(echoes) and any(t in echoes for t in line.split())
            for jj, r in enumerate(texts, start=first_text):
                if not named and jj not in where[i] and r.lines and near_match(line, r.lines, budget):
                    where[i].add(jj)
            near[i] = bool(where[i])
            if not near[i] and j.result:
                fields_[i] = _template(line, shapes, recent, key, drop, echoes, budget)
            if i < len(sets) and sets[i] and visits[0] > 0:
                found = _overlapping(sets[i], index, owners, visits)
                window[i] = bool(found - where[i]) or (bool(found) and not near[i])
                where[i] |= found
    fracs = progress_marks("\n".join(t for t in (j.note, j.text) if t))
    progress = False
    kinds = {(k, total) for k, _, total in fracs}
    for r in reversed(recent):  # the last observation of the same sort (a tool's, a note) that stated the same kind of progress
        if (r.action is None) != (key is None):
            continue  # a note quoting figures does not continue what a tool's output counted
        if kinds & {(k, total) for k, _, total in r.fractions} or (
                any(k.startswith("key:") for k, _ in kinds) and any(k.startswith("total:") for k, _, _ in r.fractions)):
            progress = advanced(r.fractions, fracs)
            break
    if progress:
        # a number moves on to a value it has not had lately: figures restated in turn (a note
        # quoting 12 % and 45 %, then 12 % and 29 %) come back to values already seen
        had = {(k, total, n) for r in recent for k, n, total in r.fractions}
        progress = any((k, total, n) not in had for k, n, total in fracs)
    if not progress and j.result and lines and recent:
        progress = _shrank(lines, where, recent, key)
    failed = [bool(concepts(x) & FAILED) for x in lines[:CONCEPT_LINES]]
    measured = _measured(raw, lines, cache, keep, attempt)
    return Prepared(lines, [line_digest(attempt, x) for x in lines], sets, near, window, where, text_digest(lines),
                    key, attempt, j.result, [r.digest for r in recent], [r.content or r.digest for r in recent],
                    [r.size for r in recent], fracs, progress, len(examined), dropped, cut, MAX_COMPARISONS - budget[0],
                    fields_, failed, measured)


def _measured(raw: Sequence[str], lines: Sequence[str], cache: dict[str, str], keep: frozenset[str],
              attempt: int) -> list[tuple[str, ...]]:
    """The digests of each of the first ``CONCEPT_LINES`` units' **measured forms**
    (``fields.mask_line(measures=True)``) where they differ from its form (module doc)."""
    at = {x: i for i, x in enumerate(lines[:CONCEPT_LINES])}
    out: list[list[str]] = [[] for _ in at]
    for line in raw:
        norm = normalised([line], cache, keep)
        i = at.get(norm[0]) if norm else None
        if i is None:
            continue
        m = normalise_line(line, keep, measures=True)
        if m != norm[0]:
            d = _memo(attempt, "m", (m,))
            if d not in out[i]:
                out[i].append(d)
    return [tuple(x) for x in out]


def _shrank(lines: Sequence[str], where: Sequence[set[int]], recent: Sequence[Recent], key: str | None) -> bool:
    """A result that lists part of what the same step listed last time, and nothing else, with other
    steps taken between the two: something went away (an error fixed, a finding cleared) —
    progress, though no unit is new. (The same step re-run at once showing less is not.)"""
    for j in range(len(recent) - 1, -1, -1):
        r = recent[j]
        if r.action != key or r.digest == recent[-1].digest and j < len(recent) - 1:
            continue
        return j < len(recent) - 1 and all(j in w for w in where) and len(lines) < r.size
    return False


def _template(line: str, shapes: dict[int, list[tuple[int, tuple[str, ...]]]], recent: Sequence[Recent],
              key: str | None, drop: frozenset[str], echoes: set[str], budget: list[int]) -> str | None:
    """A result unit as an instance of a template learnt from the recent units (Drain's match):
    ``"new"`` (new values in its fields: the next resource created, the next product page) or
    ``"echo"`` (its values only echo the action), or None (no instance)."""
    toks = tuple(line.split())
    cands = shapes.get(len(toks))
    if not cands:
        return None
    diff = template_match(toks, [c for _, c in cands], budget)
    if diff is None:
        return None
    values = [toks[i] for i in diff]
    if all(v in echoes or (drop and concepts(v) <= drop) for v in values):
        return "echo"  # the fields only echo what the action asked for
    return "new"


def _overlapping(mine: frozenset[str], index: dict[str, list[int]], owners: Sequence[tuple[int, frozenset[str]]],
                 visits: list[int]) -> set[int]:
    """The recent observations holding a unit whose concepts overlap ``mine`` by ≥ PARA (an
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


@dataclass(frozen=True)
class Verdict:
    """What one observation brought, judged against the attempt's memory."""

    new_units: int  # units that are new information
    digest: str  # the observation's identity (repeats and cycles compare it)
    content: str  # the judged content's identity (the result's, with an action)
    remember: tuple[str, ...]  # digests the memory should hold from now on (not there yet)
    paraphrases: int = 0  # units that were old only as paraphrases (their concepts)
    echo_lag: int | None = None  # how many observations back the echoed one is (1 = the previous)


def judge(p: Prepared, seen: Iterable[str]) -> Verdict:
    """Decide what ``p`` brings given the digests of the memory that ``seen`` holds (those of
    ``p.lookups()`` found there)."""
    seen = set(seen)
    memo = lambda kind, words: _memo(p.attempt, kind, words)  # noqa: E731
    said: set[str] = set()  # concept words of earlier units of this observation
    earlier: list[frozenset[str]] = []
    new = paraphrases = 0
    remember: list[str] = []
    measured_new: list[str] = []
    # New values in known forms are news only in a result that did not fail (a failure whose numbers
    # move is the same failure) and where they are most of it: a reading that moved, a listing of
    # other records — not one counter or size moving among lines the attempt has met.
    moved = sum(1 for m in p.measured if any(x not in seen for x in m))
    values_news = p.result and 2 * moved > len(p.measured) and not any(p.failed)
    # a step never taken before in this attempt that did not fail: doing it is news, even when its
    # output echoes it in a known form (the next page fetched, the next field filled)
    fresh_step = p.action is not None and memo("a", (p.action,)) not in seen
    if p.action is not None:
        remember.append(memo("a", (p.action,)))
    for i, line in enumerate(p.lines):
        d = p.line_digests[i]
        s = p.sets[i] if i < len(p.sets) else frozenset()
        old = d in seen or p.near[i]
        instance = p.fields[i] if i < len(p.fields) else None
        worked = fresh_step and not (p.failed[i] if i < len(p.failed) else False)
        if not old and instance == "echo":
            old = not worked
        elif not old and s and instance is None:
            unseen = [w for w in s if w not in said and memo("w", (w,)) not in seen]
            fresh = [w for w in unseen if w not in WEAK]
            if p.result and not unseen:
                old = not worked  # a tool's output that names nothing new taught nothing new
                paraphrases += old
            elif not any(is_specific(w) for w in fresh) and len(fresh) <= (len(s) - 1) // NEW_WORDS_PER:
                if (p.window[i] or any(q in seen for q in _queries(p.attempt, s))
                        or any(_overlap(s, e) >= PARA for e in earlier)):
                    old = True
                    paraphrases += 1
        fresh_values = [m for m in (p.measured[i] if i < len(p.measured) else ()) if m not in seen]
        if old and fresh_values and values_news:
            # the same form with values the attempt has not met: another record, another reading
            old = False
            measured_new.extend(fresh_values)
        if not old:
            new += 1
        remember.append(d)
        remember.extend(p.measured[i] if i < len(p.measured) else ())
        remember.extend(memo("w", (w,)) for w in s)
        remember.extend(_entries(p.attempt, s))
        said.update(s)
        earlier.append(s)
    content, lag = p.own_digest, None
    if measured_new:  # new values in known forms: not the same result as before
        content = text_digest([*p.lines, *measured_new])
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
    ``observe(text, attempt, action=, result=)`` → (new units, identity, Prepared)."""

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
                                             p.fractions, p.action)])[-RECENT:]
        return v.new_units, v.digest, p


def left_out(p: Prepared) -> str:
    """'' or a short note of what the caps left out of an observation."""
    parts = []
    if p.dropped_lines:
        parts.append(f"{p.dropped_lines:,} lines past the first {MAX_LINES:,} not examined")
    if p.cut_lines:
        parts.append(f"{p.cut_lines:,} lines cut to {MAX_LINE_CHARS} characters")
    return "; ".join(parts)


__all__ = ["CONCEPT_LINES", "MAX_COMPARISONS", "MAX_LINES", "MAX_LINE_CHARS", "MAX_MEMORY", "NEAR", "Prepared", "Recent",
           "Repeat", "Tracker", "Verdict", "action_key", "decode_concepts", "encode_concepts", "excerpt", "iter_lines",
           "judge", "judge_sequence", "judged_lines", "judged_parts", "left_out", "line_digest", "line_key", "measures_of", "normalise_line",
           "normalise_lines", "pair_digest", "prepare", "progress_of", "text_digest"]
