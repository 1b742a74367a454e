"""Every PostgreSQL connection Warden opens is named after its role (``application_name``
``warden-<role>``), its LISTEN connections included: each kind of Warden process is started on a
ledger of its own, and every connection its process tree holds to the server — found from the
processes' sockets (/proc), not from names — is looked up in ``pg_stat_activity``.

Table-driven: a new kind of process is one line in :data:`PROCESSES`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

import pytest

from store import Ledger
from tests.support.asks import MCP_PARTS
from tests.support.waiting import Deadline

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.postgres
SETTLE_S = 120.0  # bound on a process reaching the state where it holds every connection it keeps


# ---------------------------------------------------------------------- sockets → ports
def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                children = Path(f"/proc/{p}/task/{task}/children").read_text().split()
                todo += [int(c) for c in children]
        except OSError:
            pass
    return out


def _inodes(pids: list[int]) -> set[str]:
    found = set()
    for p in pids:
        try:
            for fd in os.listdir(f"/proc/{p}/fd"):
                try:
                    target = os.readlink(f"/proc/{p}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    found.add(target[8:-1])
        except OSError:
            pass
    return found


def client_ports(pid: int, server_port: int) -> set[int]:
    """The local ports of the process tree's TCP connections to ``server_port`` (IPv4 and IPv6)."""
    inodes = _inodes(_tree(pid))
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            local, remote, state, inode = cols[1], cols[2], cols[3], cols[9]
            if inode in inodes and state == "01" and int(remote.rsplit(":", 1)[1], 16) == server_port:
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def names_of(admin: Any, ports: set[int]) -> list[tuple[str, str]]:
    """(application_name, last query) of the server's backends for those client ports."""
    if not ports:
        return []
    return [(r[0], r[1]) for r in admin.execute(
        "SELECT application_name, left(query, 60) FROM pg_stat_activity WHERE client_port = ANY(%s) "
        "AND backend_type = 'client backend'", (sorted(ports),)).fetchall()]


# ---------------------------------------------------------------------- the processes
def _popen(args: list[str], **kw: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "console", *args], env={**os.environ, "PYTHONPATH": str(ROOT)},
                            cwd=str(kw.pop("cwd")), **kw)


def watch(url: str, tmp: Path) -> subprocess.Popen[bytes]:
    return _popen(["status", "--watch", "--ledger", url], cwd=tmp, stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL, start_new_session=True)


def follow(url: str, tmp: Path) -> subprocess.Popen[bytes]:
    return _popen(["events", "--follow", "--ledger", url], cwd=tmp, stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL, start_new_session=True)


def lines_console(url: str, tmp: Path) -> subprocess.Popen[bytes]:
    """``warden console`` on a terminal that cannot do full screen: the console's lines."""
    return subprocess.Popen([sys.executable, "-m", "console", "console", "--ledger", url], cwd=str(tmp),
                            env={**os.environ, "PYTHONPATH": str(ROOT), "TERM": "dumb"}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def run(url: str, tmp: Path) -> subprocess.Popen[bytes]:
    return _popen(["run", "--task", "r", "--ledger", url, "--", "sleep", "600"], cwd=tmp,
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def mcp_asking(url: str, tmp: Path) -> subprocess.Popen[bytes]:
    """``warden mcp`` with a question waiting for a person (wait_for_resolution: its LISTEN)."""
    p = _popen(["mcp", "--ledger", url, "--task", "m", "--worker", "w", "--sessions", str(tmp / "s"),
                "--ask-wait", "600"], cwd=tmp, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL, start_new_session=True)
    assert p.stdin is not None
    for i, (method, params) in enumerate([
            ("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
            ("notifications/initialized", None),
            ("tools/call", {"name": "claim_next", "arguments": {}}),
            ("tools/call", {"name": "ask_human", "arguments": {"question": "go?", **MCP_PARTS}})]):
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})}
        if not method.startswith("notifications/"):
            msg["id"] = i
        p.stdin.write(json.dumps(msg).encode() + b"\n")
    p.stdin.flush()
    return p


def hook_permission(url: str, tmp: Path) -> subprocess.Popen[bytes]:
    """``warden hook claude`` waiting for the operator on a PermissionRequest."""
    payload = {"session_id": "s-names", "hook_event_name": "PermissionRequest", "cwd": str(tmp),
               "tool_name": "Bash", "tool_input": {"command": "ls"}}
    p = _popen(["hook", "claude", "--ledger", url, "--sessions", str(tmp / "s"), "--permission-wait", "600"],
               cwd=tmp, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
               start_new_session=True)
    assert p.stdin is not None
    p.stdin.write(json.dumps(payload).encode())
    p.stdin.close()
    return p


def full_console(url: str, tmp: Path) -> Any:
    from tests.support.console_terminal import Terminal

    return Terminal([sys.executable, "-m", "console", "console", "--ledger", url, "--runs", str(tmp)], cwd=tmp)


Start = Callable[[str, Path], Any]
# (the role's name, how the process starts, how many connections it keeps: the reads and the LISTEN;
# a console on a terminal also starts its analysis worker, whose one connection is warden-analysis)
PROCESSES: list[tuple[str, Start, int]] = [
    ("warden-cli", watch, 2),
    ("warden-cli", follow, 2),
    ("warden-console", lines_console, 2),
    ("warden-run", run, 1),
    ("warden-mcp", mcp_asking, 2),
    ("warden-hook", hook_permission, 2),
    ("warden-console", full_console, 3),
]
ALSO = {"warden-console": {"warden-analysis"}}  # a process's children's roles


@pytest.mark.parametrize("role,start,keeps", PROCESSES, ids=[f"{r}-{s.__name__}" for r, s, _ in PROCESSES])
def test_every_connection_a_warden_process_opens_is_named_after_its_role(pg_target, tmp_path, role, start, keeps):
    from tests.conftest import pg_admin

    url = pg_target()
    with Ledger.open(url) as led:  # a ledger of its own: these connections are the only ones on it
        led.create_task("seed")
    server_port = urlparse(url).port or 5432
    proc = start(url, tmp_path)
    popen = getattr(proc, "proc", proc)
    seen: list[tuple[str, str]] = []
    try:
        with pg_admin() as admin:
            deadline = Deadline(SETTLE_S)
            while True:
                assert popen.poll() is None, f"{start.__name__} exited with {popen.returncode}"
                seen = names_of(admin, client_ports(popen.pid, server_port))
                listening = any("LISTEN" in q or q.strip() == "SELECT 1" for _, q in seen)
                if len(seen) >= keeps and (listening or keeps == 1):
                    break
                assert not deadline.expired(), f"{start.__name__} held {seen} after {SETTLE_S:g}s"
                time.sleep(0.2)
            # a little longer: connections opened after the first ones (a worker, a probe) are named too
            later = time.monotonic() + 2.0
            while time.monotonic() < later:
                seen = names_of(admin, client_ports(popen.pid, server_port)) or seen
                assert all(name == role or name in ALSO.get(role, ()) for name, _ in seen), seen
                time.sleep(0.2)
    finally:
        if hasattr(proc, "close"):
            proc.close()
        else:
            try:
                os.killpg(popen.pid, 15)
            except ProcessLookupError:
                pass
            popen.wait(30)
    assert seen and all(name == role or name in ALSO.get(role, ()) for name, _ in seen), seen
    if role == "warden-console":
        assert len(seen) <= 3, seen  # a console holds three connections at most, its worker's included
