"""``warden run -- CMD ...``: supervise any command as one ledger node (docs/agents.md, "warden run").

```python
from store import Ledger
from store.adapters.command import RunSpec, supervise_command

outcome = supervise_command(Ledger.open("ledger.db"), RunSpec(argv=("make", "test"), task_id="nightly"))
```

The node (``--node``, default ``main``, kind ``--kind``, default ``command``) is added to the task
(made with origin ``run`` when it does not exist) and claimed by key; nothing starts unless the
claim is ours, and not before what the node's previous attempt left on this host is ended
(store/adapters/leftovers.py). The command is started by a keeper (store/adapters/keeper.py)
that ends it if we die, in a cgroup of its own where the machine has one (store/adapters/
process.py): "the command" below is every process it started, whatever its session or group.
Its output is passed through to our stdout, logged in the run directory (rundir.py) and sent as
observations each heartbeat (each ``lease_s / 3``: the lines since the previous one, cleaned,
the newest ``OBSERVATION_CAP`` characters). With ``json_stream`` each line is a Claude Code or
Codex event, parsed whole (up to ``STREAM_EVENT_CAP``) before anything is cut (streams.py).

What an operator does reaches the command within a heartbeat, and ``warden run`` says it on
stderr in one line (who, why):

* **park** (task or node, with or without ``--now``) → every process stopped, once none is
  inside a ledger write (store/storage/stopguard.py); the lease is kept while the task park keeps it,
  else the node is taken back by key once resumed; **resume** → continued. An escalation (the
  node blocked on a handoff) stops it the same way until resolved.
* **abort** (or the node abandoned) → ``SIGTERM`` to every process, ``SIGKILL`` after ``grace_s``.
* **rewind** → ended the same way, the node claimed again and the command started afresh with
  ``$WARDEN_REWIND_REASON`` (and a new run directory).

When the command's first process ends, whatever it left running is ended too (its output then
ends), then: exit 0 → ``commit`` (runoutput.py bounds it: ``exit_code``, ``last_lines``,
``artifacts``, ``run``, ``cwd``, ``command``; the artifact itself when there is exactly one
file); otherwise ``fail`` with the class :func:`failure_for` gives. Our own SIGINT/SIGTERM/SIGHUP
end the command the same way and fail the node ``transient`` (retryable); a terminal's ctrl+z
(SIGTSTP) stops the command, then us, between two ledger writes.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import sys
import time
from collections import deque
from dataclasses import dataclass
from queue import Empty
from typing import Callable

from store.errors import LeaseLost, LedgerUnavailable, NotFound, Refused, WardenError
from store.facade import Ledger
from store.jsontypes import JsonMapping, JsonObject
from store.views import Claim
from store.adapters import leftovers
from store.adapters.process import Child
from store.adapters.rundir import Artifacts, RunDir, collect_artifacts, run_name
from store.adapters.runoutput import bounded_output, command_summary, exec_status, failure_for
from store.adapters.steering import Steer, clean, clean_lines, pulse, reclaim, steer
from store.adapters.streams import StreamParser, parser_for

__all__ = ["OBSERVATION_CAP", "RunOutcome", "RunSpec", "Supervisor", "failure_for", "supervise_command"]

OBSERVATION_CAP = 4000  # characters of output lines in one heartbeat's observation
LAST_LINES = 20  # lines kept in the commit's / failure's output
STEPS_PER_BEAT = 20  # action/result pairs sent one by one per loop; more are merged into one beat
TICK_S = 0.25  # the loop wakes at least this often (output, the command's end, a stop request)
FLOOD_LINES = 500  # lines taken at once; past them a heartbeat goes out (at most every FLOOD_BEAT_S)
FLOOD_BEAT_S = 0.2
LINES_KEPT = 2000  # lines held between two heartbeats (the newest; the rest are counted as left out)
STREAM_EVENT_CAP = 1024 * 1024  # bytes of one JSON event read whole before it is parsed
PLAIN_LINE_READ = 16 * 1024  # bytes of one plain output line read (an observation keeps LINE_CAP characters)


@dataclass(frozen=True)
class RunSpec:
    """What to run and as which node."""

    argv: tuple[str, ...]
    task_id: str
    node_key: str = "main"
    kind: str = "command"
    lease_s: float = 30.0
    worker: str = ""
    json_stream: str | None = None
    artifacts: str | None = None
    runs: str = "runs"
    grace_s: float = 10.0
    title: str = ""
    cwd: str | None = None
    echo: bool = True  # pass the command's output through to our stdout


@dataclass(frozen=True)
class RunOutcome:
    """How ``warden run`` ended. ``status``: ``committed``, ``failed`` (the command failed),
    ``aborted``, ``lost`` (the node was taken from us), ``interrupted`` (we were stopped),
    ``refused`` (nothing was started). ``exit_code``: the command's, when it ended on its own."""

    status: str
    detail: str = ""
    exit_code: int | None = None
    run: str | None = None
    attempts: int = 0


