"""Safe reader of run directories (``runs/<run_id>/``; format in DESIGN.md "Run directories").

Everything here is written for a directory an agent controls and Warden does not trust:

- no symlink is followed inside a run: every directory component is opened relative to its
  parent with ``O_NOFOLLOW | O_DIRECTORY`` and every file with ``O_NOFOLLOW`` (and lstat'ed
  first, so a link can be named in the evidence);
- only regular files are read: a FIFO, device or socket is refused after ``lstat`` and again
  after ``fstat`` of the opened descriptor (opened ``O_NONBLOCK``, so nothing ever blocks);
- sizes are capped: JSON is read up to ``JSON_CAP`` bytes, previews up to their limit, and
  files of any size are hashed in fixed chunks so memory stays bounded;
- JSON is strict: UTF-8 only, no duplicate keys, no NaN/Infinity, bounded nesting.

Problems are returned as data (strings naming the file), never raised to the caller. The only
exceptions raised on purpose are ``Refused`` for an invalid run name and ``NotFound`` for a run
that does not exist, both before anything is read.

The runs directory itself may be a symlink (the operator chose it); a run inside it may not.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from store.errors import NotFound, Refused

JSON_CAP = 1024 * 1024
"""Largest JSON file read (bytes). A bigger one is reported, never parsed."""

PREVIEW_CAP = 64 * 1024
"""Default preview length (bytes)."""

CHUNK = 1024 * 1024
"""Hashing reads this many bytes at a time, whatever the file's size."""

MAX_JSON_DEPTH = 64
"""Deepest JSON nesting accepted (arrays + objects)."""

MAX_ENTRIES = 10_000
"""Most entries walked in one run directory."""

MAX_TREE_DEPTH = 16
"""Deepest directory nesting walked inside one run."""

RUN_STATUSES = ("running", "interrupted", "completed", "failed")
STEP_STATUSES = ("pending", "running", "done", "failed")

_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_HEX64 = re.compile(r"[0-9a-f]{64}")

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
_FILE_FLAGS = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY
_DIR_FLAGS = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_DIRECTORY


def valid_name(name: object) -> bool:
    """A run or record name: ``[A-Za-z0-9._-]{1,64}``, and not ``.`` or ``..``."""
    return (
        isinstance(name, str)
        and _NAME.fullmatch(name) is not None
        and name not in (".", "..")
    )


def require_name(name: object, what: str = "run") -> str:
    """Return ``name`` if valid, else raise ``Refused`` (nothing is read)."""
    if not valid_name(name):
        shown = json.dumps(name if isinstance(name, str) else repr(name))
        raise Refused(
            f"invalid {what} name {shown[:80]}: use 1-64 of A-Z a-z 0-9 . _ - (not . or ..)"
        )
    return name  # type: ignore[return-value]


_UNPRINTABLE_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def printable(text: str) -> str:
    """``text`` with every control, format (bidi, zero-width), surrogate, private, unassigned
    or line-separator character escaped as ``\\x1b`` / ``\\u202e``. Problems and evidence
    embed names an agent chose; they pass through here so they are one safe line anywhere."""
    if text.isascii() and text.isprintable():
        return text
    out = []
    for ch in text:
        if unicodedata.category(ch) in _UNPRINTABLE_CATEGORIES:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


def valid_sha256(value: object) -> bool:
    """A lowercase hex sha256 digest."""
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def safe_relpath(path: object) -> tuple[str, ...] | None:
    """Split a relative POSIX path into its components, or None when it is not safe.

    Safe: a non-empty string, not absolute, no backslash or NUL, no empty, ``.`` or ``..``
    component.
    """
    if not isinstance(path, str) or not path or len(path) > 1024:
        return None
    if path.startswith("/") or "\\" in path or "\x00" in path:
        return None
    parts = tuple(path.split("/"))
    if any(p in ("", ".", "..") for p in parts):
        return None
    return parts


# --------------------------------------------------------------------------- strict JSON


