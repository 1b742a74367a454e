"""Is this file a Warden ledger? Decided before SQLite opens it for real, without writing anything.

Opening a file with SQLite is not harmless: a writable connection sets ``journal_mode=wal`` (it
rewrites a foreign database's header, turns a 0-byte file into a 4 KiB database), and even a
``mode=ro`` reader of a WAL database creates ``-wal`` and ``-shm`` beside it and may leave them
behind. So :func:`inspect` looks first, and only a Warden ledger is ever opened normally:

1. the path is a regular file (not a symbolic link, a directory, a FIFO, a socket or a device);
2. its header is SQLite's (16 magic bytes, a power-of-two page size) and, when no ``-wal`` file
   says a writer is at work, the file is as long as its header says (not truncated);
3. a probe connection with ``immutable=1`` (which never creates, locks or writes anything; with a
   ``-wal`` present a plain ``mode=ro``, which then needs no new file) finds the ``meta`` table
   and a ``schema_version`` that is a plain number.

Anything else raises :class:`~store.errors.LedgerUnavailable` with one line (the path escaped).
A read-only open of a WAL ledger also learns here whether SQLite can share the WAL index (it needs
to create or open ``-shm``); when it cannot — a read-only directory, an auditor's account — the
ledger is read as an immutable snapshot (``snapshot=True``) and the console says so.
"""

from __future__ import annotations

import atexit
import errno
import os
import sqlite3
import stat
import urllib.parse
from dataclasses import dataclass

from .backends import one_line
from .errors import LedgerUnavailable
from .text import safe_line

MAGIC = b"SQLite format 3\x00"
HEADER_BYTES = 100
NO_LEDGER_HINT = "start an agent (Ledger.open creates one) or run `warden demo`"


@dataclass(frozen=True)
class Inspection:
    """What :func:`inspect` found: ``exists`` False (no file), ``empty`` (0 bytes), otherwise a
    Warden ledger of ``version`` (``wal``: in WAL mode; ``snapshot``: a read-only reader must read
    it immutable)."""

    exists: bool
    empty: bool = False
    version: int | None = None
    wal: bool = False
    snapshot: bool = False
    quiescent: bool = False  # no -wal and no -shm beside it when looked at: nobody had it open


def uri(path: str, **params: str) -> str:
    """A ``file:`` URI for ``path`` (quoted: ``?``, ``#`` and ``%`` in a path are not parameters)."""
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{urllib.parse.quote(path)}" + (f"?{query}" if query else "")


def parse_version(value: object) -> int | None:
    """A stored ``schema_version``: plain decimal digits, else None (``'abc'``, ``' 2\\n'``, ``'1e3'``)."""
    s = str(value)
    if s.isascii() and s.isdigit() and len(s) <= 9:
        return int(s)
    return None


def checked_version(value: object, shown: str) -> int:
    """:func:`parse_version`, or ``LedgerUnavailable`` naming the ledger ``shown`` (escaped already)."""
    version = parse_version(value)
    if version is None:
        raise LedgerUnavailable(f"{shown} has an unreadable schema_version {safe_line(repr(str(value)[:40]))}: "
                                "not a ledger this Warden can read or migrate")
    return version


def inspect(path: str, *, read_only: bool) -> Inspection:
    """Look at ``path`` (absolute) without writing anything; see the module doc."""
    shown = safe_line(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return Inspection(exists=False)
    except OSError as e:
        raise LedgerUnavailable(f"cannot reach the ledger {shown}: {_why(e)}") from None
    if stat.S_ISLNK(st.st_mode):
        raise LedgerUnavailable(f"{shown} is a symbolic link; open the real file instead")
    if stat.S_ISDIR(st.st_mode):
        raise LedgerUnavailable(f"{shown} is a directory, not a ledger file")
    if not stat.S_ISREG(st.st_mode):
        raise LedgerUnavailable(f"{shown} is not a regular file (a FIFO, socket or device): not a ledger")
    if st.st_size == 0:
        return Inspection(exists=True, empty=True)
    header = _read_header(path, shown)
    wal_file = _nonempty(path + "-wal")
    quiescent = not os.path.lexists(path + "-wal") and not os.path.lexists(path + "-shm")
    if len(header) < HEADER_BYTES or not header.startswith(MAGIC):
        raise LedgerUnavailable(f"{shown} is not a SQLite database, so not a Warden ledger")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise LedgerUnavailable(f"{shown} has a damaged SQLite header (page size {page_size}): not a ledger")
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]
    if not wal_file and valid and pages and st.st_size < pages * page_size:
        raise LedgerUnavailable(
            f"{shown} is truncated ({st.st_size} bytes; its header says {pages * page_size}): restore it from a backup"
        )
    wal = header[18] == 2
    version = _probe(path, shown, immutable=not wal_file)
    snapshot = read_only and wal and not _can_share_wal_index(path)
    return Inspection(exists=True, version=version, wal=wal, snapshot=snapshot, quiescent=quiescent)


