"""What each field of a line of agent text uses, and the progress its numbers state (pure).

A line is cut into **tokens** (runs without white space) and each token into **segments** (runs of
letters or digits between separators: ``/ . _ - : @ # = , ; ( ) [ ] { } ' " ` < > |``). Each
segment is classed by the characters it uses, never by a list of formats:

* **number** — digits, in any common format: ``120,000``, ``120 000``, ``120.000``, ``120'000``,
  ``120_000``, decimals, a sign, an exponent; with a unit or a scale stuck to it (``12k``, ``1.2M``,
  ``950ms``, ``02T09``: digits first). A number is a value, not a word: masked ``#``.
* **id** — letters and digits interleaved (``x2kqp``, ``7d9f8c6b5``, ``aZ3kQ9``), letters without a
  vowel (``bcdfgx``), or a long run whose case changes at random (``lbwsEvSrHD``): what a machine
  draws, not a word. Masked ``*``. Short names (``v2``, ``ec2``, ``s3``, ``utf8``, ``x86``: letters
  then one or two digits, at most 6 characters) and squares (``e2e4``, ``b7``, ``a1h8``: single digits
  between letters, at most 4 characters — a drawn id that short would collide) are kept: they name things.
* **word** — letters: kept, case folded.

So every timestamp format (``2027-03-02T09:14:03.123Z``, ``Mar 3 09:14:03``, ``1709370843``),
duration (``2m30s``, ``1.5 s``), counter, size, ``file:line:col`` and random id comes out as the same
skeleton each time, because its fields use digits or drawn characters — and a word that changes is
a changed word. What else varies where the rest of a line repeats is learnt from the stream
(``store/judges/templates.py``).

**Enumerated names.** A name (a token with letters and a separator) whose only number is one
short run — ``out/part-0004.parquet``, ``frames/frame00012.png``, ``case_003.json`` — keeps that
number in its *enumeration* (its skeleton and value): the next file of a series is progress, read by
:func:`enumerations`. Names under a temporary directory are scratch (``/tmp/pytest-of-dev/pytest-12``):
never an enumeration.

**Progress stated in numbers** (:func:`fractions`): ``41/100``, ``page 3 of 9``, ``3 out of 9``,
ranges ``120,000–130,000 of 1,000,000`` (and ``a-b/n``, ``a to b (of n)``, ``[a, b) / n``,
``a..b of n``, ``a — b out of n``), ``shard-03-of-16``, ``45 %``, ``12k of 1.2M``, ``12 files left``,
``1,464 problem cells remain`` (up to two words between the count and *left*/*remain*),
``remaining: 4``. A number next to a retry word (attempt, try, retry, poll, round, restart, wait …)
or a gauge (cpu, memory, load, rate …) is not progress.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable

# ---------------------------------------------------------------------- numbers
_GROUP = r"(?:,|\.|'|_|\u00a0|\u202f|\u2009| )"  # thousands separators tools print
NUMBER = (r"[-+]?(?:\d{1,3}(?:" + _GROUP + r"\d{3})+(?![\d])|\d+)(?:[.,]\d+)?(?:e[-+]?\d+)?")
_NUMBER_RE = re.compile(r"(?<![\w.,'])" + NUMBER + r"(?![\d])", re.IGNORECASE)
_SCALE = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9}


def number_value(text: str, dot_groups: bool | None = None) -> float | None:
    """The value of one number as tools print it (``120,000``, ``120 000``, ``1.000.000``,
    ``120'000``, ``1.2M``, ``12k``). ``dot_groups``: a ``.`` before three digits groups thousands
    (None: decided by the number itself — two or more such dots do)."""
    s = text.strip().replace("\u00a0", " ").replace("\u202f", " ").replace("\u2009", " ")
    scale = 1.0
    if s and s[-1].lower() in _SCALE and len(s) > 1 and s[-2].isdigit():
        scale, s = _SCALE[s[-1].lower()], s[:-1]
    if dot_groups is None:
        dot_groups = len(re.findall(r"\.\d{3}(?!\d)", s)) >= 2 or bool(re.search(r"\.\d{3},\d+$", s))
    if dot_groups:
        s = re.sub(r"\.(?=\d{3}(?!\d))", "", s).replace(",", ".")
    s = re.sub(r"(?<=\d)[,' _](?=\d{3}(?!\d))", "", s)
    try:
        return float(s) * scale
    except ValueError:
        return None


# ---------------------------------------------------------------------- segments and tokens
_SEPARATORS = "/.\\_-:@#=,;()[]{}'\"`<>|+*!?&%$^~"
_SPLIT = re.compile(r"([" + re.escape(_SEPARATORS) + r"\s]+)")
_VOWELS = frozenset("aeiouy")
_HEX = re.compile(r"[0-9a-fA-F]{2,}")
_JOIN_GROUPS = re.compile(r"(?<![\w.,])(\d{1,3})((?:(?:\u00a0|\u202f|\u2009| )\d{3})+)(?![\d\w])")


@functools.lru_cache(maxsize=131072)
def segment_class(seg: str, first: bool = True) -> str:
    """``#`` (a number, with any unit stuck to it), ``*`` (an id a machine drew), or ``w`` (a word).
    ``first``: the token's first segment (a scheme, a command, a tag: ``https``, ``mkdir``, never
    judged drawn for lacking a vowel)."""
    if not seg or any("\ue000" <= c <= "\ue009" for c in seg):
        return "w"  # a file's own number, kept (store/judges/units.py)
    if seg[0].isdigit():
        if len(seg) >= 6 and _HEX.fullmatch(seg) and sum(a.isdigit() != b.isdigit() for a, b in zip(seg, seg[1:])) >= 3:
            return "*"  # hex digits and letters interleaved: a hash or an id drawn, whatever its first character
        return "#"
    if any(c.isdigit() for c in seg):
        # letters then one or two digits, short: a name (v2, ec2, s3, utf8, x86), not a counter (e379)
        if len(seg) <= 6 and re.fullmatch(r"[A-Za-z]+\d{1,2}", seg):
            return "w"
        # four characters or fewer, single digits between letters: a square, a move, a cell
        # (e2e4, a7f2, b1c3) — a machine draws longer ids than that, or they would collide
        if len(seg) <= 4 and re.fullmatch(r"(?:[A-Za-z]\d)+", seg):
            return "w"
        return "*"
    low = seg.lower()
    if not first and len(seg) >= 5 and not (set(low) & _VOWELS):
        return "*"
    if len(seg) >= 8:
        switches = sum(1 for a, b in zip(seg, seg[1:]) if a.islower() != b.islower())
        vowels = sum(c in _VOWELS for c in low)
        if switches >= 4 and vowels < 0.3 * len(seg):
            return "*"  # case switching at random, few vowels: drawn (lbwsEvSrHD), not camelCase
    return "w"


_TEMP = re.compile(r"(?:^|[\s'\"(=:])((?:/private)?/(?:var/)?(?:tmp|folders|shm)/\S*|/dev/shm/\S*|/run/user/\S*|"
                   r"[A-Za-z]:\\\S*?\\(?:temp|tmp)\\\S*)", re.IGNORECASE)


def skeleton(token: str, numbers: bool = True) -> tuple[str, int]:
    """A token's skeleton (numbers ``#`` — kept as they are when not ``numbers`` —, ids ``*``,
    words case folded) and how many numbers it holds."""
    parts = _SPLIT.split(token)
    out = []
    nums = 0
    classes = [segment_class(p, i == 0) if not i % 2 else "" for i, p in enumerate(parts)]
    # a token made of ids and numbers is an id through and through: its hex-only pieces too (a
    # UUID's "babb" or "bba3")
    drawn = sum(1 for c in classes if c in "#*" and c) >= 2
    for i, p in enumerate(parts):
        if i % 2:
            out.append(p)
            continue
        c = classes[i]
        if drawn and (c != "w" or _HEX.fullmatch(p)):
            c = "*"  # every piece of an id the same: a UUID is * whichever of its pieces start with a digit
        if c == "#":
            nums += 1
            out.append("#" if numbers else p.lower())
        elif c == "*":
            out.append("*")
        else:
            out.append(p.lower())
    return "".join(out), nums


_EDGES = "'\"`()[]{}<>,;:"


def echo_tokens(action: str | None) -> frozenset[str]:
    """The tokens of an action that its output may echo (quotes and brackets stripped), for
    :func:`mask_line`'s ``keep``."""
    if not action:
        return frozenset()
    return frozenset(t for t in (x.strip(_EDGES) for x in action[:4096].split()) if len(t) >= 3)