class _JsonProblem(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _JsonProblem(f"duplicate key {json.dumps(key)[:60]}")
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise _JsonProblem(f"{name} is not JSON")


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def _nesting_depth(text: str) -> int:
    """Deepest bracket nesting outside string literals (computed without recursion)."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(_STRINGS.sub('""', text)):
        if m.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def parse_json(data: bytes) -> tuple[Any, str | None]:
    """Parse strict JSON. Returns ``(value, None)`` or ``(None, problem)``; never raises."""
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 (byte {e.start})"
    if text.startswith("\ufeff"):
        return None, "malformed JSON: starts with a byte-order mark"
    if _nesting_depth(text) > MAX_JSON_DEPTH:
        return None, f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        value = json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants
        )
    except _JsonProblem as e:
        return None, f"malformed JSON: {e}"
    except json.JSONDecodeError as e:
        return None, f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}"
    except (ValueError, RecursionError) as e:  # e.g. an integer of too many digits
        return None, f"malformed JSON: {str(e).splitlines()[0][:120]}"
    try:  # what parsed must write back as finite, valid UTF-8 JSON
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # (a ValueError too: test it first)
        return None, "malformed JSON: a lone surrogate escape (not valid Unicode)"
    except ValueError:
        return None, "malformed JSON: a number out of range (overflows to infinity)"
    return value, None


# --------------------------------------------------------------------------- file access


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
    value: Any = None
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


def _kind_problem(path: str, kind: str) -> str:
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
            os.close(fd)
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
                problems.append(_kind_problem(path, kind))


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
        return None, _kind_problem(shown, kind)
    try:
        fd = os.open(name, _DIR_FLAGS if want_dir else _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None, "missing"
    except OSError as e:  # ELOOP: it became a symlink between lstat and open
        return None, f"{shown}: cannot open without following links ({e.strerror})"
    st2 = os.fstat(fd)
    if _kind(st2.st_mode) != wanted or (st2.st_ino, st2.st_dev) != (st.st_ino, st.st_dev):
        os.close(fd)
        return None, f"{shown}: changed while being opened; not read"
    return fd, None


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class Step:
    name: str
    status: str
    receipt: Any = None


@dataclass(frozen=True)
class RunSummary:
    """One row of the runs list. ``status`` is None when ``state.json`` could not be read."""

    name: str
    status: str | None
    task_id: str | None = None
    node_key: str | None = None
    updated_at: str | None = None
    problems: tuple[str, ...] = ()
    simulation: bool = False


@dataclass(frozen=True)
class RunView:
    """Everything readable about one run, read safely. Treat the dicts as read-only."""

    name: str
    path: str
    status: str | None
    task_id: str | None
    node_key: str | None
    updated_at: str | None
    steps: tuple[Step, ...]
    inputs: dict[str, str]
    manifest: dict[str, dict[str, Any]]
    receipts: tuple[str, ...]
    entries: tuple[Entry, ...]
    simulation: bool
    problems: tuple[str, ...]
    state: dict[str, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Preview:
    path: str
    text: str
    truncated: bool
    size: int | None
    problem: str | None = None


def _clean(problems: list[str]) -> tuple[str, ...]:
    return tuple(printable(p) for p in problems)


def _opt_str(state: dict[str, Any], key: str, problems: list[str]) -> str | None:
    value = state.get(key)
    if value is None or isinstance(value, str):
        return value
    problems.append(f"state.json: {key} is not a string")
    return None


def _summary_fields(
    state_read: JsonRead, problems: list[str]
) -> tuple[dict[str, Any] | None, str | None, str | None, str | None, str | None]:
    if not state_read.ok:
        problems.append(state_read.problem or "state.json: unreadable")
        return None, None, None, None, None
    state = state_read.value
    if not isinstance(state, dict):
        problems.append("state.json: not a JSON object")
        return None, None, None, None, None
    status = state.get("status")
    if not isinstance(status, str):
        problems.append("state.json: status missing or not a string")
        status = None
    elif status not in RUN_STATUSES:
        problems.append(f"state.json: unknown status {json.dumps(status)[:40]}")
    return (
        state,
        status,
        _opt_str(state, "task_id", problems),
        _opt_str(state, "node_key", problems),
        _opt_str(state, "updated_at", problems),
    )


def _simulation(tree: SafeTree, problems: list[str]) -> bool:
    entry, problem = tree.lstat("SIMULATION.json")
    if entry is None:
        if problem != "missing":
            problems.append(problem or "SIMULATION.json: unreadable")
        return False
    sim = tree.read_json("SIMULATION.json")
    if not sim.ok:
        problems.append(sim.problem or "SIMULATION.json: unreadable")
    return True


def list_runs(runs_dir: str | os.PathLike[str]) -> list[RunSummary]:
    """One summary per run directory, sorted by name. A missing runs dir is an empty list.

    Regular files directly in the runs directory are not runs and are skipped. An entry with an
    invalid name, a symlink or a special file is listed with a problem and nothing read.
    """
    root = os.fspath(runs_dir)
    tree, problem = SafeTree.open_root(root)
    if tree is None:
        return []
    out: list[RunSummary] = []
    with tree:
        entries = _top_level(tree)
        for entry in entries:
            name = entry.path
            if entry.kind == "file":
                continue
            if not valid_name(name):
                out.append(RunSummary(name, None, problems=("invalid run name; not read",)))
                continue
            if entry.kind != "dir":
                out.append(RunSummary(name, None, problems=_clean([_kind_problem(name, entry.kind)])))
                continue
            out.append(_summarise(root, name))
    return out


def _top_level(tree: SafeTree) -> list[Entry]:
    """The entries directly in the runs directory (lstat only)."""
    entries: list[Entry] = []
    try:
        names = sorted(os.listdir(tree._fd))
    except OSError:
        return []
    for name in names:
        try:
            st = os.stat(name, dir_fd=tree._fd, follow_symlinks=False)
        except OSError:
            continue
        entries.append(Entry(name, _kind(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino))
    return entries


def _summarise(root: str, name: str) -> RunSummary:
    problems: list[str] = []
    run, problem = SafeTree.open_child(root, name)
    if run is None:
        return RunSummary(name, None, problems=_clean([problem or "cannot open"]))
    with run:
        _, status, task_id, node_key, updated_at = _summary_fields(
            run.read_json("state.json"), problems
        )
        simulation = _simulation(run, problems)
    return RunSummary(name, status, task_id, node_key, updated_at, _clean(problems), simulation)


def open_run(runs_dir: str | os.PathLike[str], name: str) -> tuple[SafeTree | None, str | None]:
    """Open a run directory by (validated) name without following a link.

    Raises ``Refused`` for an invalid name and ``NotFound`` when it does not exist; returns
    ``(None, problem)`` when it exists but is a symlink or not a directory.
    """
    require_name(name)
    root = os.fspath(runs_dir)
    run, problem = SafeTree.open_child(root, name)
    if run is None and problem == "missing":
        raise NotFound(f"no run named {name} in {root}")
    return run, problem


def read_run(runs_dir: str | os.PathLike[str], name: str) -> RunView:
    """Read one run completely and safely. Problems are in ``RunView.problems``."""
    root = os.fspath(runs_dir)
    path = os.path.join(root, name) if valid_name(name) else root
    run, problem = open_run(runs_dir, name)
    if run is None:
        return RunView(name, path, None, None, None, None, (), {}, {}, (), (), False,
                       _clean([problem or "cannot open"]))
    problems: list[str] = []
    with run:
        entries, walk_problems = run.walk()
        problems.extend(walk_problems)
        state, status, task_id, node_key, updated_at = _summary_fields(
            run.read_json("state.json"), problems
        )
        steps = _steps(state, problems)
        inputs = _context_inputs(run, problems)
        manifest = _manifest(run, entries, problems)
        simulation = _simulation(run, problems)
    receipts = tuple(e.path[len("receipts/"):] for e in entries
                     if e.path.startswith("receipts/") and e.kind == "file")
    return RunView(name, path, status, task_id, node_key, updated_at, steps, inputs, manifest,
                   receipts, entries, simulation, _clean(problems), state)


def _steps(state: dict[str, Any] | None, problems: list[str]) -> tuple[Step, ...]:
    if state is None:
        return ()
    raw = state.get("steps")
    if not isinstance(raw, list):
        problems.append("state.json: steps is not a list")
        return ()
    steps = []
    for i, s in enumerate(raw):
        if not isinstance(s, dict) or not isinstance(s.get("name"), str) or not isinstance(
            s.get("status"), str
        ):
            problems.append(f"state.json: step {i} has no name or status")
            continue
        steps.append(Step(s["name"], s["status"], s.get("receipt")))
    return tuple(steps)


def _context_inputs(run: SafeTree, problems: list[str]) -> dict[str, str]:
    ctx = run.read_json("context.json")
    if not ctx.ok:
        problems.append(ctx.problem or "context.json: unreadable")
        return {}
    inputs, problem = context_inputs(ctx.value)
    if problem:
        problems.append(f"context.json: {problem}")
    return inputs


def context_inputs(value: Any) -> tuple[dict[str, str], str | None]:
    """Validate a parsed ``context.json``: ``{"inputs": {relative path: sha256}}``."""
    if not isinstance(value, dict):
        return {}, "not a JSON object"
    inputs = value.get("inputs")
    if not isinstance(inputs, dict):
        return {}, "no inputs object"
    if not inputs:
        return {}, "inputs is empty: nothing shows what the run was made from"
    out: dict[str, str] = {}
    for path, digest in inputs.items():
        if safe_relpath(path) is None:
            return {}, f"input path {json.dumps(path)[:80]} is not a safe relative path"
        if not valid_sha256(digest):
            return {}, f"input {json.dumps(path)[:80]}: not a lowercase hex sha256"
        out[path] = digest
    return out, None


def manifest_files(value: Any) -> tuple[dict[str, dict[str, Any]], str | None]:
    """Validate a parsed ``manifest.json``: ``{"files": {name: {"sha256", "bytes"}}}``."""
    if not isinstance(value, dict):
        return {}, "not a JSON object"
    files = value.get("files")
    if not isinstance(files, dict):
        return {}, "no files object"
    if not files:
        return {}, "lists no files"
    out: dict[str, dict[str, Any]] = {}
    for name, meta in files.items():
        if safe_relpath(name) is None or name == "manifest.json":
            return {}, f"file name {json.dumps(name)[:80]} is not allowed"
        if not isinstance(meta, dict) or not valid_sha256(meta.get("sha256")):
            return {}, f"{json.dumps(name)[:80]}: no lowercase hex sha256"
        size = meta.get("bytes")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return {}, f"{json.dumps(name)[:80]}: bytes is not a non-negative integer"
        out[name] = {"sha256": meta["sha256"], "bytes": size}
    return out, None


def _manifest(run: SafeTree, entries: tuple[Entry, ...], problems: list[str]) -> dict[str, dict[str, Any]]:
    if not any(e.path == "artifact/manifest.json" for e in entries):
        return {}
    m = run.read_json("artifact/manifest.json")
    if not m.ok:
        problems.append(m.problem or "artifact/manifest.json: unreadable")
        return {}
    files, problem = manifest_files(m.value)
    if problem:
        problems.append(f"artifact/manifest.json: {problem}")
    return files


def preview(
    runs_dir: str | os.PathLike[str], name: str, relpath: str, limit: int = PREVIEW_CAP
) -> Preview:
    """The first ``limit`` bytes of a file in a run, decoded (invalid UTF-8 replaced).

    The text is untrusted: show it through ``console/text.py``.
    """
    run, problem = open_run(runs_dir, name)
    if run is None:
        return Preview(relpath, "", False, None, problem)
    with run:
        r = run.read(relpath, cap=limit)
    if not r.ok:
        return Preview(relpath, "", False, None, r.problem)
    text = (r.data or b"").decode("utf-8", errors="replace")
    return Preview(relpath, text, r.truncated, r.size)


# ---------------------------------------------------------------------- writing (for agents)
def write_atomic(path: "os.PathLike[str] | str", data: bytes) -> None:
    """How an agent writes a run file so a crash never leaves half of it: a temp file in the same
    directory, fsync, rename over the name (docs/recovery.md). Parent directories are created."""
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json(path: "os.PathLike[str] | str", value: object) -> None:
    """``write_atomic`` of indented JSON (state.json, manifest.json, receipts)."""
    write_atomic(path, (json.dumps(value, indent=2) + "\n").encode())

