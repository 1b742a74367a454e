"""``SafeTree``: a directory an agent controls, read without trusting it.

- no symlink is followed inside the tree: every directory component is opened relative to its
  parent with ``O_NOFOLLOW | O_DIRECTORY`` and every file with ``O_NOFOLLOW`` (and lstat'ed
  first, so a link can be named in the evidence);
- only regular files are read: a FIFO, device or socket is refused after ``lstat`` and again
  after ``fstat`` of the opened descriptor (opened ``O_NONBLOCK``, so nothing ever blocks);
- sizes are capped: JSON is read up to ``JSON_CAP`` bytes, previews up to their limit, and
  files of any size are hashed in fixed chunks so memory stays bounded;
- a ledger of this process (a hard link to it, or the ledger itself kept in a run directory) is
  never opened, and a file descriptor is closed through ``store.storage.lockguard.close`` (
  closing a descriptor of a ledger drops this process's SQLite locks on it).

Problems are returned as data (strings naming the file, relative to the tree's root), never
raised.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass

from store.storage import lockguard
from store.jsontypes import JsonValue
from store.runs.names import safe_relpath
from store.runs.strict_json import JSON_CAP, parse_json

CHUNK = 1024 * 1024
"""Hashing reads this many bytes at a time, whatever the file's size."""

MAX_ENTRIES = 10_000
"""Most entries walked in one run directory."""

MAX_TREE_DEPTH = 16
"""Deepest directory nesting walked inside one run."""

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
_FILE_FLAGS = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY
_DIR_FLAGS = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_DIRECTORY


@dataclass(frozen=True)
class Entry:
    """One entry of a run directory as ``lstat`` saw it. ``kind``: file, dir, symlink,
    fifo, device, socket or other."""

    path: str
    kind: str
    size: int
    mtime_ns: int
    ino: int

    @property
    def signature(self) -> tuple[str, str, int, int, int]:
        return (self.path, self.kind, self.size, self.mtime_ns, self.ino)


@dataclass(frozen=True)
class FileRead:
    """The result of reading one file: its digest and size, the bytes kept (up to a cap) and
    a problem when it could not be read as a regular file."""

    path: str
    problem: str | None = None
    sha256: str | None = None
    size: int | None = None
    data: bytes | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class JsonRead:
    """A JSON file read strictly: ``value`` when it parsed, otherwise ``problem``."""

    path: str
    value: JsonValue = None
    problem: str | None = None
    sha256: str | None = None
    size: int | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "other"


def kind_problem(path: str, kind: str) -> str:
    """The problem shown for an entry of ``kind`` where a regular file was wanted."""
    if kind == "symlink":
        return f"{path}: symlink, not followed"
    if kind == "dir":
        return f"{path}: a directory, not a regular file"
    return f"{path}: a {kind}, not a regular file; not read"


