"""Whether a process is stopped (a job-control stop, state ``T``) or frozen (its cgroup v2
``frozen 1`` or its v1 freezer ``FROZEN``): ``warden run`` parks either way (store/adapters/proctree.py)."""

from __future__ import annotations

from pathlib import Path


def state_of(pid: int) -> str | None:
    """The process's state letter (R, S, T, Z...), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def gone(pid: int) -> bool:
    return state_of(pid) in (None, "Z", "X")


def _mounts() -> dict[str, str]:
    out = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if len(f) > 4 and r and r[0] == "cgroup2":
            out["2"] = f[4]
        elif len(f) > 4 and r and r[0] == "cgroup" and "freezer" in (r[2] if len(r) > 2 else "").split(","):
            out["freezer"] = f[4]
    return out


def frozen(pid: int) -> bool:
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return False
    mounts = _mounts()
    for line in lines:
        hid, ctl, path = (line.split(":", 2) + ["", ""])[:3]
        if hid == "0" and ctl == "" and "2" in mounts and "warden-run." in path:
            events = Path(mounts["2"] + path, "cgroup.events")
            if events.exists() and "frozen 1" in events.read_text().splitlines():
                return True
        if "freezer" in ctl.split(",") and "freezer" in mounts and "warden-run." in path:
            st = Path(mounts["freezer"] + path, "freezer.state")
            if st.exists() and st.read_text().strip() in ("FROZEN", "FREEZING"):
                return True
    return False


def stopped(pid: int) -> bool:
    """Stopped or frozen: it does not run."""
    return state_of(pid) == "T" or (not gone(pid) and frozen(pid))


def running(pid: int) -> bool:
    return state_of(pid) in ("R", "S", "D") and not frozen(pid)