def mask_action(action: str) -> str:
    """An action's identity: like :func:`mask_line`, but its numbers are kept — the date, the page
    or the line an agent asks for is what the step is about; drawn ids and temporary paths are not."""
    s = " ".join(action.split())
    if "/" in s or "\\" in s:
        s = _TEMP.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + "<tmp>", s)
    return " ".join(t if t == "<tmp>" else skeleton(t, numbers=False)[0] for t in s.split(" "))


def mask_line(line: str, keep: frozenset[str] = frozenset(), measures: bool = False) -> str:
    """A line as its fields' skeletons: white space collapsed, numbers ``#``, ids ``*``, temporary
    paths ``<tmp>``, words case folded, runs of one symbol cut to three ('' for a blank line). A
    token in ``keep`` (one the step's action named: the file it converted, the URL it fetched) is
    kept whole: a field that echoes the action is the thing the step worked on, not noise.
    ``measures``: plain numbers (a count, a loss, a size — a number standing alone or as a labelled
    value, under ten digits) keep their value; durations, clock times, dates, epochs and ids are
    still masked (what a step measured, not when it ran)."""
    s = " ".join(line.split())
    if not s:
        return ""
    if "/" in s or "\\" in s:
        s = _TEMP.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + "<tmp>", s)
    if " " in s:
        s = _JOIN_GROUPS.sub(lambda m: m.group(1) + m.group(2).replace(" ", "").replace("\u00a0", "")
                             .replace("\u202f", "").replace("\u2009", ""), s)
    out = []
    toks = s.split(" ")
    for i, tok in enumerate(toks):
        timed = i + 1 < len(toks) and bool(_TIME_UNIT.fullmatch(toks[i + 1]))
        if tok == "<tmp>" or (_ZERO.fullmatch(tok) and not timed):
            out.append(tok.lower())  # a lone zero stays: "0 results" is not "12 results"
            continue
        if keep and tok.strip(_EDGES) in keep:
            out.append(tok.lower())
            continue
        if measures and not timed and _MEASURE.fullmatch(tok) and not (
                _TIMED_LABEL.match(tok) or (i and _TIMED_LABEL.fullmatch(toks[i - 1]))):
            out.append(tok.lower())
            continue
        sk, _ = skeleton(_NUMBER_RE.sub(_one, tok))
        out.append(sk)
    for i, tok in enumerate(out):  # a date's words are its digits: "Fri Jan 15", "15-Mar-2027", "3:04 pm"
        if tok.strip(",.") in _CALENDAR and any("#" in t or "*" in t for t in out[max(0, i - 2):i + 3]):
            out[i] = "#" + tok[len(tok.rstrip(",.")):]
    joined = " ".join(t for i, t in enumerate(out) if not (t == "#" and i and out[i - 1] == "#"))  # 1h 2m: one
    return _RUNS.sub(r"\1\1\1", joined)


