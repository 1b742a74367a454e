"""What every hostile-input test shares: the "one clear line" check, a fingerprint of files that a
refusal must leave alone, hostile text, hostile files, and running a function as an unprivileged
user (root bypasses file permissions, so read-only cases are run as ``nobody``)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from store.text import safe_line

NOBODY = 65534

# ---------------------------------------------------------------------- one clear line
def assert_one_clear_line(message: str, *, names: str | None = None) -> None:
    """A human line: not empty, one line, nothing a terminal would act on, no traceback, no
    "internal error"; ``names`` must appear in it (the argument, the path...)."""
    assert message and message.strip(), "empty message"
    assert "\n" not in message and "\r" not in message, f"more than one line: {message!r}"
    assert safe_line(message) == message, f"raw control or format character in {message!r}"
    assert "Traceback" not in message and "internal error" not in message.lower(), message
    assert len(message) < 2000, f"{len(message)} characters"
    if names is not None:
        assert names in message, f"{names!r} not named in {message!r}"


# ---------------------------------------------------------------------- hostile text
HOSTILE_TEXTS = [
    "[/]", "[bold red]OPT[/]", "[link=https://evil.example]click[/link]", "[@click=app.quit]x[/]",
    "\x1b[2J\x1b[H", "\x1b]0;pwned\x07", "\x1b]52;c;cHduZWQ=\x07", "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",
    "\x9b31m C1 CSI", "\x90 DCS \x9c", "abc\u202edcba", "\u2066isolate\u2069", "zero\u200bwidth\ufeff",
    "tab\there", "cr\rover", "nul\x00byte", "bell\x07", "del\x7f", "line\u2028sep", "\U000e0041tag",
    "${HOME} $(id) `id`", "%s %n {0} {x!r}", "\\x1b literal", "emoji 🧨 and 中文",
]


def hostile_text(rng: random.Random, *, size: int | None = None) -> str:
    """A random string mixing the pieces above with random code points (a generator, not a list)."""
    parts: list[str] = []
    n = size if size is not None else rng.choice([1, 3, 10, 40])
    for _ in range(n):
        pick = rng.random()
        if pick < 0.5:
            parts.append(rng.choice(HOSTILE_TEXTS))
        elif pick < 0.8:
            parts.append("".join(chr(rng.choice([rng.randrange(0, 0x20), rng.randrange(0x7F, 0xA0),
                                                  rng.randrange(0x2000, 0x2070), rng.randrange(0x20, 0x7F)]))
                                 for _ in range(rng.randrange(1, 8))))
        else:
            parts.append(rng.choice(["[", "]", "[/", "/]", "[b]", "\\", "\n", "x" * rng.randrange(1, 200)]))
    return "".join(parts)


# ---------------------------------------------------------------------- files left alone
def fingerprint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Everything a refusal must not change: the file's bytes (hash), size, mtime and mode, and
    the listing of its directory (no -wal, -shm or -journal appears)."""
    p = Path(path)
    out: dict[str, Any] = {}
    try:
        st = p.lstat()
        out["stat"] = (st.st_mode, st.st_size, st.st_mtime_ns)
        if stat.S_ISREG(st.st_mode) and os.access(p, os.R_OK):
            out["sha256"] = hashlib.sha256(p.read_bytes()).hexdigest()
    except FileNotFoundError:
        out["stat"] = None
    parent = p.parent
    out["listing"] = sorted(os.listdir(parent)) if parent.is_dir() else None
    return out


# ---------------------------------------------------------------------- as an unprivileged user
def run_as_nobody(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a forked child as uid/gid ``nobody`` (when this process is root; otherwise
    as this user, who is unprivileged already). Returns ``fn()``'s JSON-able result, or
    ``{"error": type, "message": str}`` for an exception. Everything ``fn`` needs must be imported
    already: the child cannot read root's files."""
    if os.geteuid() != 0:
        return _call(fn)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            data = json.dumps(_call(fn)).encode()
            os.write(w, data)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged child failed"
    return json.loads(b"".join(chunks))


def _call(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as e:
        return {"error": type(e).__name__, "message": str(e)}


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A directory ``nobody`` can reach (pytest's tmp_path is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="warden-hostile-", dir="/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        for root, dirs, files in os.walk(d):
            os.chmod(root, 0o755)
            for x in dirs:
                os.chmod(os.path.join(root, x), 0o755)
        import shutil

        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------- hostile ledgers
def foreign_sqlite(path: Path, *, wal: bool, keep_wal: bool = False) -> Any:
    """A SQLite database that is not a Warden ledger (a table of its own), in WAL mode or not.
    ``keep_wal``: returns the still-open connection so its -wal and -shm stay beside it."""
    con = sqlite3.connect(path)
    if wal:
        con.execute("PRAGMA journal_mode=wal")
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    con.executemany("INSERT INTO notes (body) VALUES (?)", [(f"note {i}",) for i in range(50)])
    con.commit()
    if keep_wal:
        return con
    con.close()
    return None


def set_schema_version(path: Path, value: Any) -> None:
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (value,))
    con.commit()
    con.close()
