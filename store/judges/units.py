"""The units of information in agent text, normalised and compared (pure, no database).

* **Units.** Text is read line by line; a long line (a paragraph) is cut into its sentences, so a new
  fact inside a long paragraph of familiar text is a new unit of its own. The work is bounded
  whatever the agent sends: at most ``MAX_LINES`` units, each line read up to ``LINE_READ``
  characters and each unit cut to ``MAX_LINE_CHARS`` (what is left out is counted).
* **Normalised** by what each field uses (``store/judges/fields.py``): numbers in any format ``#``,
  drawn ids ``*``, temporary paths ``<tmp>``, words case folded. Digits inside a **file name** with
  one short number (``part-0004.parquet``, ``tests/test_17.py``) are kept: another file is another
  thing.
* **Near copies** by a measure that survives small edits and rewording of a word or two
  (``rapidfuzz``'s normalised Indel similarity — difflib's ratio, in C++; at most
  ``MAX_COMPARISONS`` per observation).
* **Templates** learnt from the stream, Drain-style: two units with the same number of tokens that
  differ in a few word positions are instances of one template, those positions its fields
  (:func:`template_match`).
"""

from __future__ import annotations

import re
from typing import Sequence

from rapidfuzz import fuzz

from store.judges.fields import mask_line

MAX_LINES = 1000  # units of one observation examined (the rest counted as dropped)
MAX_LINE_CHARS = 512  # characters of a unit that make its identity
LINE_READ = 4096  # characters of one line read (a paragraph is cut into sentences within them)
SENTENCES_FROM = 200  # a line longer than this is read as its sentences
MAX_SENTENCES = 24  # sentences taken from one line
MAX_COMPARISONS = 600  # near-copy and template comparisons per observation
NEAR = 0.9  # similarity from which two units are near copies …
NEAR_MIN_CHARS = 16  # … when the unit has at least this many characters (shorter: exact only)
TEMPLATE_MIN_TOKENS = 4  # a template needs this many tokens …
TEMPLATE_SHARE = 0.5  # … of which at least this share equal (Drain's similarity threshold) …
TEMPLATE_MAX_FIELDS = 3  # … and at most this many fields

_DIGITS = str.maketrans("0123456789", "".join(chr(0xE000 + i) for i in range(10)))
_UNDIGITS = str.maketrans({chr(0xE000 + i): str(i) for i in range(10)})
# a file name: letters/digits/_/- (and directories) ending in .ext (a letter first)
_FILE = re.compile(r"(?<![\w.])(?:[\w-]+[/\\])*[\w-]*[a-z_-][\w-]*\.[a-z][a-z0-9]{0,7}\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9\"'(\[])")
_DIGIT_RUN = re.compile(r"\d+")


def _keep_file_digits(m: re.Match[str]) -> str:
    name = m.group(0)
    runs = _DIGIT_RUN.findall(name)
    if len(runs) != 1 or len(runs[0]) > 6 or "/tmp" in name.lower():
        return name
    return name.translate(_DIGITS)


def normalise_line(line: str, keep: frozenset[str] = frozenset(), measures: bool = False) -> str:
    """One unit's normalised form ('' for a blank one). ``keep``: tokens the step's action named
    (``fields.echo_tokens``), kept whole; ``measures``: see ``fields.mask_line``."""
    s = line
    if "." in s:
        s = _FILE.sub(_keep_file_digits, s)
    return mask_line(s, keep, measures).translate(_UNDIGITS)


def iter_lines(text: str, max_lines: int = MAX_LINES, max_chars: int = MAX_LINE_CHARS) -> tuple[list[str], int, int]:
    """(the first ``max_lines`` units — lines, a long line cut into its sentences — each cut to
    ``max_chars``; raw lines not examined; units cut).

    Never splits the whole text: a megabyte line or a million lines cost what ``max_lines`` do."""
    out: list[str] = []
    cut = 0
    pos = 0
    n = len(text)
    while pos <= n and len(out) < max_lines:
        end = text.find("\n", pos)
        if end < 0:
            end = n
        line = text[pos:min(end, pos + LINE_READ)]
        was_cut = end - pos > LINE_READ
        parts = _SENTENCE.split(line, MAX_SENTENCES) if len(line) > SENTENCES_FROM else [line]
        for part in parts:
            if len(out) >= max_lines:
                break
            if len(part) > max_chars:
                was_cut = True
                part = part[:max_chars]
            out.append(part)
        cut += was_cut
        pos = end + 1
    dropped = text.count("\n", pos) + 1 if pos <= n else 0
    return out, dropped, cut


def normalise_lines(text: str, cache: dict[str, str] | None = None, keep: frozenset[str] = frozenset()) -> list[str]:
    """Text → its normalised, non-blank units (the examined ones). ``cache``: raw unit → its
    normalised form, shared by the texts of one judgement (a growing log repeats its lines);
    ``keep``: see :func:`normalise_line`."""
    lines, _, _ = iter_lines(str(text))
    return normalised(lines, cache, keep)


def normalised(lines: list[str], cache: dict[str, str] | None = None, keep: frozenset[str] = frozenset()) -> list[str]:
    """Units already cut (:func:`iter_lines`) → their normalised, non-blank forms, through ``cache``
    (see :func:`normalise_lines`)."""
    if cache is None:
        return [x for x in (normalise_line(line, keep) for line in lines) if x]
    out = []
    tag = "\x00" + "\x00".join(sorted(keep)) if keep else ""
    for line in lines:
        x = cache.get(line + tag)
        if x is None:
            x = cache[line + tag] = normalise_line(line, keep)
        if x:
            out.append(x)
    return out


def near_match(line: str, others: Sequence[str], budget: list[int]) -> bool:
    """True when ``line`` nearly copies one of ``others`` (similarity ≥ NEAR). Two units that differ
    only in the digits a normalised unit keeps (a file's number: ``part-0004.parquet``) name two
    things: not a near copy."""
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
        if fuzz.ratio(line, other, score_cutoff=NEAR * 100):
            return True
    return False


def template_match(tokens: Sequence[str], candidates: Sequence[Sequence[str]], budget: list[int]) -> tuple[int, ...] | None:
    """Drain's match: the field positions where ``tokens`` differs from the most similar candidate
    of the same length (at least ``TEMPLATE_SHARE`` of the tokens equal, at most
    ``TEMPLATE_MAX_FIELDS`` fields), or None."""
    n = len(tokens)
    if n < TEMPLATE_MIN_TOKENS:
        return None
    best: tuple[int, ...] | None = None
    for other in candidates:
        if len(other) != n:
            continue
        if budget[0] <= 0:
            break
        budget[0] -= 1
        diff = tuple(i for i in range(n) if tokens[i] != other[i])
        if not diff or len(diff) > TEMPLATE_MAX_FIELDS or n - len(diff) < TEMPLATE_SHARE * n:
            continue
        if best is None or len(diff) < len(best):
            best = diff
    return best


__all__ = ["LINE_READ", "MAX_COMPARISONS", "MAX_LINES", "MAX_LINE_CHARS", "NEAR", "iter_lines", "near_match",
           "normalise_line", "normalise_lines", "template_match"]
