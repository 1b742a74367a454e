"""The second blind corpus's own registries, trial and noise.

A family here is the same ``(random.Random, actions: bool) -> Script`` as in ``tests.support.blind``
and is built on its :class:`~tests.support.blind.trace.Trial` (rhythm, lease, the two forms), but it
registers into ``HEALTHY2`` / ``LOOPS2`` and draws its noise from this module: timestamps, durations,
numbers in a locale's format, ids of many shapes, temp paths — each style drawn once per trial, each
value per line.
"""

from __future__ import annotations

import datetime as dt
import random
import string

from ..blind import noise
from ..blind.noise import MONTHS
from ..blind.trace import Family, Trial, registrars

HEALTHY2: dict[str, Family] = {}
LOOPS2: dict[str, Family] = {}
healthy, looping = registrars(HEALTHY2, LOOPS2)

B32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's, as ULIDs use
LOWER = string.ascii_lowercase + string.digits


def _stamp(t: float, style: int) -> str:
    d = dt.datetime.fromtimestamp(t, dt.timezone.utc)
    ms = d.microsecond // 1000
    if style == 0:
        return d.strftime("%Y-%m-%dT%H:%M:%SZ")
    if style == 1:
        return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms:03d}+00:00"
    if style == 2:
        return str(int(t))
    if style == 3:
        return str(int(t * 1000))
    if style == 4:
        return f"{MONTHS[d.month - 1]} {d.day:2d} {d:%H:%M:%S}"
    if style == 5:
        return d.strftime("%d/%m/%Y %H:%M:%S")
    if style == 6:
        return d.strftime("%m/%d/%Y %I:%M:%S %p")
    if style == 7:
        return d.strftime("%Y-%m-%d %H:%M:%S,") + f"{ms:03d}"
    if style == 8:
        return d.strftime("[%d/%b/%Y:%H:%M:%S +0000]")
    if style == 9:
        return d.strftime("%a, %d %b %Y %H:%M:%S GMT")
    if style == 10:
        return d.strftime("%H:%M:%S.") + f"{d.microsecond:06d}"
    return d.strftime("%Y/%m/%d %H:%M:%S")


N_STAMPS = 12


def _dur(s: float, style: int) -> str:
    if style == 0:
        return f"{s:.2f}s"
    if style == 1:
        return f"{int(s * 1000)}ms"
    if style == 2:
        return f"{int(s) // 3600}:{int(s) // 60 % 60:02d}:{int(s) % 60:02d}"
    if style == 3:
        m, sec = divmod(s, 60)
        return f"{int(m)}m{sec:.1f}s" if m else f"{sec:.1f}s"
    if style == 4:
        return f"{s:.1f} sec"
    if style == 5:
        return f"PT{int(s) // 60}M{s % 60:.0f}S" if s >= 60 else f"PT{s:.1f}S"
    return f"{s * 1000:,.0f} ms"


N_DURS = 7


def _group(digits: str, sep: str, indian: bool = False) -> str:
    if indian and len(digits) > 3:
        head, last = digits[:-3], digits[-3:]
        parts: list[str] = []
        while len(head) > 2:
            parts.insert(0, head[-2:])
            head = head[:-2]
        if head:
            parts.insert(0, head)
        return sep.join(parts + [last])
    out: list[str] = []
    while len(digits) > 3:
        out.insert(0, digits[-3:])
        digits = digits[:-3]
    out.insert(0, digits)
    return sep.join(out)


# (thousands separator, decimal mark, Indian grouping)
LOCALES = ((",", ".", False), (".", ",", False), ("\u202f", ",", False), (" ", ",", False),
           ("'", ".", False), ("", ".", False), (",", ".", True))


def _num(x: float, locale: int, decimals: int = 0) -> str:
    sep, dec, indian = LOCALES[locale]
    neg = x < 0
    x = abs(x)
    whole = f"{x:.{decimals}f}"
    ip, _, fp = whole.partition(".")
    body = _group(ip, sep, indian) + (dec + fp if fp else "")
    return ("-" if neg else "") + body


class T2(Trial):
    """A :class:`Trial` with this corpus's own noise styles, drawn once per trial."""

    def __init__(self, rng: random.Random, **kw: object) -> None:
        super().__init__(rng, **kw)  # type: ignore[arg-type]
        self.stamp_style = rng.randrange(N_STAMPS)
        self.dur_style2 = rng.randrange(N_DURS)
        self.locale = rng.randrange(len(LOCALES))
        self.id_style = rng.randrange(6)
        self.tmp_style = rng.randrange(5)

    # styles drawn per trial, values per call
    def stamp(self) -> str:
        return _stamp(self.now, self.stamp_style)

    def took(self, seconds: float) -> str:
        return _dur(seconds, self.dur_style2)

    def num(self, x: float, decimals: int = 0) -> str:
        return _num(x, self.locale, decimals)

    def pct(self, x: float, decimals: int = 1) -> str:
        dec = LOCALES[self.locale][1]
        return f"{x:.{decimals}f}".replace(".", dec) + ("\u00a0%" if dec == "," else "%")

    def hexid(self, n: int = 12) -> str:
        return noise.hexid(self.rng, n)

    def rid(self) -> str:
        """A request / trace / correlation id in this trial's shape."""
        r, s = self.rng, self.id_style
        if s == 0:
            h = self.hexid(32)
            return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"
        if s == 1:
            return "01" + "".join(r.choice(B32) for _ in range(24))
        if s == 2:
            return "req_" + "".join(r.choice(string.ascii_letters + string.digits) for _ in range(20))
        if s == 3:
            return self.hexid(16)
        if s == 4:
            return f"{r.randint(1, 9)}-{self.hexid(8)}-{self.hexid(24)}"
        return "".join(r.choice(string.ascii_uppercase + string.digits) for _ in range(14))

    def slug(self, n: int = 5) -> str:
        return "".join(self.rng.choice(LOWER) for _ in range(n))

    def tmp(self, stem: str, ext: str = "") -> str:
        r, s = self.rng, self.tmp_style
        if s == 0:
            return f"/tmp/tmp{self.slug(8)}/{stem}{ext}"
        if s == 1:
            return f"/var/folders/{self.slug(2)}/{self.slug(28)}/T/{stem}-{r.randint(10_000, 99_999)}{ext}"
        if s == 2:
            return f"C:\\Users\\runner\\AppData\\Local\\Temp\\{stem}_{self.hexid(6)}{ext}"
        if s == 3:
            return f"/tmp/{stem}.{int(self.now * 1000)}{ext}"
        return f"~/.cache/agent/{stem}-{self.rid()[:10]}{ext}.part"

    def choose(self, *options: str) -> str:
        return self.rng.choice(options)

    def say(self, *options: str) -> str | None:
        """The agent's words beside a call, or none (``""`` among the options)."""
        return self.rng.choice(options) or None


def within_for(period: int) -> int:
    return max(5, period + 2)


def loop_reports(t: T2, period: int = 1) -> int:
    """How many loop reports to write: past the deadline by 3–10, whole cycles."""
    n = within_for(period) + t.rng.randint(3, 10)
    return -(-n // period) * period


def prefix(t: T2) -> int:
    return t.rng.randint(2, 8)


Prep = tuple[str, str, str]  # (tool, command, its output)


def warmup(t: T2, steps: list[Prep]) -> None:
    """A loop's healthy prefix: 2–8 distinct steps of real work, in their order (no call repeated)."""
    k = min(prefix(t), len(steps))
    for i in sorted(t.rng.sample(range(len(steps)), k)):
        tool, cmd, out = steps[i]
        t.emit(cmd, out, tool=tool)
