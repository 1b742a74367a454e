"""Every process a supervised command started, found whatever session or group it moved to.

Standard library only: the keeper (store/adapters/keeper.py) runs it as a plain script, without
importing the store.

Where the machine offers one, the command runs in a cgroup of its own, made beside the
supervisor's: a process cannot leave it by ``setsid`` or a double fork, so freezing it parks
everything and killing it leaves nothing. Tried in order (``WARDEN_RUN_CONTAINMENT`` narrows it:
``cgroup2``, ``freezer``, ``tree``):

* **cgroup v2** (``cgroup.freeze``, ``cgroup.kill``), where this process's own cgroup directory
  is writable (root; a delegated systemd user slice);
* **cgroup v1 ``freezer``** (``freezer.state``), likewise;
* **the process tree** otherwise: the keeper is a child subreaper (``PR_SET_CHILD_SUBREAPER``),
  so a process whose parent ended is handed to the keeper, not to init, and every process the
  command started stays among the keeper's descendants (read from ``/proc``). A stop is
  ``SIGSTOP`` to each of them, repeated until none is left running (a fork between two passes is
  caught by the next).

Processes are named by pid with their start time (``/proc/PID/stat`` field 22) and the boot id,
so a pid reused by an unrelated process is never taken for one of ours.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable, Iterable

CONTAINMENT_ENV = "WARDEN_RUN_CONTAINMENT"
CONTAINMENTS = ("cgroup2", "freezer", "tree")
PREFIX = "warden-run."


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _stat(pid: int) -> list[bytes] | None:
    """``/proc/PID/stat`` after the command name: [state, ppid, pgrp, session, ...]."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def state(pid: int) -> str | None:
    """The process's state letter (R, S, D, T, t, Z...), None when there is no such process."""
    fields = _stat(pid)
    return fields[0].decode() if fields else None


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks since boot): with the pid, who it is."""
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def is_alive(pid: int, start: int | None = None) -> bool:
    """Whether ``pid`` is a live process (not a zombie) and, given ``start``, the same one."""
    fields = _stat(pid)
    if not fields or fields[0] in (b"Z", b"X"):
        return False
    return start is None or start_time(pid) == start


def _all_pids() -> list[int]:
    try:
        return [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (not ``root`` itself), parents before children."""
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        fields = _stat(pid)
        if fields and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(pid)
    out: list[int] = []
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def marked(marker: str) -> list[int]:
    """Processes whose environment carries ``WARDEN_RUN_MARK=marker`` (what a supervisor and its
    keeper that both died left behind; readable for our own processes, or any as root)."""
    needle = f"WARDEN_RUN_MARK={marker}".encode()
    out = []
    for pid in _all_pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read(256 * 1024)
        except OSError:
            continue
        if needle in env.split(b"\0") and is_alive(pid):
            out.append(pid)
    return out


