"""Is this file a Warden ledger? Decided by SQLite itself before it is opened for real, writing nothing.

Opening a file with SQLite is not harmless: a writable connection sets ``journal_mode=wal`` (it
rewrites a foreign database's header, turns a 0-byte file into a 4 KiB database), and even a
``mode=ro`` reader of a WAL database creates ``-wal`` and ``-shm`` beside it and may leave them
behind. So :func:`inspect` looks first, and only a Warden ledger is ever opened normally:

1. the path is a regular file (not a symbolic link, a directory, a FIFO, a socket or a device)
   with one name (a second hard link would mean a second ``-wal``), on a local file system
   (SQLite's locks and shared-memory WAL index do not work over NFS, SMB, 9p...);
2. a probe connection with ``immutable=1`` (which never creates, locks or writes anything; with a
   ``-wal`` in use a plain ``mode=ro``, which then needs no new file) reads the header, finds the
   ``meta`` table and a ``schema_version`` that is a plain number. SQLite refuses a file that is
   not a database, has a damaged header or is shorter than its header says.

Nothing here opens the file outside SQLite (store/storage/lockguard.py): closing a descriptor
of the ledger would drop every lock this process's connections hold on it. Only when SQLite has
already refused the file, and this process has no descriptor on it, is its header read to say
*why* (not SQLite, a bad page size, truncated).

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

from store.storage import lockguard
from store.storage.backends import one_line, sqlite_code
from store.errors import LedgerUnavailable
from store.text import safe_line

MAGIC = b"SQLite format 3\x00"
HEADER_BYTES = 100
NO_LEDGER_HINT = "start an agent (Ledger.open creates one) or run `warden demo`"


@dataclass(frozen=True)
class Inspection:
    """What :func:`inspect` found: ``exists`` False (no file), ``empty`` (0 bytes), otherwise a
    Warden ledger of ``version`` (``snapshot``: a read-only reader must read it immutable)."""

    exists: bool
    empty: bool = False
    version: int | None = None
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
    if st.st_nlink > 1:
        raise LedgerUnavailable(
            f"{shown} has {st.st_nlink} hard links: SQLite names its -wal and -shm after the path, so two names "
            "would mean two journals for one file; remove the other links (or copy it) and open it by one name")
    fs = network_filesystem(st)
    if fs is not None:
        raise LedgerUnavailable(
            f"{shown} is on a network file system ({safe_line(fs)}): SQLite's locks and WAL index are not shared "
            "reliably over it; put the ledger on a local disk or use PostgreSQL")
    if st.st_size == 0:
        return Inspection(exists=True, empty=True)
    quiescent = not os.path.lexists(path + "-wal") and not os.path.lexists(path + "-shm")
    # Immutable (creates, locks and writes nothing) unless a writer may be at work: then a plain
    # mode=ro reader, which shares the WAL index and needs no file that is not there already.
    live = nonempty(path + "-wal") or (os.path.lexists(path + "-wal") and os.path.lexists(path + "-shm"))
    try:
        version = _probe(path, shown, st, immutable=not live)
    except LedgerUnavailable:
        # A writer started between the look at -wal and the probe (the file changed under an
        # immutable read: a header newer than the size seen): probe again as a live reader.
        if live or not _changed(path, st):
            raise
        version = _probe(path, shown, os.stat(path), immutable=False)
    snapshot = read_only and not _can_share_wal_index(path)
    return Inspection(exists=True, version=version, snapshot=snapshot, quiescent=quiescent)


def _why(e: OSError) -> str:
    return safe_line(e.strerror or errno.errorcode.get(e.errno or 0, type(e).__name__))


def nonempty(path: str) -> bool:
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False


# Network file systems by their /proc/self/mountinfo type: SQLite's POSIX locks are unreliable
# over them and its WAL index (shared memory) is not shared between machines at all.
NETWORK_FS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "gpfs", "beegfs",
    "ncpfs", "coda", "davfs", "orangefs", "fuse.sshfs", "fuse.glusterfs", "fuse.s3fs", "fuse.rclone",
    "fuse.gcsfuse", "fuse.davfs2", "fuse.cephfs", "fuse.juicefs", "fuse.goofys", "fuse.blobfuse",
})
MOUNTINFO = "/proc/self/mountinfo"


def network_filesystem(st: os.stat_result) -> str | None:
    """The type of the network file system ``st``'s file is on (from ``/proc/self/mountinfo``,
    matched by device number), or None (local, or not known)."""
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    try:
        with open(MOUNTINFO, encoding="utf-8", errors="replace") as f:
            lines = f.read(1 << 22).splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 3 or fields[2] != dev or " - " not in line:
            continue
        fstype = line.split(" - ", 1)[1].split(" ", 1)[0]
        if fstype in NETWORK_FS or fstype.split(".", 1)[0] in NETWORK_FS:
            return fstype
    return None


def _probe(path: str, shown: str, st: os.stat_result, *, immutable: bool) -> int:
    params = {"mode": "ro", "immutable": "1"} if immutable else {"mode": "ro"}
    try:
        con = lockguard.connect(path, uri(path, **params), uri=True, timeout=5.0)
    except sqlite3.Error as e:
        raise LedgerUnavailable(f"cannot open the ledger {shown}: {one_line(e)}") from None
    try:
        con.execute("PRAGMA query_only = 1")
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" not in tables:
            if not tables and not con.execute("PRAGMA page_count").fetchone()[0]:
                # SQLite reads a file too short to hold a header as an empty database: it is not one.
                raise LedgerUnavailable(f"{shown} is not a SQLite database, so not a Warden ledger")
            what = "a SQLite database but not a Warden ledger" if tables else "an empty SQLite database"
            raise LedgerUnavailable(f"{shown} is {what} (no meta table)")
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if immutable:  # no WAL in use: the file alone must be as long as its header says
            pages = int(con.execute("PRAGMA page_count").fetchone()[0])
            page_size = int(con.execute("PRAGMA page_size").fetchone()[0])
            if st.st_size < pages * page_size:
                raise LedgerUnavailable(f"{shown} is truncated ({st.st_size} bytes; its header says "
                                        f"{pages * page_size}): restore it from a backup")
    except sqlite3.Error as e:
        refused: sqlite3.Error | None = e
    else:
        refused = None
    finally:
        lockguard.disconnect(con)
    if refused is not None:
        raise LedgerUnavailable(_refusal(path, shown, st, refused)) from None
    if row is None:
        raise LedgerUnavailable(f"{shown} has no schema_version: not a Warden ledger")
    return checked_version(row[0], shown)


def _changed(path: str, st: os.stat_result) -> bool:
    """Whether the file (or its -wal) changed since ``st`` (a stat: no descriptor is opened)."""
    try:
        now = os.stat(path)
    except OSError:
        return False
    return (now.st_size, now.st_mtime_ns) != (st.st_size, st.st_mtime_ns) or os.path.lexists(path + "-wal")


SQLITE_CORRUPT, SQLITE_NOTADB = 11, 26


def _refusal(path: str, shown: str, st: os.stat_result, e: sqlite3.Error) -> str:
    """Why SQLite refused the file, in one line. SQLite says "not a database" or "malformed";
    the header (read only now that SQLite has refused it, and only when this process holds no
    descriptor on it) says which: not SQLite at all, a bad page size, or truncated."""
    code = sqlite_code(e)
    if code not in (SQLITE_NOTADB, SQLITE_CORRUPT):
        return f"{shown} is not a readable Warden ledger: {one_line(e)}"
    header = _header_after_refusal(path, st)
    if header is not None and (len(header) < HEADER_BYTES or not header.startswith(MAGIC)):
        return f"{shown} is not a SQLite database, so not a Warden ledger"
    if header is not None:
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        if page_size < 512 or page_size & (page_size - 1):
            return f"{shown} has a damaged SQLite header (page size {page_size}): not a ledger"
        pages = int.from_bytes(header[28:32], "big")
        if header[24:28] == header[92:96] and pages and st.st_size < pages * page_size:
            return (f"{shown} is truncated ({st.st_size} bytes; its header says {pages * page_size}): "
                    "restore it from a backup")
    if code == SQLITE_NOTADB:
        return f"{shown} is not a SQLite database (or its header is damaged), so not a Warden ledger"
    return f"{shown} is damaged ({one_line(e)}): restore it from a backup"


def _header_after_refusal(path: str, st: os.stat_result) -> bytes | None:
    """The first HEADER_BYTES of a file SQLite refused, or None when it cannot be read safely (this
    process has a descriptor on it — a ledger that broke while open — or it changed)."""
    if lockguard.protected(st):
        return None
    try:
        fd = os.open(path, lockguard.READ_FLAGS)
    except OSError:
        return None
    try:
        st2 = os.fstat(fd)
        if not stat.S_ISREG(st2.st_mode) or (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino):
            return None
        return os.pread(fd, HEADER_BYTES, 0)
    except OSError:
        return None
    finally:
        lockguard.close(fd)


def _can_share_wal_index(path: str) -> bool:
    """Can a ``mode=ro`` reader of this WAL database use the shared WAL index? (It needs ``-shm``
    to exist readable, or to be creatable.) Tried for real: permissions alone do not say it."""
    try:
        con = lockguard.connect(path, uri(path, mode="ro"), uri=True, timeout=5.0)
    except sqlite3.Error:
        return False
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return True
    except sqlite3.Error:
        return False
    finally:
        lockguard.disconnect(con)


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
    connection that reads one row (``query_only``, so it writes nothing) and closes. Warden never
    deletes them itself: SQLite deletes them only when this close takes the database's EXCLUSIVE
    lock, which it cannot while any other connection — of another process, or of this one
    (SQLite counts those in its per-inode lock table) — has the ledger open. Without write
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
    if lockguard.inherited(path) is not None:
        return True  # a forked child: the parent's ledger is not the child's to touch
    try:
        con = lockguard.connect(path, uri(path, mode="rw"), uri=True, timeout=1.0)
    except sqlite3.Error:
        return True
    try:
        con.execute("PRAGMA query_only = 1")
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        pass
    finally:
        lockguard.disconnect(con)
    return not (os.path.exists(path + "-wal") or os.path.exists(path + "-shm"))