class SafeTree:
    """A directory opened once; files below it are reached without following symlinks.

    Use as a context manager. Paths in problems are relative to the tree's root, so they can
    be shown and compared as they are.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def open_child(cls, parent: str, name: str) -> tuple["SafeTree | None", str | None]:
        """Open ``parent/name`` as a tree; ``parent`` itself may be a symlink, ``name`` not.

        Returns ``(tree, None)``, ``(None, "missing")`` or ``(None, problem)``.
        """
        try:
            pfd = os.open(parent, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        except FileNotFoundError:
            return None, "missing"
        except OSError as e:
            return None, f"{parent}: cannot open ({e.strerror})"
        try:
            return cls._open_dir_at(pfd, name, name)
        finally:
            os.close(pfd)

    @classmethod
    def open_root(cls, path: str) -> tuple["SafeTree | None", str | None]:
        """Open a directory chosen by the operator (it may be reached through a symlink)."""
        try:
            fd = os.open(path, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC | _O_NONBLOCK)
        except FileNotFoundError:
            return None, "missing"
        except NotADirectoryError:
            return None, f"{path}: not a directory"
        except OSError as e:
            return None, f"{path}: cannot open ({e.strerror})"
        return cls(fd), None

    @classmethod
    def _open_dir_at(
        cls, dir_fd: int, name: str, shown: str
    ) -> tuple["SafeTree | None", str | None]:
        fd, problem = _open_at(dir_fd, name, shown, want_dir=True)
        if fd is None:
            return None, problem
        return cls(fd), None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "SafeTree":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lookups -------------------------------------------------------------------------

    def lstat(self, relpath: str) -> tuple[Entry | None, str | None]:
        """lstat ``relpath`` checking every directory component on the way.

        Returns ``(entry, None)``; ``(None, "missing")``; or ``(None, problem)`` when a
        component is a symlink or not a directory (the problem names it).
        """
        parts = safe_relpath(relpath)
        if parts is None:
            return None, f"{relpath!r}: not a safe relative path"
        fd, problem, opened = self._descend(parts[:-1])
        if fd is None:
            return None, problem
        try:
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None, "missing"
        except OSError as e:
            return None, f"{relpath}: cannot stat ({e.strerror})"
        finally:
            if opened:
                os.close(fd)
        return Entry(relpath, _kind(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino), None

    def _descend(self, dirs: tuple[str, ...]) -> tuple[int | None, str | None, bool]:
        """Open the directory ``dirs`` below the root, component by component."""
        fd = self._fd
        opened = False
        shown = []
        for comp in dirs:
            shown.append(comp)
            nfd, problem = _open_at(fd, comp, "/".join(shown), want_dir=True)
            if opened:
                os.close(fd)
            if nfd is None:
                return None, problem, False
            fd, opened = nfd, True
        return fd, None, opened

    def _open_file(self, relpath: str) -> tuple[int | None, str | None]:
        parts = safe_relpath(relpath)
        if parts is None:
            return None, f"{relpath!r}: not a safe relative path"
        dfd, problem, opened = self._descend(parts[:-1])
        if dfd is None:
            return None, problem
        try:
            return _open_at(dfd, parts[-1], relpath, want_dir=False)
        finally:
            if opened:
                os.close(dfd)

    # -- reads ---------------------------------------------------------------------------

    def read(self, relpath: str, cap: int | None = None) -> FileRead:
        """Hash the whole file in chunks; keep its first ``cap`` bytes (``None``: keep none).

        Memory stays within ``cap + CHUNK`` whatever the file's size.
        """
        fd, problem = self._open_file(relpath)
        if fd is None:
            if problem == "missing":
                problem = f"{relpath}: missing"
            return FileRead(relpath, problem=problem)
        digest = hashlib.sha256()
        kept = bytearray()
        size = 0
        try:
            while True:
                chunk = os.read(fd, CHUNK)
                if not chunk:
                    break
                digest.update(chunk)
                size += len(chunk)
                if cap is not None and len(kept) < cap:
                    kept += chunk[: cap - len(kept)]
        except OSError as e:
            return FileRead(relpath, problem=f"{relpath}: read failed ({e.strerror})")
        finally:
            lockguard.close(fd)
        data = bytes(kept) if cap is not None else None
        return FileRead(
            relpath,
            sha256=digest.hexdigest(),
            size=size,
            data=data,
            truncated=cap is not None and size > cap,
        )

    def read_json(self, relpath: str, cap: int = JSON_CAP) -> JsonRead:
        """Read and strictly parse a JSON file of at most ``cap`` bytes."""
        r = self.read(relpath, cap=cap)
        if not r.ok:
            return JsonRead(relpath, problem=r.problem)
        if r.truncated:
            return JsonRead(
                relpath,
                problem=f"{relpath}: {r.size} bytes, over the {cap}-byte limit; not parsed",
                sha256=r.sha256,
                size=r.size,
            )
        value, problem = parse_json(r.data or b"")
        return JsonRead(
            relpath,
            value=value,
            problem=f"{relpath}: {problem}" if problem else None,
            sha256=r.sha256,
            size=r.size,
        )

    def top_level(self) -> list[Entry]:
        """The entries directly below the root, sorted by name (lstat only; an entry that
        cannot be stat'ed is left out, an unlistable root is empty)."""
        entries: list[Entry] = []
        try:
            names = sorted(os.listdir(self._fd))
        except OSError:
            return []
        for name in names:
            try:
                st = os.stat(name, dir_fd=self._fd, follow_symlinks=False)
            except OSError:
                continue
            entries.append(Entry(name, _kind(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino))
        return entries

    def walk(self) -> tuple[tuple[Entry, ...], tuple[str, ...]]:
        """Every entry below the root (lstat only, nothing followed), sorted by path, and the
        problems met: symlinks, special files, too many entries, nesting too deep."""
        entries: list[Entry] = []
        problems: list[str] = []
        stack: list[tuple[int, str, int, bool]] = [(self._fd, "", 0, False)]
        try:
            while stack:
                fd, prefix, depth, owned = stack.pop()
                try:
                    self._scan(fd, prefix, depth, entries, problems, stack)
                finally:
                    if owned:
                        os.close(fd)
                if len(entries) > MAX_ENTRIES:
                    problems.append(f"more than {MAX_ENTRIES} entries; not all were checked")
                    break
        finally:
            for fd, _, _, owned in stack:
                if owned:
                    os.close(fd)
        entries.sort(key=lambda e: e.path)
        return tuple(entries), tuple(problems)

    def _scan(
        self,
        fd: int,
        prefix: str,
        depth: int,
        entries: list[Entry],
        problems: list[str],
        stack: list[tuple[int, str, int, bool]],
    ) -> None:
        try:
            names = sorted(os.listdir(fd))
        except OSError as e:
            problems.append(f"{prefix or '.'}: cannot list ({e.strerror})")
            return
        for name in names:
            path = prefix + name
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError as e:
                problems.append(f"{path}: cannot stat ({e.strerror})")
                continue
            kind = _kind(st.st_mode)
            entries.append(Entry(path, kind, st.st_size, st.st_mtime_ns, st.st_ino))
            if kind == "dir":
                if depth + 1 > MAX_TREE_DEPTH:
                    problems.append(f"{path}: nested deeper than {MAX_TREE_DEPTH} levels")
                    continue
                cfd, problem = _open_at(fd, name, path, want_dir=True)
                if cfd is None:
                    problems.append(problem or f"{path}: cannot open")
                    continue
                stack.append((cfd, path + "/", depth + 1, True))
            elif kind != "file":
                problems.append(kind_problem(path, kind))


def _open_at(dir_fd: int, name: str, shown: str, *, want_dir: bool) -> tuple[int | None, str | None]:
    """Open ``name`` relative to ``dir_fd`` without following a link; check its type before
    (lstat) and after (fstat) opening. Returns ``(fd, None)`` or ``(None, problem)``;
    ``problem == "missing"`` when it does not exist."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None, "missing"
    except OSError as e:
        return None, f"{shown}: cannot stat ({e.strerror})"
    kind = _kind(st.st_mode)
    wanted = "dir" if want_dir else "file"
    if kind != wanted:
        if want_dir and kind == "file":
            return None, f"{shown}: a regular file, not a directory"
        return None, kind_problem(shown, kind)
    if not want_dir and lockguard.protected(st):
        # A ledger of this process (a hard link to it in a run directory, or the ledger kept
        # there): closing a descriptor of it would drop this process's SQLite locks.
        return None, f"{shown}: a ledger file this process has open; not read"
    try:
        fd = os.open(name, _DIR_FLAGS if want_dir else _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None, "missing"
    except OSError as e:  # ELOOP: it became a symlink between lstat and open
        return None, f"{shown}: cannot open without following links ({e.strerror})"
    st2 = os.fstat(fd)
    if _kind(st2.st_mode) != wanted or (st2.st_ino, st2.st_dev) != (st.st_ino, st.st_dev):
        lockguard.close(fd)
        return None, f"{shown}: changed while being opened; not read"
    return fd, None