def _why(e: OSError) -> str:
    return safe_line(e.strerror or errno.errorcode.get(e.errno or 0, type(e).__name__))


def _read_header(path: str, shown: str) -> bytes:
    # O_NONBLOCK: should the file be swapped for a FIFO after the lstat, opening it does not hang.
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise LedgerUnavailable(f"cannot read the ledger {shown}: {_why(e)}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LedgerUnavailable(f"{shown} is not a regular file: not a ledger")
        return os.read(fd, HEADER_BYTES)
    except OSError as e:
        raise LedgerUnavailable(f"cannot read the ledger {shown}: {_why(e)}") from None
    finally:
        os.close(fd)


def _nonempty(path: str) -> bool:
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False


def _probe(path: str, shown: str, *, immutable: bool) -> int:
    params = {"mode": "ro", "immutable": "1"} if immutable else {"mode": "ro"}
    try:
        con = sqlite3.connect(uri(path, **params), uri=True, timeout=5.0)
    except sqlite3.Error as e:
        raise LedgerUnavailable(f"cannot open the ledger {shown}: {one_line(e)}") from None
    try:
        con.execute("PRAGMA query_only = 1")
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" not in tables:
            what = "a SQLite database but not a Warden ledger" if tables else "an empty SQLite database"
            raise LedgerUnavailable(f"{shown} is {what} (no meta table)")
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.Error as e:
        raise LedgerUnavailable(f"{shown} is not a readable Warden ledger: {one_line(e)}") from None
    finally:
        con.close()
    if row is None:
        raise LedgerUnavailable(f"{shown} has no schema_version: not a Warden ledger")
    return checked_version(row[0], shown)


def _can_share_wal_index(path: str) -> bool:
    """Can a ``mode=ro`` reader of this WAL database use the shared WAL index? (It needs ``-shm``
    to exist readable, or to be creatable.) Tried for real: permissions alone do not say it."""
    try:
        con = sqlite3.connect(uri(path, mode="ro"), uri=True, timeout=5.0)
    except sqlite3.Error:
        return False
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return True
    except sqlite3.Error:
        return False
    finally:
        con.close()


def check_writable(path: str) -> None:
    """Refuse, before any write, a ledger this process may read but not write."""
    shown = safe_line(path)
    if not os.access(path, os.W_OK):
        raise LedgerUnavailable(f"cannot write the ledger {shown}: permission denied (a read needs no write: "
                                "use a read command or --read-only)")
    side = [path + "-wal", path + "-shm"]
    if not os.access(os.path.dirname(path), os.W_OK) and not all(os.access(f, os.W_OK) for f in side):
        raise LedgerUnavailable(f"cannot write the ledger {shown}: SQLite must create its -wal and -shm files "
                                "beside it and the directory is not writable")


def tidy(path: str) -> None:
    """After a read-only open of a quiescent WAL ledger: remove the empty ``-wal``/``-shm`` that
    reading made SQLite create, the way SQLite does when a connection closes — a momentary
    connection that reads one row (``query_only``, so it writes nothing) and closes; SQLite deletes
    the files only when no other connection, in any process, has the ledger open. Without write
    permission the files stay (they hold no data)."""
    if not _tidy_now(path) and path not in _TIDY_AT_EXIT:
        # Something still holds the ledger open in this process (a failed read's cursor not yet
        # released): try once more when the process ends.
        if not _TIDY_AT_EXIT:
            atexit.register(_tidy_at_exit)
        _TIDY_AT_EXIT.add(path)


_TIDY_AT_EXIT: set[str] = set()


def _tidy_at_exit() -> None:
    for path in sorted(_TIDY_AT_EXIT):
        _tidy_now(path)


def _tidy_now(path: str) -> bool:
    """True when nothing is left to tidy."""
    if not (os.path.exists(path + "-wal") or os.path.exists(path + "-shm")):
        return True
    if not os.access(path, os.W_OK):
        return True  # not ours to tidy
    try:
        con = sqlite3.connect(uri(path, mode="rw"), uri=True, timeout=1.0)
    except sqlite3.Error:
        return True
    try:
        con.execute("PRAGMA query_only = 1")
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        pass
    finally:
        con.close()
    return not (os.path.exists(path + "-wal") or os.path.exists(path + "-shm"))
