"""The keeper: a small process between ``warden run`` and its command, so the command never
outlives its supervisor unnoticed (docs/agents.md, "warden run").

``warden run`` starts it as a plain script (``python -I keeper.py``: the standard library only,
no store import on the way) in a session of its own, so a terminal's signals and a ``kill`` of
the supervisor's group do not reach it. It

* becomes a child subreaper, so whatever the command starts stays among its descendants even
  after a ``setsid`` or a double fork (store/adapters/proctree.py);
* starts the command (its own session and group, stdin ``/dev/null``, stdout and stderr the
  output pipe, inside the run's cgroup when there is one) and reports ``{"pid", "start"}`` or the
  ``{"errno", "message"}`` of a failed exec on its stdout, then ``{"exit": status}`` when the
  command ends; it reaps every process handed to it;
* reads its stdin, the supervisor's control pipe. When it closes without ``{"bye": true}`` the
  supervisor died (``kill -9``, a crash): the keeper thaws and ends every process of the command
  (``SIGTERM``, then ``SIGKILL`` after the grace), marks the run directory ``interrupted``, and
  fails the node ``transient`` (retryable) with the last claim the supervisor handed it, saying
  what it did. While a process cannot be ended (uninterruptible sleep) it keeps that lease
  alive instead, so the node is not handed to anyone else while the process lives.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: the keeper starts without the store (it loads it later, in a thread)
    from store.facade import Ledger
    from store.jsontypes import JsonObject
    from store.views import Claim

if __package__:
    from store.adapters.proctree import Cgroup, Tree, start_time
else:  # run as a script by warden run (python -I: its own directory is not on the path)
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    from proctree import Cgroup, Tree, start_time  # type: ignore[no-redef,import-not-found]

PR_SET_CHILD_SUBREAPER = 36
PATH = os.path.abspath(__file__)


def _subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _say(msg: JsonObject) -> None:
    try:
        os.write(1, (json.dumps(msg) + "\n").encode())
    except OSError:  # the supervisor is gone: nobody to tell
        pass


def _status(raw: int) -> int:
    return -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)


class Keeper:
    def __init__(self, spec: JsonObject) -> None:
        self.spec = spec
        self.claim: JsonObject | None = None
        self.cmd = 0
        self.code: int | None = None
        cg = spec.get("cgroup")
        self.cgroup = Cgroup(cg["path"], int(cg["version"])) if isinstance(cg, dict) else None
        self.tree = Tree(os.getpid(), self.cgroup)
        self.store: JsonObject = {}  # Ledger, WardenError and Claim once loaded, or error
        self.loaded = threading.Event()

    def start(self) -> bool:
        out = int(self.spec["out_fd"])
        cg = self.cgroup

        def join() -> None:  # in the command's process, before its exec (we have one thread)
            if cg is not None:
                cg.join()

        try:
            proc = subprocess.Popen(self.spec["argv"], cwd=self.spec.get("cwd"), env=self.spec["env"],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                                    close_fds=True, preexec_fn=join if cg is not None else None)
        except OSError as e:
            _say({"errno": e.errno or 0, "message": e.strerror or str(e)})
            return False
        finally:
            os.close(out)
        self.cmd = proc.pid
        proc.returncode = 0  # reaped by waitpid(-1) below, never by the Popen object
        if cg is not None and self.cmd not in cg.pids():  # it could not join: the tree alone holds it
            self.tree.cgroup = None
        _say({"pid": self.cmd, "start": start_time(self.cmd), "containment": self.tree.containment})
        if self.spec.get("ledger"):  # loaded now (a second of CPU) so a death is recorded within the lease
            threading.Thread(target=self._load_store, name="keeper-store", daemon=True).start()
        return True

    def _load_store(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(PATH)))
        if root not in sys.path:
            sys.path.append(root)
        try:
            from store.facade import Ledger
            from store.errors import WardenError
            from store.views import Claim
            self.store.update(Ledger=Ledger, WardenError=WardenError, Claim=Claim)
        except Exception as e:  # noqa: BLE001 - reported when it is needed
            self.store["error"] = f"{type(e).__name__}: {e}"
        finally:
            self.loaded.set()

    def _reap(self) -> None:
        while True:
            try:
                pid, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.cmd and self.code is None:
                self.code = _status(raw)
                _say({"exit": self.code})

    def loop(self, buf: bytes = b"") -> bool:
        """Until the control pipe closes; True when the supervisor said goodbye."""
        while True:
            *lines, buf = buf.split(b"\n")
            for line in lines:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("bye"):
                    return True
                if isinstance(msg.get("claim"), dict):
                    self.claim = msg["claim"]
            chunk = b""
            while not chunk:
                try:
                    ready, _, _ = select.select([0], [], [], 0.2)
                except InterruptedError:
                    ready = []
                self._reap()
                if ready:
                    try:
                        chunk = os.read(0, 65536)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        return False
            buf += chunk

    def orphaned(self) -> None:
        """The supervisor died: end the command, record what was done."""
        ledger, claim = self._open_ledger()
        n = len(self.tree.pids())

        def meanwhile() -> None:
            self._reap()
            self._beat(ledger, claim)

        self._beat(ledger, claim)
        ended = self.tree.end(float(self.spec.get("grace_s", 10.0)), meanwhile=meanwhile, every_s=0.2)
        self._reap()
        why = (f"warden run's supervisor (pid {self.spec.get('supervisor')}) died; its keeper ended "
               f"the command ({n} process{'es' if n != 1 else ''})")
        if not ended:
            why = (f"warden run's supervisor (pid {self.spec.get('supervisor')}) died; "
                   f"{len(self.tree.pids())} of the command's processes could not be ended")
        self._mark_run(why)
        if ledger is None or claim is None:
            return
        try:
            while not ended:  # the node is not handed to anyone else while a process of it lives
                self._beat(ledger, claim)
                time.sleep(max(0.2, claim.lease_s / 3))  # the lease's own rhythm
                self._reap()
                if not self.tree.alive():
                    ended = True
                    why += "; they have ended since"
            ledger.fail(claim, error=why, failure_class="transient", retryable=True)
        except Exception as e:  # noqa: BLE001 - the keeper must end, whatever the ledger does
            print(f"warden run keeper: not recorded in the ledger: {e}", file=sys.stderr)
        finally:
            ledger.close()

    def _open_ledger(self) -> tuple[Ledger | None, Claim | None]:
        c, target = self.claim, self.spec.get("ledger")
        if c is None or not target or not self.loaded.wait(30.0):
            return None, None
        if "error" in self.store:
            print(f"warden run keeper: not recorded in the ledger: {self.store['error']}", file=sys.stderr)
            return None, None
        claim = self.store["Claim"](task_id=c["task_id"], node_key=c["node_key"], kind=c.get("kind", ""),
                                    worker=c["worker"], token=c["token"], attempt=int(c["attempt"]),
                                    lease_until=float(c.get("lease_until", 0)), inputs={},
                                    lease_s=float(c.get("lease_s", 30.0)))
        try:
            return self.store["Ledger"].open(target, application_name="warden-run-keeper"), claim
        except Exception as e:  # noqa: BLE001
            print(f"warden run keeper: not recorded in the ledger: {e}", file=sys.stderr)
            return None, None

    def _beat(self, ledger: Ledger | None, claim: Claim | None) -> None:
        if ledger is None or claim is None:
            return
        try:
            ledger.heartbeat(claim)
        except Exception:  # noqa: BLE001 - a lease already gone: the fail below says so
            pass

    def _mark_run(self, why: str) -> None:
        path = os.path.join(str(self.spec.get("run_dir") or ""), "state.json")
        try:
            with open(path) as f:
                state = json.load(f)
            if state.get("status") != "running":
                return
            state.update(status="interrupted", why=why, exit_code=self.code)
            tmp = path + ".keeper"
            with open(tmp, "w") as f:
                json.dump(state, f, indent=2)
            os.replace(tmp, path)
        except (OSError, ValueError, AttributeError):
            pass

def main() -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    line = b""
    while b"\n" not in line:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            return 1
        line += chunk
    first, rest = line.split(b"\n", 1)
    spec = json.loads(first)
    _subreaper()
    keeper = Keeper(spec)
    signal.signal(signal.SIGTERM, lambda *_: None)  # ended by its control pipe closing, never by a signal
    if not keeper.start():
        return 0
    if not keeper.loop(rest):
        keeper.orphaned()
    else:
        keeper._reap()
        if keeper.tree.alive():  # the supervisor said goodbye with processes left: end them
            keeper.tree.end(float(spec.get("grace_s", 10.0)), meanwhile=keeper._reap, every_s=0.2)
    keeper._reap()
    keeper.tree.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