_TIME_UNIT = re.compile(r"(?:ns|us|µs|ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?|d|days?)[),.;:]*",
                        re.IGNORECASE)
_CALENDAR = frozenset("""jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june july
august september october november december mon tue tues wed thu thur thurs fri sat sun monday tuesday wednesday
thursday friday saturday sunday am pm utc gmt""".split())
# a plain measured value: a number alone, or labelled (loss=0.25, "created": 4625, rows:12), with
# brackets and punctuation around — never a time of day, a date, an epoch or a duration
_MEASURE = re.compile(r"""[\[({'"]*(?:[A-Za-z_][\w.-]{0,40}['"]?\s*[:=]['"]?)?[-+]?\d{1,9}(?:[.,]\d+)?(?:e[-+]?\d+)?%?[\])}'",;:.]*""")


# a label that names a time ("took_ms": 298, elapsed=3.1, latency_s: 0.2): its value is a duration
_TIMED_LABEL = re.compile(r"""[\[({'"]*(?:[A-Za-z_][\w.-]{0,40}?)?(?:[_.-](?:ms|us|ns|s|sec|secs|seconds|millis)|duration|elapsed|"""
                          r"""took|latency|seconds)['"]?\s*[:=]['"]?(?![A-Za-z])""", re.IGNORECASE)


def _one(m: re.Match[str]) -> str:
    """A number (any format) as one digit, so its skeleton is one ``#``."""
    return "1"


_RUNS = re.compile(r"([^\w\s<>*])\1{2,}")
_ZERO = re.compile(r"[(\[]?0+[)\],.:;]?")


# ---------------------------------------------------------------------- enumerated names
_NAME = re.compile(r"(?<![\w/.\\-])((?:[\w-]+[/\\])*[\w-]*[A-Za-z][\w-]*\.[A-Za-z][A-Za-z0-9]{0,7}|"
                   r"[A-Za-z][\w]*[-_][\w-]*)(?![\w/\\])")