class _Stop(Exception):
    def __init__(self, outcome: RunOutcome) -> None:
        self.outcome = outcome


class Supervisor:
    """Runs one :class:`RunSpec` (see the module's docstring). ``stop_requested`` is set from a
    signal handler (the CLI's) to end the command and fail the node."""

    def __init__(self, ledger: Ledger, spec: RunSpec, *, out: Callable[[bytes], None] | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        self.ledger = ledger
        self.spec = spec
        self.worker = spec.worker or f"run:{os.getpid()}"
        self.interval = max(0.05, spec.lease_s / 3.0)
        self.out = out if out is not None else _stdout
        self.say = say if say is not None else _stderr
        self.stop_requested: str | None = None
        self.suspend_requested = False  # a terminal's ctrl+z (SIGTSTP), acted on between ledger writes
        self.claim: Claim | None = None
        self.attempts = 0

    # ------------------------------------------------------------------ the claim
    def _take(self) -> Claim:
        s = self.spec
        title = s.title or shlex.join(s.argv)[:200]
        self.ledger.create_task(s.task_id, title=title, exist_ok=True, actor=self.worker, origin="run")
        try:
            self.ledger.node(s.task_id, s.node_key)
        except NotFound:
            self.ledger.add_node(s.task_id, s.node_key, kind=s.kind, title=title, actor=self.worker)
        claim = self.ledger.claim(s.task_id, self.worker, lease_s=s.lease_s, key=s.node_key)
        if claim is None:
            raise _Stop(RunOutcome("refused", self._why_not()))
        return claim

    def _why_not(self) -> str:
        s = self.spec
        task, node = self.ledger.task(s.task_id), self.ledger.node(s.task_id, s.node_key)
        where = f"{s.task_id}/{s.node_key}"
        if task.status in ("aborted", "parked"):
            return f"task {s.task_id} is {task.status}: nothing started"
        if node.status == "succeeded":
            return f"node {where} already succeeded: rewind it to run it again"
        if node.status == "running":
            return f"node {where} is running under {node.lease_owner}'s lease: nothing started"
        if node.status == "pending" and node.next_retry_at and node.next_retry_at > time.time():
            return f"node {where} failed and may be retried in {node.next_retry_at - time.time():.0f}s: nothing started"
        if node.status == "pending":
            return f"node {where} is waiting on its dependencies or the budget: nothing started"
        return f"node {where} is {node.status}: nothing started"

    # ------------------------------------------------------------------ running
    def run(self) -> RunOutcome:
        try:
            self.claim = self._take()
        except _Stop as stop:
            return stop.outcome
        rewind_reason: str | None = None
        while True:
            self.attempts += 1
            try:
                result = self._attempt(self.claim, rewind_reason)
            except _Stop as stop:
                return RunOutcome(**{**stop.outcome.__dict__, "attempts": self.attempts})
            if isinstance(result, RunOutcome):
                return RunOutcome(**{**result.__dict__, "attempts": self.attempts})
            self.claim, rewind_reason = result

    def _env(self, claim: Claim, rundir: RunDir, rewind_reason: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "WARDEN_REWIND_REASON"}
        env.update(WARDEN_TASK=claim.task_id, WARDEN_NODE=claim.node_key, WARDEN_ATTEMPT=str(claim.attempt),
                   WARDEN_RUN_DIR=os.path.abspath(rundir.path))
        if rewind_reason is not None:
            env["WARDEN_REWIND_REASON"] = rewind_reason
        return env

    def _attempt(self, claim: Claim, rewind_reason: str | None) -> RunOutcome | tuple[Claim, str]:
        s = self.spec
        cwd = os.path.abspath(s.cwd or os.getcwd())
        rundir = RunDir(s.runs, run_name(claim.task_id, claim.node_key, claim.attempt), task_id=claim.task_id,
                        node_key=claim.node_key, attempt=claim.attempt, argv=s.argv, cwd=cwd)

        def sink(data: bytes) -> None:
            rundir.log(data)
            if s.echo:
                self.out(data)

        refused = self._settle_previous(claim)
        if refused is not None:
            rundir.finish("failed", exit_code=None, why=refused)
            self.fail_node(claim, refused, "transient", True)
            return RunOutcome("refused", refused, run=rundir.name)
        self.keep(claim)
        child = Child(s.argv, cwd=cwd, env=self._env(claim, rundir, rewind_reason), sink=sink,
                      line_cap=STREAM_EVENT_CAP if s.json_stream else PLAIN_LINE_READ, grace_s=s.grace_s,
                      run_dir=os.path.abspath(rundir.path), ledger=str(self.ledger.target))
        try:
            child.start()
        except OSError as e:
            code = exec_status(s.argv[0], e)
            why = f"cannot start {clean(s.argv[0], 200)!r}: {e.strerror or e}"
            rundir.finish("failed", exit_code=code, why=why)
            self.fail_node(claim, why, "spec", False)
            return RunOutcome("failed", why, exit_code=code, run=rundir.name)
        child.tell_claim(claim)
        self.keep(claim)
        self.note(claim, f"warden run: pid {child.pid} ({child.containment_used}), run directory {rundir.name}, "
                         f"cwd {cwd}" + (f"; restarted after a rewind: {rewind_reason}" if rewind_reason is not None
                                          else ""),
                  data={leftovers.PROCESS_KEY: {**child.identity(), "host": socket.gethostname()}})
        watch = _Watch(self, child, rundir, parser_for(s.json_stream) if s.json_stream else None)
        try:
            return watch.loop(claim)
        finally:
            child.close()

    def _settle_previous(self, claim: Claim) -> str | None:
        """What the node's previous attempt left on this host ended first (leftovers.settle_previous)."""
        return leftovers.settle_previous(self.ledger, claim, self.spec.grace_s,
                                         note=lambda text: self.note(claim, text), say=self.say)

    def keep(self, claim: Claim) -> None:
        """A heartbeat outside the loop (a start takes some of a short lease); its news waits for
        the loop's next beat."""
        try:
            self.ledger.heartbeat(claim)
        except WardenError:
            pass

    # ------------------------------------------------------------------ ledger writes (lost leases tolerated)
    def note(self, claim: Claim, text: str, *, data: JsonMapping | None = None) -> None:
        try:
            self.ledger.note(claim, text, layer="execution", data=data)
        except WardenError:
            pass

    def by(self, task_id: str, action: str) -> str:
        """`` by OPERATOR`` of the newest applied ``action`` on the task ('' when none is found)."""
        try:
            for a in self.ledger.actions(task_id, limit=20):
                if a.action == action and a.result == "applied":
                    return f" by {clean(a.operator, 80)}"
        except WardenError:
            pass
        return ""

    def fail_node(self, claim: Claim, error: str, failure_class: str, retryable: bool) -> bool:
        try:
            self.ledger.fail(claim, error=error, failure_class=failure_class, retryable=retryable)
            return True
        except LeaseLost as e:
            self.say(f"warden run: the failure was not recorded: {e}")
            return False


class _Watch:
    """One attempt's loop: output → observations, heartbeats → signals, the end → commit/fail."""

    def __init__(self, sup: Supervisor, child: Child, rundir: RunDir, parser: StreamParser | None) -> None:
        self.sup = sup
        self.ledger = sup.ledger
        self.child = child
        self.rundir = rundir
        self.parser = parser
        self.lines: deque[str] = deque(maxlen=LINES_KEPT)  # since the last heartbeat (the newest)
        self.dropped = 0  # lines that fell out of ``lines`` since the last heartbeat
        self.last: deque[str] = deque(maxlen=LAST_LINES)
        self.pairs: list[tuple[str, str]] = []
        self.tokens = 0
        self.units: tuple[float, float] | None = None
        self.cost: float | None = None
        self.final: str | None = None
        self.failed: str | None = None
        self.task_park = False  # stopped by a task park that kept our lease
        self.last_beat = time.monotonic()
        self.output_ended = False
        self.too_big = 0  # JSON events over STREAM_EVENT_CAP (reported, not parsed)
        self.token = ""  # the claim the keeper was last handed

    # ------------------------------------------------------------------ output
    def _take_line(self, raw: bytes) -> None:
        if len(self.lines) == LINES_KEPT:
            self.dropped += 1
        if self.parser is None:
            line = clean(raw)
            self.lines.append(line)
            self.last.append(line)
            return
        if raw.endswith(b" [line cut]") and len(raw) > STREAM_EVENT_CAP:  # an event too big to read whole
            self.too_big += 1
            note = f"[an event of more than {STREAM_EVENT_CAP} bytes was not read: {clean(raw[:200], 200)}]"
            self.lines.append(note)
            self.last.append(note)
            return
        # parsed whole (up to STREAM_EVENT_CAP bytes), cut only once it is read
        for step in self.parser.feed(raw.decode("utf-8", errors="replace")):
            if step.line is not None:
                line = clean(step.line)
                self.lines.append(line)
                self.last.append(line)
            if step.action is not None:
                self.pairs.append((step.action, step.result or ""))
            if step.text is not None:
                self.lines.append(step.text)
            self.tokens += step.tokens
            self.units = step.units or self.units
            self.cost = step.cost_usd if step.cost_usd is not None else self.cost
            self.final = step.final or self.final
            self.failed = step.failed or self.failed

    def _drain(self, wait: float) -> None:
        """Take the output lines that come within ``wait`` seconds (at most ``FLOOD_LINES`` at once:
        a flood is sent in pieces rather than held)."""
        deadline = time.monotonic() + wait
        taken = 0
        try:
            while not self.output_ended and taken < FLOOD_LINES:
                left = deadline - time.monotonic()
                try:
                    raw = self.child.lines.get(timeout=left) if left > 0 else self.child.lines.get_nowait()
                except Empty:
                    return
                if raw is None:
                    self.output_ended = True
                    return
                self._take_line(raw)
                taken += 1
        finally:
            self.dropped += self.child.lines.take_dropped()  # beyond the queue's bound: counted, never queued

    # ------------------------------------------------------------------ heartbeats
    def _beat(self, claim: Claim) -> Claim:
        """Send what was gathered (pairs one by one, then the lines); act on what the ledger says."""
        try:
            pairs, self.pairs = self.pairs, []
            if len(pairs) > STEPS_PER_BEAT:
                merged = pairs[STEPS_PER_BEAT - 1:]
                pairs = pairs[: STEPS_PER_BEAT - 1] + [(
                    "; ".join(a for a, _ in merged)[:OBSERVATION_CAP], "; ".join(r for _, r in merged)[:OBSERVATION_CAP])]
            for action, result in pairs:
                p = pulse(self.ledger, claim, action=action, result=result, tokens=self._spend())
            lines = list(self.lines)
            if self.dropped:
                lines.insert(0, f"[{self.dropped} lines left out]")
            self.lines.clear()
            self.dropped = 0
            units = self.units or (None, None)
            p = pulse(self.ledger, claim, observation=clean_lines(lines, cap=OBSERVATION_CAP) if lines else None,
                      tokens=self._spend(), units_done=units[0], units_total=units[1])
            self.last_beat = time.monotonic()
        except LeaseLost as e:
            return self._steer(claim, steer(self.ledger, claim, lost_why=str(e)))
        except LedgerUnavailable as e:  # the ledger is down: keep working, try again next beat
            self.sup.say(f"warden run: heartbeat not recorded, will retry: {e}")
            return claim
        if p.parked and not self.child.stopped:
            self.child.pause()
            self.task_park = True
            self.sup.say(f"warden run: parked{self.sup.by(claim.task_id, 'park')}{self._park_reason(claim)} "
                         "(the command is stopped; the lease is kept)")
        elif not p.parked and self.task_park:
            self.child.resume()
            self.task_park = False
            self.sup.say(f"warden run: resumed{self.sup.by(claim.task_id, 'resume')} (the command continues)")
        return claim

    def _park_reason(self, claim: Claim) -> str:
        try:
            why = self.ledger.task(claim.task_id).park_reason
        except WardenError:
            return ""
        return f": {clean(why, 300)}" if why else ""

    def _spend(self) -> int:
        t, self.tokens = self.tokens, 0
        return t

    def _steer(self, claim: Claim, st: Steer) -> Claim:
        """The lease is gone: stop, end, restart or wait, as the operator's action says."""
        if st.state == "running":
            return claim
        if st.state in ("parked", "blocked"):
            return self._wait_paused(claim, st)
        if st.state == "aborted":
            self.sup.say(f"warden run: aborted{self.sup.by(claim.task_id, 'abort')}"
                         f"{': ' + clean(st.reason, 300) if st.reason else ''} (ending the command)")
            self._end("interrupted", f"aborted: {st.reason}")
            raise _Stop(RunOutcome("aborted", st.reason or "the task was aborted", run=self.rundir.name))
        if st.state == "rewound":
            self.sup.say(f"warden run: rewound{self.sup.by(claim.task_id, 'rewind')}"
                         f"{': ' + clean(st.reason, 300) if st.reason else ''} (the command starts again)")
            self._end("interrupted", f"rewound: {st.reason}")
            raise _Restart(self._take_back(claim), st.reason)
        again = reclaim(self.ledger, claim, lease_s=self.sup.spec.lease_s) if "expired" in st.reason else None
        if again is not None:  # our lease ran out (a suspended machine) and nobody took the node
            return again
        self._end("interrupted", f"lost: {st.reason}")
        raise _Stop(RunOutcome("lost", st.reason, run=self.rundir.name))

    def _take_back(self, claim: Claim) -> Claim:
        """After a rewind: the node claimed again — at once, or once a park of the task is over."""
        while True:
            again = reclaim(self.ledger, claim, lease_s=self.sup.spec.lease_s)
            if again is not None:
                return again
            now = steer(self.ledger, claim)
            if now.state == "aborted":
                raise _Stop(RunOutcome("aborted", now.reason or "the task was aborted", run=self.rundir.name))
            task = self.ledger.task(claim.task_id)
            if task.status != "parked" and now.state != "parked":
                raise _Stop(RunOutcome("lost", f"rewound, but the node cannot be claimed again: {now.reason}",
                                       run=self.rundir.name))
            why = self.sup.stop_requested
            if why is not None:
                raise _Stop(RunOutcome("interrupted", why, run=self.rundir.name))
            time.sleep(self.sup.interval)  # parked: the restart waits for the resume (no wake-up to wait on)

    def _wait_paused(self, claim: Claim, st: Steer) -> Claim:
        """Parked (lease revoked) or escalated: the group is stopped until the node can run again."""
        self.child.pause()
        what = f"parked{self.sup.by(claim.task_id, 'park')}" if st.state == "parked" else "waiting on a handoff"
        self.sup.say(f"warden run: {what}{': ' + clean(st.reason, 300) if st.reason else ''} (the command is stopped)")
        while True:
            self._check_stop()
            self._suspend_if_asked(claim, resume=False)
            time.sleep(self.sup.interval)  # the ledger has no wake-up for "resumed": look each beat
            self._drain(0)
            now = steer(self.ledger, claim)
            if now.state in ("aborted", "rewound"):
                return self._steer(claim, now)
            if now.state in ("parked", "blocked"):
                continue
            again = reclaim(self.ledger, claim, lease_s=self.sup.spec.lease_s)
            if again is None:
                if now.state == "lost" and "expired" not in now.reason:
                    return self._steer(claim, now)
                continue
            self.child.resume()
            self.child.tell_claim(again)
            self.sup.say(f"warden run: resumed{self.sup.by(claim.task_id, 'resume')} (the command continues)")
            return again

    def _check_stop(self) -> None:
        why = self.sup.stop_requested
        if why is None:
            return
        self._end("interrupted", why)  # parked or blocked: no lease to keep, nothing to fail
        raise _Stop(RunOutcome("interrupted", why, run=self.rundir.name))

    def _end(self, status: str, why: str, *, keep: Claim | None = None) -> None:
        """End the command's group; with ``keep``, heartbeat that claim meanwhile (the grace may
        be longer than the lease)."""
        def beat() -> None:
            try:
                if keep is not None:
                    self.ledger.heartbeat(keep)
            except WardenError:
                pass

        self.child.end(self.sup.spec.grace_s, meanwhile=beat if keep is not None else None,
                       every_s=self.sup.interval)
        self.child.output_done(1.0)
        self.rundir.finish(status, exit_code=None, why=why)

    # ------------------------------------------------------------------ the loop
    def loop(self, claim: Claim) -> RunOutcome | tuple[Claim, str]:
        next_beat = time.monotonic() + self.sup.interval
        try:
            while True:
                self.sup.claim = claim
                if claim.token != self.token:
                    self.child.tell_claim(claim)
                    self.token = claim.token
                if self.sup.stop_requested is not None:
                    claim = self._interrupted(claim)
                claim = self._suspend_if_asked(claim, resume=True)
                self._drain(min(TICK_S, max(0.0, next_beat - time.monotonic())))
                if self.child.poll() is not None:
                    break
                now = time.monotonic()
                flood = len(self.lines) >= FLOOD_LINES and now - self.last_beat >= FLOOD_BEAT_S
                if now >= next_beat or self.pairs or flood:
                    claim = self._beat(claim)
                    next_beat = time.monotonic() + self.sup.interval
            code = self.child.poll()
            assert code is not None
            self.child.reap_group(self.sup.spec.grace_s)
            complete = self.child.output_done(5.0)  # a process outside the group may hold the pipe
            while not self.output_ended:
                before = len(self.lines) + self.dropped
                self._drain(0)
                if len(self.lines) >= FLOOD_LINES or self.pairs:
                    claim = self._beat(claim)
                if not complete and len(self.lines) + self.dropped == before:
                    break  # nothing more is coming now: what was printed so far is what counts
        except _Restart as r:
            return (r.claim, r.reason)
        return self._finish(claim, code)

    def _suspend_if_asked(self, claim: Claim, *, resume: bool) -> Claim:
        """A terminal's ctrl+z: the command stopped (between its ledger writes), then ourselves;
        once continued (``fg``), the lease is checked before the command goes on."""
        if not self.sup.suspend_requested:
            return claim
        self.sup.suspend_requested = False
        was_stopped = self.child.stopped
        if not was_stopped:
            self.child.pause()
        self.sup.say("warden run: suspended (ctrl+z): the command is stopped; `fg` continues it")
        os.kill(os.getpid(), signal.SIGSTOP)
        self.sup.say("warden run: continued")
        if not resume or was_stopped:
            return claim
        try:
            p = self.ledger.heartbeat(claim)
        except LeaseLost as e:
            claim = self._steer(claim, steer(self.ledger, claim, lost_why=str(e)))
            if self.child.stopped:
                self.child.resume()
            return claim
        except LedgerUnavailable:
            p = None
        if p is None or not p.parked:
            self.child.resume()
        else:
            self.task_park = True
        return claim

    def _interrupted(self, claim: Claim) -> Claim:
        why = self.sup.stop_requested or "stopped"
        self._end("interrupted", why, keep=claim)
        self.sup.fail_node(claim, f"warden run was stopped ({why}); the command was ended", "transient", True)
        raise _Stop(RunOutcome("interrupted", why, run=self.rundir.name))

    def _finish(self, claim: Claim, code: int) -> RunOutcome:
        s = self.sup.spec
        try:
            claim = self._beat(claim)  # the last lines, and a park or abort that came meanwhile
        except _Restart as r:  # rewound just as it ended: the attempt stands rewound
            raise _Stop(RunOutcome("lost", f"rewound as the command ended ({r.reason}); run it again",
                                   run=self.rundir.name)) from None
        output: JsonObject = {"exit_code": code, "last_lines": list(self.last), "run": self.rundir.name,
                              "cwd": self.rundir.state["cwd"], "command": command_summary(s.argv)}
        if self.too_big:
            output["events_not_read"] = self.too_big
        if self.final is not None:
            output["final"] = self.final
        if self.cost is not None:
            output["cost_usd"] = self.cost
        if code != 0:
            cls, retryable = failure_for(code)
            why = f"exit {code}" if code >= 0 else f"killed by signal {-code}"
            if self.failed:
                why += f": {self.failed}"
            self.rundir.finish("failed", exit_code=code, why=why)
            ok = self.sup.fail_node(claim, f"{why}; last lines: " + " | ".join(list(self.last)[-5:]), cls, retryable)
            return RunOutcome("failed" if ok else "lost", why, exit_code=code, run=self.rundir.name)
        arts = collect_artifacts(os.path.join(self.rundir.state["cwd"], s.artifacts)) if s.artifacts else Artifacts()
        output["artifacts"] = arts.listing()
        if arts.problems:
            output["artifact_problems"] = arts.problems[:20]
        ref = self.rundir.finish("completed", exit_code=0, why=None, artifacts=arts)
        single = next(iter(arts.files.items())) if len(arts.files) == 1 else None
        output = bounded_output(output)
        try:
            self.ledger.commit(claim, output=output, output_ref=ref or f"run:{self.rundir.name}",
                               artifact=(single[0], single[1]) if single else None, tokens=self._spend())
        except (LeaseLost, Refused) as e:
            return RunOutcome("lost", f"the command succeeded but the commit was refused: {e}", exit_code=0,
                              run=self.rundir.name)
        return RunOutcome("committed", "", exit_code=0, run=self.rundir.name)


class _Restart(Exception):
    def __init__(self, claim: Claim, reason: str) -> None:
        self.claim = claim
        self.reason = reason


def _stdout(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def supervise_command(ledger: Ledger, spec: RunSpec) -> RunOutcome:
    """Run ``spec`` to its end under the ledger (see the module's docstring)."""
    return Supervisor(ledger, spec).run()
