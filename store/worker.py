"""Agent-side helpers: a lease keeper (heartbeats from a thread) and a one-step loop.

```python
from store import Ledger
from store.worker import work_once, StepResult

def draft(inputs, step):
    step.progress(units_done=1, units_total=3, observation="outline written")
    return StepResult(output={"text": "..."}, tokens=900)

ledger = Ledger.open("ledger.db")
while work_once(ledger, "report-001", worker="alice", step=draft) is not None:
    pass
```

The step runs on a *copy* of the claim's inputs, so it cannot alter what the ledger handed out.
A step whose lease was lost (a heartbeat raised ``LeaseLost``, or it ran past ``max_step_s``)
is never committed: its result is dropped and the outcome says why.

The step time limit: ``max_step_s`` (default :data:`DEFAULT_MAX_STEP_S`, 120 s) is
independent of the lease. ``work_once`` passes it to ``claim(max_step_s=)``, so the *ledger*
records the step's deadline: heartbeats never extend the lease past it and every write after it
(heartbeat, commit, fail...) raises ``LeaseLost`` naming the limit — a step that heartbeats by
hand cannot outlive it. The :class:`LeaseKeeper` also stops renewing at its own limit, and over a
claim made without one its heartbeats give the ledger that limit (``heartbeat(max_step_s=)``).
``max_step_s=None`` turns the limit off.

Connections: the ledger itself re-connects after a PostgreSQL restart or failover (within
``Ledger.open(reconnect_s=...)``) and never doubles a write whose answer was lost, so a
``work_once`` loop simply carries on. A heartbeat that still fails with ``LedgerUnavailable`` is
tried again on the keeper's next beat (its tokens and progress kept for it); ``work_once`` lets a
``LedgerUnavailable`` from ``claim``/``commit``/``fail`` through to the agent (the step's lease
then expires and its node is reclaimed).
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence, TypedDict

from store import validate
from store.errors import InvalidValue, LeaseLost, WardenError
from store.facade import Ledger
from store.jsontypes import JsonObject
from store.views import Claim, NodeSpec, Pulse

DEFAULT_MAX_STEP_S = 120.0  # a step's own time limit, independent of its lease


class _Progress(TypedDict, total=False):
    """Progress reported to a :class:`LeaseKeeper`, sent with its next heartbeat."""

    units_done: float
    units_total: float
    observation: str
    action: str
    result: str


@dataclass(frozen=True)
class StepResult:
    """What a step returns to be committed."""

    output: object = None  # a JSON value (the ledger's rule checks it)
    output_ref: str | None = None
    artifact: tuple[str, bytes] | None = None
    tokens: int = 0
    next_nodes: Sequence[NodeSpec] = ()
    repair: bool = False
    repair_from: Sequence[str] = ()


class StepFailed(Exception):
    """Raise from a step to fail it with a failure class (default: transient, retryable)."""

    def __init__(self, error: str, failure_class: str = "transient", retryable: bool | None = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(error)
        self.failure_class = failure_class
        self.retryable = retryable
        self.retry_after_s = retry_after_s


@dataclass
class Outcome:
    """How one ``work_once`` ended: committed, repair (a failing check committed with
    ``repair=True``: the work went back), failed, lost (lease gone: nothing committed)."""

    claim: Claim
    status: str  # committed | repair | failed | lost | handoff
    detail: str = ""
    result: object = None  # what the step returned (a StepResult, or the output it stands for)


class LeaseKeeper:
    """Heartbeats a claim about every ``lease_s / 3`` from a background thread.

    Progress reported with :meth:`progress` rides on the next heartbeat (or is sent at once with
    ``now=True``). After ``max_step_s`` (default 120 s; None: no limit of its own) the keeper stops
    extending the lease and marks the step lost: a step that runs away must not keep its node
    forever. The ledger enforces it too — the claim recorded it (``claim(max_step_s=)``, as
    ``work_once`` does) or the keeper's heartbeats tell it (``heartbeat(max_step_s=)``) — so even a
    heartbeat sent by hand past the limit raises ``LeaseLost``.
    ``lost`` is set on the first ``LeaseLost`` (and when the ledger stops the node for its cost
    density, ``Pulse.density == "abort"``); after that the step must not commit.
    """

    def __init__(self, ledger: Ledger, claim: Claim, *, interval_s: float | None = None,
                 max_step_s: float | None = DEFAULT_MAX_STEP_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ledger = ledger
        self.claim = claim
        self.interval_s = interval_s if interval_s is not None else max(0.05, claim.lease_s / 3.0)
        self.max_step_s = max_step_s
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self._pending = _Progress()
        self._tokens = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: str | None = None
        # whether the ledger already holds the keeper's limit (the claim's own deadline, or a heartbeat told it)
        self.limited = max_step_s is None or claim.step_deadline is not None
        self.last_pulse: Pulse | None = None
        self.last_error: str | None = None  # the last transient failure of a heartbeat (retried)

    # the thread -------------------------------------------------------------
    def start(self) -> "LeaseKeeper":
        self._thread = threading.Thread(target=self._run, name=f"lease-{self.claim.node_key}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self) -> "LeaseKeeper":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self.beat():
                return

    # one heartbeat --------------------------------------------------------------
    def beat(self) -> bool:
        """Send one heartbeat now with what progress has been reported. False once lost."""
        if self.lost:
            return False
        if self.max_step_s is not None and self._clock() - self._started > self.max_step_s:
            self.lost = f"step ran past its maximum of {self.max_step_s:.0f}s; the lease is left to expire"
            return False
        with self._lock:
            pending, self._pending = self._pending, _Progress()
            tokens, self._tokens = self._tokens, 0
        # Until the ledger holds the keeper's limit (claim(max_step_s=) did, or an earlier beat told it),
        # each heartbeat carries it: a step heartbeating by hand past it is then refused by the ledger too.
        limit = None if self.limited else self.max_step_s
        try:
            self.last_pulse = self.ledger.heartbeat(self.claim, tokens=tokens, max_step_s=limit, **pending)
            self.limited = True
        except LeaseLost as e:
            self.lost = str(e)
            return False
        except InvalidValue as e:  # a value refused now is refused next time too: drop it, keep the lease
            self.last_error = str(e)
            return self.beat() if pending or tokens else True
        except WardenError as e:  # a transient database problem: retry on the next beat
            with self._lock:
                self._tokens += tokens
                pending.update(self._pending)  # what was reported since is newer
                self._pending = pending
            self.last_error = str(e)
        else:
            if self.last_pulse.density == "abort":
                self.lost = (f"lease lost on {self.claim.task_id}/{self.claim.node_key}: the ledger stopped the node "
                             "for its cost density (over 3x its limit): drop the step")
                return False
        return True

    def progress(self, *, units_done: float | None = None, units_total: float | None = None, tokens: int = 0,
                 observation: str | None = None, action: str | None = None, result: str | None = None,
                 now: bool = False) -> bool:
        """Report progress; it is sent with the next heartbeat (or at once with ``now``).

        Observations — and what a step did and learned (``action``, ``result``) — are sent at once
        (each is one data point of the new-information measure). Returns False when the lease is
        lost: stop working on this step.
        """
        with self._lock:
            if units_done is not None:
                self._pending["units_done"] = units_done
            if units_total is not None:
                self._pending["units_total"] = units_total
            if observation is not None:
                self._pending["observation"] = observation
            if action is not None:
                self._pending["action"] = action
            if result is not None:
                self._pending["result"] = result
            self._tokens += int(validate.number("tokens", tokens, "progress", hi=validate.TOKENS_MAX) or 0)
        if now or observation is not None or action is not None or result is not None:
            return self.beat()
        return not self.lost

    @property
    def parked(self) -> bool:
        return bool(self.last_pulse and self.last_pulse.parked)


def work_once(
    ledger: Ledger,
    task_id: str | None,
    worker: str,
    step: Callable[[JsonObject, LeaseKeeper], object],
    *,
    lease_s: float = 30.0,
    max_step_s: float | None = DEFAULT_MAX_STEP_S,
    kinds: Sequence[str] | None = None,
    background: bool = True,
    workflow_version: str | None = None,
) -> Outcome | None:
    """Claim one ready node, run ``step(inputs_copy, keeper)``, commit its result.

    Returns None when nothing was claimable. The step may return a :class:`StepResult` (or any
    JSON value, taken as the output) and may raise :class:`StepFailed`. With ``background`` the
    keeper heartbeats from a thread; without it only the step's own ``keeper.progress(...,
    now=True)`` calls heartbeat (deterministic tests). ``max_step_s``: the step's time limit,
    enforced by the ledger (``claim(max_step_s=)``) and the keeper; ``workflow_version``: the
    version of the workflow this worker knows — a task of another version is not claimed (one that
    names none only takes tasks created without one).
    """
    claim = ledger.claim(task_id, worker, lease_s=lease_s, kinds=kinds, workflow_version=workflow_version,
                         max_step_s=max_step_s)
    if claim is None:
        return None
    keeper = LeaseKeeper(ledger, claim, max_step_s=max_step_s)
    if background:
        keeper.start()
    try:
        result = step(copy.deepcopy(dict(claim.inputs)), keeper)
    except StepFailed as e:
        keeper.stop()
        if keeper.lost:
            return Outcome(claim, "lost", keeper.lost)
        try:
            ledger.fail(claim, error=str(e), failure_class=e.failure_class, retryable=e.retryable,
                        retry_after_s=e.retry_after_s)
        except LeaseLost as lost:
            return Outcome(claim, "lost", str(lost))
        return Outcome(claim, "failed", str(e))
    except Exception as e:
        keeper.stop()
        if keeper.lost:
            return Outcome(claim, "lost", keeper.lost)
        try:
            ledger.fail(claim, error=f"{type(e).__name__}: {e}", failure_class="transient")
        except LeaseLost as lost:
            return Outcome(claim, "lost", str(lost))
        return Outcome(claim, "failed", f"{type(e).__name__}: {e}")
    keeper.stop()
    if keeper.lost:  # a step whose heartbeat failed must not commit
        return Outcome(claim, "lost", keeper.lost, result)
    if not isinstance(result, StepResult):
        result = StepResult(output=result)
    try:
        ledger.commit(claim, output=result.output, output_ref=result.output_ref, artifact=result.artifact,
                      tokens=result.tokens, next_nodes=result.next_nodes, repair=result.repair,
                      repair_from=result.repair_from)
    except LeaseLost as e:
        return Outcome(claim, "lost", str(e), result)
    if result.repair:
        node = ledger.node(claim.task_id, claim.node_key)
        if node.status == "failed":  # the repair budget was spent: the node and the task failed
            return Outcome(claim, "failed", node.error or "repair budget exhausted", result)
        return Outcome(claim, "repair", "", result)
    return Outcome(claim, "committed", "", result)


__all__ = ["DEFAULT_MAX_STEP_S", "LeaseKeeper", "Outcome", "StepFailed", "StepResult", "work_once"]