def enumerations(text: str, cap: int = 4096) -> tuple[tuple[str, float], ...]:
    """Names in ``text`` whose only number is one short run (``part-0004.parquet``,
    ``frame00012.png``): (skeleton, number). Temporary paths and stamps (several numbers) are not
    enumerations. Reads the first ``cap`` characters."""
    t = text[:cap]
    if "/" in t or "\\" in t:
        t = _TEMP.sub(" ", t)
    out = []
    for m in _NAME.finditer(t):
        name = m.group(1)
        runs = re.findall(r"\d+", name)
        if len(runs) != 1 or len(runs[0]) > 6:
            continue
        sk, _ = skeleton(name)
        if "*" in sk:
            continue
        out.append((sk, float(runs[0])))
    return tuple(dict.fromkeys(out))


# ---------------------------------------------------------------------- progress toward a total
_RETRY = re.compile(r"\b(?:attempts?|try|tries|tried|trying|retry|retries|retrying|retried|reattempts?|polls?|"
                    r"polling|polled|rounds?|restarts?|restarting|reconnect\w*|reruns?|re-runs?|backoff|back-off|"
                    r"waits?|waiting|cpu|memory|mem|ram|gpu|load|disk|usage|utili[sz]ation|util|temperature|temp|"
                    r"battery|swap|rate)\b")
_N = r"(" + NUMBER + r"[kKmMbB]?)"
_RANGE_SEP = r"\s*(?:–|—|-|\.\.|to|,)\s*"
_OF = r"\s*(?:\)?\s*/\s*|\s+(?:\(\s*)?(?:of|out\s+of)\s+)"
_FRACTION = re.compile(
    r"(?<![\w./:\\-])\[?" + _N + _RANGE_SEP + _N + r"\s*[\])]?" + _OF + _N + r"(?![\w/\\]|\.\d)"  # a range of a total
    r"|(?<![\w./:\\-])" + _N + r"\s*/\s*" + _N + r"(?![\w/\\]|\.\d)"  # 41/100
    r"|(?<![\w.])" + _N + r"\s+(?:of|out\s+of)\s+" + _N + r"(?![\w])"  # 3 of 9
    r"|(?<=[\w])[-_]" + r"(\d+)" + r"[-_]of[-_]" + r"(\d+)(?!\d)"  # shard-03-of-16
    r"|(?<![\w.])(" + NUMBER + r")(?:\s?%|\s+(?:per\s?cent|pct)\b)"  # 45 %, 45 percent
    r"|(?<![\w.])" + _N + r"\s+(?:[a-z]+(?:\(s\)|\(es\))?\s+){0,2}(?:left|remain(?:s|ing)?|to\s+go)\b"  # 12 files left
    r"|\b(?:remaining|left)\s*:?\s*" + _N, re.IGNORECASE)
FRACTIONS_CHARS = 4096  # characters of an observation read for its fractions
_BYTES = {"b": 1.0, "k": 1e3, "kb": 1e3, "kib": 1024.0, "m": 1e6, "mb": 1e6, "mib": 1024.0 ** 2, "g": 1e9, "gb": 1e9,
          "gib": 1024.0 ** 3, "t": 1e12, "tb": 1e12, "tib": 1024.0 ** 4, "bytes": 1.0, "byte": 1.0}
_SIZE = r"(" + NUMBER + r")\s?(b|bytes?|[kmgt]i?b|[kmgt])\b"
_SIZES = re.compile(r"(?<![\w.])" + _SIZE + r"\s*(?:/|\s(?:of|out\s+of)\s)\s*~?\s*" + _SIZE, re.IGNORECASE)
# a number labelled as a total in structured output ("total": 34222864, max=50, size: 1200)
_LABELLED = re.compile(r"""["']?([A-Za-z_][\w.-]{0,40})["']?\s*[:=]\s*(""" + NUMBER + r""")(?![\w.:/-])""")
_TOTAL_KEY = re.compile(r"(?:^|[_.-])(?:total|max|maximum|expected|target|size|count|goal|all)(?:$|[_.-])", re.IGNORECASE)


def _dots(text: str) -> bool:
    """Whether this text groups thousands with dots (a number with two of them: 1.000.000)."""
    return bool(re.search(r"\d\.\d{3}\.\d{3}(?!\d)", text))


