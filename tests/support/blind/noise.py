"""What real tool output carries besides its message: ids, hashes, stamps, paths, durations, numbers.

Every function takes the trial's ``random.Random``; a family picks a *style* once per trial (tools
do not change their timestamp format between two runs) and the values fresh on every line.
"""

from __future__ import annotations

import random
import string
import time

HEX = "0123456789abcdef"
B62 = string.digits + string.ascii_letters
K8S = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet Kubernetes draws pod-name suffixes from
B32 = "abcdefghijklmnopqrstuvwxyz234567"


def hexid(rng: random.Random, n: int = 12) -> str:
    return "".join(rng.choice(HEX) for _ in range(n))


def b62(rng: random.Random, n: int = 22) -> str:
    return "".join(rng.choice(B62) for _ in range(n))


def uuid(rng: random.Random) -> str:
    h = hexid(rng, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{rng.choice('89ab')}{h[17:20]}-{h[20:]}"


def pod(rng: random.Random, deploy: str) -> str:
    rs = "".join(rng.choice(K8S) for _ in range(rng.choice((9, 10))))
    return f"{deploy}-{rs}-{''.join(rng.choice(K8S) for _ in range(5))}"


def request_id(rng: random.Random, style: int) -> str:
    return (f"req_{b62(rng, 24)}", uuid(rng), hexid(rng, 16), f"{hexid(rng, 8).upper()}:{rng.randint(1, 9999)}",
            f"Root=1-{hexid(rng, 8)}-{hexid(rng, 24)}")[style % 5]


def ip(rng: random.Random) -> str:
    return rng.choice((f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                       f"172.{rng.randint(16, 31)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                       f"192.168.{rng.randint(0, 255)}.{rng.randint(1, 254)}"))


# ------------------------------------------------------------------------ timestamps
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def stamp(t: float, style: int) -> str:
    """``t`` (epoch seconds) as one of the formats logs use."""
    g = time.gmtime(t)
    ms = int((t % 1) * 1000)
    Y, M, D, h, m, s = g.tm_year, g.tm_mon, g.tm_mday, g.tm_hour, g.tm_min, g.tm_sec
    day, mon = DAYS[g.tm_wday], MONTHS[M - 1]
    forms = (
        f"{Y}-{M:02d}-{D:02d}T{h:02d}:{m:02d}:{s:02d}Z",
        f"{Y}-{M:02d}-{D:02d}T{h:02d}:{m:02d}:{s:02d}.{ms:03d}Z",
        f"{Y}-{M:02d}-{D:02d}T{(h + 2) % 24:02d}:{m:02d}:{s:02d}+02:00",
        f"{Y}-{M:02d}-{D:02d} {h:02d}:{m:02d}:{s:02d}",
        f"{Y}-{M:02d}-{D:02d} {h:02d}:{m:02d}:{s:02d},{ms:03d}",
        f"{mon} {D:2d} {h:02d}:{m:02d}:{s:02d}",
        f"{D:02d}/{mon}/{Y}:{h:02d}:{m:02d}:{s:02d} +0000",
        f"{day}, {D:02d} {mon} {Y} {h:02d}:{m:02d}:{s:02d} GMT",
        f"{h:02d}:{m:02d}:{s:02d}",
        f"{h:02d}:{m:02d}:{s:02d}.{ms:03d}",
        f"{int(t)}",
        f"{int(t * 1000)}",
        f"{Y}/{M:02d}/{D:02d} {h:02d}:{m:02d}:{s:02d}",
        f"{D:02d}-{mon}-{Y} {h:02d}:{m:02d}:{s:02d}.{ms:03d}",
        f"{M}/{D}/{Y}, {(h % 12) or 12}:{m:02d}:{s:02d} {'AM' if h < 12 else 'PM'}",
    )
    return forms[style % len(forms)]


N_STAMPS = 15


def npm_stamp(t: float) -> str:
    g = time.gmtime(t)
    return (f"{g.tm_year}-{g.tm_mon:02d}-{g.tm_mday:02d}T{g.tm_hour:02d}_{g.tm_min:02d}_{g.tm_sec:02d}_"
            f"{int((t % 1) * 1000):03d}Z")


def file_stamp(t: float) -> str:
    g = time.gmtime(t)
    return f"{g.tm_year}{g.tm_mon:02d}{g.tm_mday:02d}-{g.tm_hour:02d}{g.tm_min:02d}{g.tm_sec:02d}"


# ------------------------------------------------------------------------ durations
def duration(seconds: float, style: int) -> str:
    s = max(seconds, 0.001)
    mins, sec = divmod(s, 60)
    forms = (
        f"{s:.2f}s",
        f"{int(s * 1000)}ms",
        f"{int(mins)}m {sec:.0f}s" if mins else f"{sec:.1f}s",
        f"{int(mins // 60)}:{int(mins % 60):02d}:{int(sec):02d}",
        f"{s:.1f} seconds",
        f"{s:.3f} s",
        f"real\t{int(mins)}m{sec:.3f}s",
        f"{int(mins)} min {int(sec)} sec" if mins else f"{int(sec)} sec",
    )
    return forms[style % len(forms)]


N_DURATIONS = 8


# ------------------------------------------------------------------------ numbers
def num(n: float, style: int) -> str:
    """An integer as tools print it: plain, ``120,000``, ``120 000``, ``120.000``, ``120'000``, ``120_000``."""
    i = int(round(n))
    plain = f"{i:,}"
    forms = (str(i), plain, plain.replace(",", " "), plain.replace(",", "\u202f"), plain.replace(",", "."),
             plain.replace(",", "'"), plain.replace(",", "_"), plain.replace(",", "\u00a0"))
    return forms[style % len(forms)]


N_NUMS = 8


def short(n: float, style: int = 0) -> str:
    """``12k``, ``1.2M``, ``3.4B`` (or ``12.0K`` …)."""
    for div, suf in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            v = n / div
            if style % 2:
                return f"{v:.1f}{suf.upper()}"
            return f"{v:.3g}{suf}"
    return str(int(n))


def size(nbytes: float, style: int) -> str:
    units = ("B", "KB", "MB", "GB", "TB") if style % 3 != 1 else ("B", "KiB", "MiB", "GiB", "TiB")
    v = float(nbytes)
    k = 0
    while v >= 1024 and k < 4:
        v /= 1024
        k += 1
    if style % 3 == 2:
        return f"{num(nbytes, 1)} bytes" if k < 2 else f"{v:.1f}{units[k]}"
    return f"{v:.1f} {units[k]}"


def pct(x: float, style: int) -> str:
    return (f"{x:.0f}%", f"{x:.1f}%", f"{x:.2f} %", f"{x:.0f} %", f"({x:.1f}%)")[style % 5]


def span(a: float, b: float, n: float, style: int, nstyle: int) -> str:
    """A range of a total: ``120,000–130,000 of 1,000,000`` and its kin."""
    A, B, N = num(a, nstyle), num(b, nstyle), num(n, nstyle)
    return (f"{A}–{B} of {N}", f"{A}-{B}/{N}", f"{A} to {B} (of {N})", f"[{A}, {B}) / {N}",
            f"{A}..{B} of {N}", f"{A} — {B} out of {N}")[style % 6]


# ------------------------------------------------------------------------ paths
def tmpdir(rng: random.Random, style: int, user: str = "dev") -> str:
    alnum = string.ascii_lowercase + string.digits + "_"
    forms = (
        f"/tmp/tmp{''.join(rng.choice(alnum) for _ in range(8))}",
        f"/var/folders/{''.join(rng.choice(alnum) for _ in range(2))}/"
        f"{''.join(rng.choice(alnum) for _ in range(28))}/T/tmp{''.join(rng.choice(alnum) for _ in range(6))}",
        f"/tmp/{user}-{rng.randint(1000, 99999)}-{hexid(rng, 6)}",
        f"/run/user/1000/{hexid(rng, 12)}",
    )
    return forms[style % len(forms)]


def file_line_col(path: str, line: int, col: int, style: int) -> str:
    return (f"{path}:{line}:{col}", f"{path}({line},{col})", f"{path}, line {line}, column {col}",
            f"{path}:{line}", f"--> {path}:{line}:{col}", f"at {path} (line {line}:{col})")[style % 6]


def home(rng: random.Random) -> str:
    return rng.choice(("/home/dev", "/home/runner", "/Users/sam", "/root", "/home/ubuntu", "/workspace"))