def _kill(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


# ---------------------------------------------------------------------- cgroups
def _own_cgroup(version: int) -> str | None:
    """This process's cgroup directory in the v2 hierarchy (``version`` 2) or the v1 freezer."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
        with open("/proc/self/mountinfo") as f:
            mounts = f.read().splitlines()
    except OSError:
        return None
    rel = None
    for line in lines:
        hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if (version == 2 and hid == "0" and controllers == "") or \
                (version == 1 and "freezer" in controllers.split(",")):
            rel = path
    if rel is None:
        return None
    for m in mounts:
        left, _, right = m.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or not rfields:
            continue
        fstype, opts = rfields[0], (rfields[2] if len(rfields) > 2 else "")
        if version == 2 and fstype != "cgroup2":
            continue
        if version == 1 and not (fstype == "cgroup" and "freezer" in opts.split(",")):
            continue
        root, mountpoint = fields[3], fields[4]
        if rel == root or rel.startswith(root.rstrip("/") + "/"):
            sub = rel[len(root.rstrip("/")):].lstrip("/")
            return os.path.join(mountpoint, sub) if sub else mountpoint
    return None


class Cgroup:
    """A cgroup made for one command (v2, or the v1 freezer)."""

    def __init__(self, path: str, version: int) -> None:
        self.path = path
        self.version = version

    @classmethod
    def make(cls, name: str, prefer: str | None = None) -> "Cgroup | None":
        """A new cgroup ``PREFIX + name`` beside ours, or None where none can be made."""
        for kind, version in (("cgroup2", 2), ("freezer", 1)):
            if prefer and prefer != kind:
                continue
            parent = _own_cgroup(version)
            if not parent or not os.access(parent, os.W_OK):
                continue
            path = os.path.join(parent, PREFIX + name)
            try:
                os.mkdir(path)
            except OSError:
                continue
            cg = cls(path, version)
            if cg._usable():
                return cg
            cg.remove()
        return None

    def _usable(self) -> bool:
        need = ("cgroup.procs", "cgroup.freeze") if self.version == 2 else ("cgroup.procs", "freezer.state")
        return all(os.access(os.path.join(self.path, n), os.W_OK) for n in need)

    def _write(self, name: str, value: str) -> bool:
        try:
            fd = os.open(os.path.join(self.path, name), os.O_WRONLY | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            os.write(fd, value.encode())
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    def _read(self, name: str) -> str:
        try:
            with open(os.path.join(self.path, name)) as f:
                return f.read()
        except OSError:
            return ""

    def join(self) -> bool:
        """Move the calling process in (a command's first act, before its exec)."""
        return self._write("cgroup.procs", str(os.getpid()))

    def pids(self) -> list[int]:
        return [int(p) for p in self._read("cgroup.procs").split() if p.isdigit()]

    def exists(self) -> bool:
        return os.path.isdir(self.path)

    def frozen(self) -> bool:
        if self.version == 2:
            return "frozen 1" in self._read("cgroup.events").splitlines()
        return self._read("freezer.state").strip() == "FROZEN"

    def freeze(self, on: bool) -> bool:
        if self.version == 2:
            return self._write("cgroup.freeze", "1" if on else "0")
        return self._write("freezer.state", "FROZEN" if on else "THAWED")

    def kill(self) -> None:
        if self.version == 2 and self._write("cgroup.kill", "1"):
            return
        self.freeze(True)  # v1 (or a kernel before cgroup.kill): nothing forks while it is killed
        _kill(self.pids(), signal.SIGKILL)
        self.freeze(False)

    def remove(self) -> bool:
        try:
            os.rmdir(self.path)
            return True
        except OSError:
            return False


def sweep_cgroups() -> None:
    """Remove empty cgroups that earlier commands left (their supervisor and keeper both died)."""
    for version in (2, 1):
        parent = _own_cgroup(version)
        try:
            names = os.listdir(parent) if parent else []
        except OSError:
            continue
        for n in names:
            if n.startswith(PREFIX):
                cg = Cgroup(os.path.join(parent or "", n), version)
                if not cg.pids():
                    cg.remove()


# ---------------------------------------------------------------------- the tree
class Tree:
    """A command's processes: its cgroup's when it has one, and the descendants of ``root`` (the
    keeper) either way."""

    def __init__(self, root: int, cgroup: Cgroup | None = None) -> None:
        self.root = root
        self.cgroup = cgroup

    @property
    def containment(self) -> str:
        if self.cgroup is None:
            return "tree"
        return "cgroup2" if self.cgroup.version == 2 else "freezer"

    def pids(self) -> list[int]:
        found = dict.fromkeys(self.cgroup.pids() if self.cgroup is not None else [])
        found.update(dict.fromkeys(descendants(self.root)))
        found.pop(self.root, None)
        return [p for p in found if is_alive(p)]

    def alive(self) -> bool:
        return bool(self.pids())

    def stopped_by_others(self) -> list[int]:
        """Processes of the tree in a job-control stop (``T``) we did not make."""
        return [p for p in self.pids() if state(p) == "T"]

    def freeze(self, timeout_s: float = 5.0) -> bool:
        """Stop every process (see the module's docstring); True once nothing of it runs."""
        deadline = time.monotonic() + timeout_s
        if self.cgroup is not None and self.cgroup.freeze(True):
            while not self.cgroup.frozen():
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.002)  # the kernel freezes the tasks as they reach a safe point
            # a process that is not in the cgroup (it moved itself out) but still below the keeper
            inside = set(self.cgroup.pids())
            return self._sigstop([p for p in descendants(self.root) if p not in inside], deadline)
        return self._sigstop(None, deadline)

    def _sigstop(self, only: list[int] | None, deadline: float) -> bool:
        while True:
            pids = self.pids() if only is None else [p for p in only if is_alive(p)]
            running = [p for p in pids if state(p) not in ("T", "t", "Z", "X", None)]
            if not running:
                return True
            _kill(running, signal.SIGSTOP)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)  # a stop is delivered when the process next runs
            if only is not None:
                only = [p for p in only if is_alive(p)]

    def thaw(self) -> None:
        if self.cgroup is not None:
            self.cgroup.freeze(False)
        _kill(self.pids(), signal.SIGCONT)

    def end(self, grace_s: float, *, meanwhile: Callable[[], None] | None = None, every_s: float = 1.0,
            kill_after: float = 10.0) -> bool:
        """``SIGTERM`` (with ``SIGCONT``) to every process, up to ``grace_s`` for them to go, then
        ``SIGKILL`` to what is left, repeated until nothing is left (up to ``kill_after`` more
        seconds: a process in uninterruptible sleep cannot be ended sooner). ``meanwhile`` is
        called every ``every_s`` of the waits. True when nothing is left."""
        if self.cgroup is not None:
            self.cgroup.freeze(False)
        pids = self.pids()
        _kill(pids, signal.SIGTERM)
        _kill(pids, signal.SIGCONT)
        if self._wait_gone(grace_s, meanwhile, every_s):
            return True
        return self.kill(kill_after, meanwhile=meanwhile, every_s=every_s)

    def kill(self, within_s: float = 10.0, *, meanwhile: Callable[[], None] | None = None,
             every_s: float = 1.0) -> bool:
        deadline = time.monotonic() + within_s
        while True:
            if self.cgroup is not None:
                self.cgroup.kill()
            self._sigstop(None, time.monotonic() + 0.2)  # nothing forks between the scan and the kill
            _kill(self.pids(), signal.SIGKILL)
            if self.cgroup is not None and self.cgroup.version == 1:
                self.cgroup.freeze(False)  # a v1-frozen process dies only once thawed
            if self._wait_gone(min(0.5, max(0.0, deadline - time.monotonic())), meanwhile, every_s):
                return True
            if time.monotonic() > deadline:
                return False

    def _wait_gone(self, within_s: float, meanwhile: Callable[[], None] | None, every_s: float) -> bool:
        deadline = time.monotonic() + within_s
        next_call = time.monotonic() + every_s
        while self.alive():
            now = time.monotonic()
            if now >= deadline:
                return False
            if meanwhile is not None and now >= next_call:
                meanwhile()
                next_call = time.monotonic() + every_s
            time.sleep(0.02)  # waiting for processes to exit (they cannot be waited on from here)
        return True

    def close(self) -> None:
        if self.cgroup is not None and not self.cgroup.pids():
            self.cgroup.remove()