def fractions(text: str) -> tuple[tuple[str, float, float], ...]:
    """Numbers in ``text`` that count toward a stated total, in order: ``("up", n, total)``;
    ``("down", n, 0)`` for ``n left`` / ``remaining: n`` (module doc). Reads the first
    ``FRACTIONS_CHARS`` characters."""
    t = text[:FRACTIONS_CHARS]
    dots = _dots(t)
    low = t.casefold()
    out = []
    for m in _SIZES.finditer(t):
        a, ua, b, ub = number_value(m.group(1), dots), m.group(2).lower(), number_value(m.group(3), dots), m.group(4).lower()
        if a is not None and b is not None and ua in _BYTES and ub in _BYTES:
            n, total = a * _BYTES[ua], b * _BYTES[ub]
            if 0 <= n <= total:
                out.append(("up", round(n, 3), round(total, 3)))
    if out:
        t = _SIZES.sub(" ", t)
        low = t.casefold()
    for m in _FRACTION.finditer(t):
        before = low[max(0, m.start() - 40):m.start()].split()[-3:]
        after = low[m.end():m.end() + 40].split()[:2]
        if any(_RETRY.search(w) for w in before + after):
            continue
        g = m.groups()
        val = lambda s: number_value(s, dots)  # noqa: E731
        pair: tuple[float | None, float | None]
        if g[0] is not None:
            pair = (val(g[1]), val(g[2]))
        elif g[3] is not None:
            pair = (val(g[3]), val(g[4]))
        elif g[5] is not None:
            pair = (val(g[5]), val(g[6]))
        elif g[7] is not None:
            pair = (float(g[7]), float(g[8]))
        elif g[9] is not None:
            pair = (val(g[9]), 100.0)
        else:
            v = val(g[10] if g[10] is not None else g[11])
            if v is not None:
                out.append(("down", v, 0.0))
            continue
        got, whole = pair
        if got is not None and whole is not None and whole >= 2 and 0 <= got <= whole:
            out.append(("up", got, whole))
    return tuple(out)


def labelled(text: str, cap: int = FRACTIONS_CHARS) -> tuple[tuple[str, float, float], ...]:
    """Numbers of structured output with their labels (``"created": 4625558``, ``frontier=1095``):
    ``("key:<label>", value, 0)``, the labelled totals among them as ``("total:<label>", …)``."""
    out = []
    for m in _LABELLED.finditer(text[:cap]):
        key, v = m.group(1).lower(), number_value(m.group(2))
        if v is None or _RETRY.search(key.replace("_", " ")):
            continue
        out.append(("total:" + key if _TOTAL_KEY.search(key) else "key:" + key, v, 0.0))
    return tuple(out)


def advanced(before: Iterable[tuple[str, float, float]], now: Iterable[tuple[str, float, float]]) -> bool:
    """True when ``now``'s numbers moved toward their totals since ``before``: numbers are paired
    by their kind and total, in order (the second "of 9" with the second "of 9"); at least one
    moved toward its total and none moved back. Enumerations (kind ``name:<skeleton>``, total 0)
    advance by a small step (1 to 3, or up to a tenth of the number)."""
    now = tuple(now)
    before = tuple(before)
    if not now or not before:
        return False
    if _counted(before, now):
        return True
    now = tuple(x for x in now if not x[0].startswith(("key:", "total:")))
    before = tuple(x for x in before if not x[0].startswith(("key:", "total:")))
    slots: dict[tuple[str, float], list[float]] = {}
    for k, n, total in before:
        slots.setdefault((k, total), []).append(n)
    seen: dict[tuple[str, float], int] = {}
    moved = False
    for k, n, total in now:
        i = seen.get((k, total), 0)
        seen[(k, total)] = i + 1
        old = slots.get((k, total), [])
        if i >= len(old):
            continue
        step = old[i] - n if k == "down" else n - old[i]
        if step < 0:
            return False
        if k.startswith("name:") and step > max(3.0, 0.1 * old[i]):
            continue  # a jump is not the next of a series
        moved = moved or step > 0
    return moved


def _counted(before: tuple[tuple[str, float, float], ...], now: tuple[tuple[str, float, float], ...]) -> bool:
    """A labelled number rose toward a labelled total that stayed the same (``"created": 4.6M`` of
    ``"total": 34M``)."""
    totals = {k: v for k, v, _ in before if k.startswith("total:")}
    kept = [v for k, v, _ in now if k.startswith("total:") and totals.get(k) == v]
    if not kept:
        return False
    was = {k: v for k, v, _ in before if k.startswith("key:")}
    return any(k in was and was[k] < v <= max(kept) for k, v, _ in now if k.startswith("key:"))


def progress_marks(text: str) -> tuple[tuple[str, float, float], ...]:
    """What :func:`advanced` compares: the fractions of ``text`` and its enumerated names."""
    return fractions(text) + labelled(text) + tuple((f"name:{sk}", v, 0.0) for sk, v in enumerations(text))


__all__ = ["FRACTIONS_CHARS", "NUMBER", "advanced", "enumerations", "fractions", "labelled", "mask_action", "mask_line", "number_value",
           "progress_marks", "segment_class", "skeleton"]
