"""Run a LangGraph graph under the ledger: every node a claimed, heartbeated, committed ledger node.

```python
from store.adapters.langgraph import supervise

s = supervise(compiled_graph, ledger, task_id="report-7", worker="host-1")
r = s.run({"topic": "pilot"})        # returns when the graph completes, fails or blocks
if r.status == "blocked" and r.handoff_id:
    ledger.wait_for_resolution(r.handoff_id)   # or come back later, from any process
    r = s.run(None)                  # resumes: interrupt() returns the resolution
```

How a run goes. The graph (compiled with a checkpointer; ``thread_id`` = the task id unless
given) is driven one superstep at a time (``interrupt_before="*"``): before a superstep, each
node LangGraph is about to run is added to the task (kind ``langgraph``, on first sight; its
dependencies are the nodes of the superstep before that have committed) and claimed by key
(``claim(task, worker=..., key=node)``); a :class:`~store.worker.LeaseKeeper` heartbeats it while
it runs. After the superstep each node that ran is:

* **committed** with its state update as output (JSON, its digest stored) when the graph can no
  longer come back to it (it is not reachable from what runs next);
* **held** — still running under its lease, its update sent as a heartbeat's *result* (the node
  as its *action*) — while it can
  (a loop): each iteration is one observation of the same ledger node, so a loop that goes round
  without new information raises ``repeating`` / ``no_new_info`` in ``store.reading.signals``. It is
  committed with its last update once the graph has left the loop.

Reachability comes from the graph's edges; a conditional edge without a ``path_map`` (or a
``Literal`` return annotation) may go anywhere, so its nodes are held until the graph ends.

* An exception in a node → ``fail`` with a class: :class:`store.worker.StepFailed` says it, else
  ``classify(exc) -> (failure_class, retryable)`` (default ``("transient", None)``: the node's
  own ``retryable``). ``r.status == "failed"``; a retryable node is retried by the next
  ``run(None)`` once its back-off has passed (``r.retry_at``).
* ``interrupt({"question", "options": [{"id", "label", "consequence"}], "recommendation",
  "kind"?, "context"?})`` → ``request_human`` (a needs_human handoff; the node blocked, its lease
  released) and ``r.status == "blocked"`` with ``r.handoff_id``. Once it is resolved (console,
  ``warden resolve``, ``plan_resolve`` + ``apply``), ``run(None)`` claims the node again and
  resumes the graph with ``Command(resume=resolution)``: ``interrupt()`` returns the resolution
  dict (``option``, ``answer``, ``by``, ``at``...).
* **The ledger is the truth.** At the start of every ``run`` the graph is re-synchronised: a node
  that LangGraph has run but the ledger has reset (an operator's rewind or narrow, a lease revoked
  by ``park --now``) is run again from the checkpoint before it (the newest ancestor checkpoint
  whose next step is that node; the earliest of them when several were reset).
* A parked task (or a heartbeat saying so) stops the run after the current superstep:
  ``blocked`` with ``reason="parked"``; while it stays parked every ``run`` returns that at once,
  before anything runs (not one more pass of a loop). An aborted task: ``failed`` with
  ``reason="aborted"``.
* A rerun after a rewind starts from a state holding the operators' reasons under
  :data:`REJECTIONS_KEY` (``{node: [reason, ...]}``) when the graph's state declares that key. A
  rerun of a node that called ``interrupt()`` asks again (a new handoff): the rewind's preview
  says so and does not promise the old answer.
* :meth:`Supervisor.wait` blocks, without polling, until an operator changes the task after the
  last ``run`` (resume, rewind, abort…): the loop of a long-running driver.

Options (``supervise(graph, ledger, task_id=, worker=, **options)``): ``thread_id`` (default the
task id), ``lease_s`` (60), ``max_step_s`` (None: the time limit of one claim, held by the ledger),
``classify``, ``title``, ``background`` (True: lease keepers on threads), ``workflow_version``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Generic, Mapping, TypedDict, TypeVar, Unpack, cast

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, Interrupt, StateSnapshot

from store.clock import iso
from store.errors import LeaseLost, NotFound, Refused
from store.facade import Ledger
from store.ledger.checkpoint import PARTS
from store.jsontypes import JsonMapping, JsonObject, JsonValue
from store.ledger import waits
from store.adapters import graphshape as shape
from store.views import Claim, NodeView
from store.worker import LeaseKeeper, StepFailed

__all__ = ["REJECTIONS_KEY", "RunResult", "Supervisor", "supervise"]

_S = TypeVar("_S")  # the graph's state (its input), LangGraph's own type
STEPS_PER_RUN = 10_000  # supersteps one run() drives at most (a runaway guard, not a budget)
SPECIAL = ("__start__", "__end__")
# The state key a rerun after a rewind finds the operators' reasons under, ``{node: [reason, ...]}``
# (declare it in the graph's state to receive them: ``warden_rejections: dict``).
REJECTIONS_KEY = "warden_rejections"


@dataclass(frozen=True)
class RunResult:
    """How a :meth:`Supervisor.run` ended.

    ``status``: ``completed`` (``output``: the graph's final state), ``failed`` (``node``,
    ``error``, ``failure_class``, ``retryable``, ``retry_at``; ``reason`` ``"error"``,
    ``"retry_wait"``, ``"aborted"``, ``"abandoned"``) or ``blocked`` (``reason`` ``"handoff"``
    with ``handoff_id``/``question``, ``"parked"``, ``"budget"``, ``"busy"``: another worker
    holds the node)."""

    status: str
    reason: str = ""
    output: object = None  # the graph's final state (LangGraph's values: the graph's own types)
    node: str | None = None
    handoff_id: str | None = None
    question: str | None = None
    error: str | None = None
    failure_class: str | None = None
    retryable: bool | None = None
    retry_at: str | None = None
    steps: int = 0
    revision: int | None = None  # the task's revision as the run ended (Supervisor.wait waits past it)


@dataclass
class _Held:
    """A node this supervisor has claimed: its lease (kept by ``keeper`` while ``run`` runs) and,
    once it has run, its latest update."""

    claim: Claim
    keeper: LeaseKeeper | None = None
    output: JsonValue = None
    ran: bool = False


@dataclass
class _Stop(Exception):
    result: RunResult


def _default_classify(exc: BaseException) -> tuple[str, bool | None]:
    return "transient", None


class Options(TypedDict, total=False):
    """``supervise``'s options (:class:`Supervisor`'s keyword arguments)."""

    thread_id: str | None
    lease_s: float
    max_step_s: float | None
    classify: Callable[[BaseException], tuple[str, bool | None]]
    title: str
    background: bool
    workflow_version: str | None


def supervise(graph: shape.Graph[_S], ledger: Ledger, *, task_id: str, worker: str,
              **options: Unpack[Options]) -> "Supervisor[_S]":
    """A :class:`Supervisor` of ``graph`` (compiled, with a checkpointer) as task ``task_id``."""
    return Supervisor(graph, ledger, task_id=task_id, worker=worker, **options)


class Supervisor(Generic[_S]):
    """Drives one LangGraph thread as one ledger task (see the module docstring)."""

    def __init__(self, graph: shape.Graph[_S], ledger: Ledger, *, task_id: str, worker: str, thread_id: str | None = None,
                 lease_s: float = 60.0, max_step_s: float | None = None,
                 classify: Callable[[BaseException], tuple[str, bool | None]] = _default_classify,
                 title: str = "", background: bool = True, workflow_version: str | None = None) -> None:
        if getattr(graph, "checkpointer", None) is None:
            raise Refused("supervise() needs a graph compiled with a checkpointer "
                          "(graph.compile(checkpointer=...)): resuming and rewinding live in its checkpoints")
        self.graph = graph
        self.ledger = ledger
        self.task_id = task_id
        self.worker = worker
        self.lease_s = float(lease_s)
        self.max_step_s = max_step_s
        self.classify = classify
        self.background = background
        self.workflow_version = workflow_version
        self.revision: int | None = None  # the task's revision when the last run() returned
        self.config: RunnableConfig = {"configurable": {"thread_id": thread_id or task_id}}
        self.held: dict[str, _Held] = {}
        self._succ = shape.successors(graph)
        ledger.create_task(task_id, title=title or task_id, workflow="langgraph", workflow_version=workflow_version or "",
                           exist_ok=True, actor=worker, origin="langgraph")

    def wait(self, timeout: float | None = None, *, since: int | None = None) -> bool:
        """Block until the task changes after the last :meth:`run` returned (or after revision
        ``since``) — an operator's resume after ``blocked``/``parked``, a rewind or narrow (also
        after ``completed``), an abort, a resolved handoff: every operator action moves the task's
        revision — then return True (call :meth:`run` again); False when ``timeout`` seconds pass
        first. A change made between ``run`` returning and ``wait`` being called is not missed.
        Sleeps on the ledger's change notifications (LISTEN/NOTIFY, the SQLite file's), never a
        busy loop. For an open handoff ``ledger.wait_for_resolution(r.handoff_id)`` says more."""
        seen = since if since is not None else self.revision
        if seen is None:
            seen = self.ledger.task(self.task_id).revision
        return waits.wait_until(self.ledger, lambda: self.ledger.task(self.task_id).revision != seen or None,
                                timeout) is not None

    # ------------------------------------------------------------------ running
    def run(self, input: _S | None = None) -> RunResult:  # noqa: A002 - LangGraph's own word
        """Start the graph with ``input`` (None: resume where it stands) and drive it until it
        completes, fails or blocks. ``RunResult.revision`` is the task's revision as the run
        ended: :meth:`wait` waits for the next operator change after it."""
        result = self._drive(input)
        self.revision = self.ledger.task(self.task_id).revision
        return replace(result, revision=self.revision)

    def _drive(self, input: _S | None) -> RunResult:  # noqa: A002
        steps = 0
        try:
            cfg = self._sync()
            if input is not None:
                self._stream(input, self.config)
                cfg = self.config
            self._hold_all()
            while steps < STEPS_PER_RUN:
                snap = self.graph.get_state(cfg)
                if not snap.next:
                    return self._complete(snap, steps)
                resume = self._claim_next(snap)
                try:
                    updates = self._stream(Command(resume=resume) if resume is not None else None, cfg)
                except Exception as exc:  # a node raised
                    return self._failed(exc, steps)
                steps += 1
                cfg = self.config
                self._after_step(updates)
            raise _Stop(RunResult("blocked", reason="steps", steps=steps))
        except _Stop as stop:
            return RunResult(**{**stop.result.__dict__, "steps": steps})
        finally:
            for h in self.held.values():  # a loop node still held keeps its lease until it expires
                if h.keeper is not None:
                    h.keeper.stop()
                    h.keeper = None

    def _hold_all(self) -> None:
        """(Re)start the lease keepers of the nodes this supervisor still holds."""
        for name, h in list(self.held.items()):
            if h.keeper is None:
                h.keeper = self._keeper(h.claim)

    def _stream(self, value: _S | Command[str] | None, cfg: RunnableConfig) -> list[JsonObject]:
        return list(self.graph.stream(value, cfg, stream_mode="updates", interrupt_before="*"))

    # ------------------------------------------------------------------ before a superstep
    def _claim_next(self, snap: StateSnapshot) -> JsonValue:
        """Claim every node about to run; returns the resume value for resolved interrupts (one
        value, or ``{interrupt_id: value}`` when several nodes resume at once), else None."""
        resumes: JsonObject = {}
        pending = {t.name: t.interrupts for t in snap.tasks if t.interrupts}
        for name in snap.next:
            if name in SPECIAL:
                continue
            self._ensure_node(name, snap)
            held = self.held.get(name)
            if held is not None:
                if held.keeper is not None and held.keeper.lost:
                    self._lost(name)
                continue
            claim = self.ledger.claim(self.task_id, self.worker, lease_s=self.lease_s, key=name,
                                      workflow_version=self.workflow_version, max_step_s=self.max_step_s)
            if claim is None:
                raise _Stop(self._why_not(name))
            self.held[name] = _Held(claim, self._keeper(claim))
            res = claim.inputs.get("resolution")
            if name in pending and res:
                asked = self.ledger.handoff(res["handoff"]).context.get("interrupt_id")
                if asked in {i.id for i in pending[name]}:
                    resumes[str(asked)] = res
        if not resumes:
            return None
        return next(iter(resumes.values())) if len(resumes) == 1 else resumes

    def _keeper(self, claim: Claim) -> LeaseKeeper:
        k = LeaseKeeper(self.ledger, claim, max_step_s=self.max_step_s)
        return k.start() if self.background else k

    def _ensure_node(self, name: str, snap: StateSnapshot) -> None:
        try:
            self.ledger.node(self.task_id, name)
            return
        except NotFound:
            pass
        before = self._ran_before(snap)
        # Its dependencies: the nodes whose writes it reads, committed or held by this supervisor
        # (a loop's nodes; a key claim counts a dependency under the claimer's own lease as met),
        # so an operator's rewind resets everything that came after, as LangGraph re-runs it.
        deps = [k for k in before if k != name and (k in self.held or self._status(k) == "succeeded")]
        self.ledger.add_node(self.task_id, name, kind="langgraph", title=name, deps=deps, actor=self.worker)

    def _ran_before(self, snap: StateSnapshot) -> list[str]:
        """The nodes whose writes produced this snapshot (the superstep before it)."""
        parent = snap.parent_config
        if not parent:
            return []
        prev = self.graph.get_state(parent)
        return [n for n in prev.next if n not in SPECIAL]

    def _status(self, key: str) -> str | None:
        try:
            return self.ledger.node(self.task_id, key).status
        except NotFound:
            return None

    def _why_not(self, name: str) -> RunResult:
        task = self.ledger.task(self.task_id)
        node = self.ledger.node(self.task_id, name)
        if task.status == "aborted":
            return RunResult("failed", reason="aborted", node=name, error="the task was aborted by an operator")
        if task.status == "parked" or node.status == "parked":
            return RunResult("blocked", reason="parked", node=name)
        if node.status == "blocked":
            open_ = [h for h in self.ledger.handoffs(status="open", task_id=self.task_id) if h.node == name]
            h = open_[-1] if open_ else None
            return RunResult("blocked", reason="handoff", node=name, handoff_id=h.id if h else None,
                             question=h.question if h else None)
        if node.status == "pending" and node.next_retry_at is not None and node.next_retry_at > self.ledger.now():
            return RunResult("failed", reason="retry_wait", node=name, error=node.error,
                             failure_class=node.failure_class, retryable=True, retry_at=iso(node.next_retry_at))
        if node.status == "failed":
            return RunResult("failed", reason="error", node=name, error=node.error,
                             failure_class=node.failure_class, retryable=False)
        if node.status == "abandoned":
            return RunResult("failed", reason="abandoned", node=name,
                             error=f"node {name} was abandoned by an operator (out of scope)")
        if node.status == "running":
            return RunResult("blocked", reason="busy", node=name, error=f"held by {node.lease_owner}")
        if self.ledger.admit(self.task_id, name) == "deny_hard":
            return RunResult("blocked", reason="budget", node=name)
        return RunResult("blocked", reason="not_ready", node=name, error=f"node {name} is {node.status}")

    # ------------------------------------------------------------------ after a superstep
    def _after_step(self, updates: list[JsonObject]) -> None:
        snap = self.graph.get_state(self.config)
        ran: JsonObject = {}
        for u in updates:
            for name, update in u.items():
                if name not in SPECIAL and name != "__interrupt__" and name in self.held:
                    ran[name] = update
        ahead = shape.reachable(self._succ, [n for n in snap.next if n not in SPECIAL])
        parked = False
        for name, update in ran.items():
            h = self.held[name]
            h.output, h.ran = shape.jsonable(update), True
            if name in ahead and h.keeper is not None:  # a loop may come back: one more observation
                # what the iteration did (the node) and what it learned (its update): the same
                # update again is the same result, whatever the iteration number
                h.keeper.progress(action=f"{name}()", result=shape.observation(update), now=True)
            if h.keeper is not None and h.keeper.lost:
                self._lost(name)
            parked = parked or (h.keeper is not None and h.keeper.parked)
        for name in list(self.held):
            if self.held[name].ran and name not in ahead:
                self._commit(name)
        interrupts = [i for u in updates for i in (u.get("__interrupt__") or ())]
        if interrupts:
            self._ask(snap, interrupts)
        if parked or self.ledger.task(self.task_id).status == "parked":
            raise _Stop(RunResult("blocked", reason="parked"))

    def _commit(self, name: str) -> None:
        h = self.held.pop(name)
        if h.keeper is not None:
            h.keeper.stop()
            if h.keeper.lost:
                raise _Stop(self._lease_lost(name, h.keeper.lost))
        try:
            self.ledger.commit(h.claim, output=h.output, summary=f"{name} succeeded (langgraph)")
        except LeaseLost as e:
            raise _Stop(self._lease_lost(name, str(e))) from None

    def _ask(self, snap: StateSnapshot, interrupts: list[Interrupt]) -> None:
        by_id = {i.id: t.name for t in snap.tasks for i in t.interrupts}
        first = None
        for intr in interrupts:
            name = by_id.get(intr.id)
            h = self.held.pop(name, None) if name else None
            if h is None:
                continue
            if h.keeper is not None:
                h.keeper.stop()
            v = intr.value if isinstance(intr.value, Mapping) else {"question": str(intr.value)}
            options = [_with_consequence(o) for o in v.get("options") or []]
            raw_ctx = v.get("context")
            ctx: JsonObject = dict(raw_ctx) if isinstance(raw_ctx, Mapping) else {}
            ctx["interrupt_id"] = intr.id
            question = str(v.get("question") or "The graph asks for a decision")
            self._parts(ctx, v, h.claim, question)
            try:
                hid = self.ledger.request_human(
                    h.claim, kind=str(v.get("kind") or ("confirm" if options else "direction")),
                    question=question, options=options, recommendation=v.get("recommendation"), context=ctx)
            except LeaseLost as e:
                raise _Stop(self._lease_lost(name or "", str(e))) from None
            if first is None:
                first = RunResult("blocked", reason="handoff", node=name, handoff_id=hid,
                                  question=str(v.get("question") or ""))
        if first is not None:
            raise _Stop(first)

    def _parts(self, ctx: JsonObject, v: Mapping[str, object], claim: Claim, question: str) -> None:
        """The checkpoint's parts (store/ledger/checkpoint.py): the interrupt's own, else what the
        adapter knows — the graph's steps done so far, the node that asks."""
        for k in PARTS:
            if isinstance(v.get(k), str) and k not in ctx:
                ctx[k] = str(v[k])
        if not ctx.get("done"):
            done = [n.key for n in self.ledger.graph(claim.task_id).nodes if n.status == "succeeded"]
            ctx["done"] = ("the graph's steps done: " + ", ".join(done[-20:])) if done else "no step done yet"
        if not ctx.get("stuck"):
            ctx["stuck"] = f"the graph's node {claim.node_key} interrupted to ask: {question[:500]}"
        if v.get("recommendation") is None:
            ctx.setdefault("no_recommendation", "the graph's interrupt names none")
        elif not ctx.get("why"):
            ctx["why"] = "named by the graph's interrupt, without a reason"

    def _failed(self, exc: BaseException, steps: int) -> RunResult:
        snap = self.graph.get_state(self.config)
        errored = [t for t in snap.tasks if t.error is not None] or []
        names = [t.name for t in errored if t.name in self.held] or [n for n in snap.next if n in self.held][:1]
        if isinstance(exc, StepFailed):
            cls, retryable, after = exc.failure_class, exc.retryable, exc.retry_after_s
        else:
            (cls, retryable), after = self.classify(exc), None
        error = f"{type(exc).__name__}: {exc}"
        for name in names:
            h = self.held.pop(name)
            if h.keeper is not None:
                h.keeper.stop()
            try:
                self.ledger.fail(h.claim, error=error, failure_class=cls, retryable=retryable, retry_after_s=after)
            except LeaseLost as e:
                return self._lease_lost(name, str(e))
        node = self.ledger.node(self.task_id, names[0]) if names else None
        can = node is not None and node.status == "pending"
        return RunResult("failed", reason="error", node=names[0] if names else None, error=error, failure_class=cls,
                         retryable=can, retry_at=iso(node.next_retry_at) if can and node else None, steps=steps)

    def _complete(self, snap: StateSnapshot, steps: int) -> RunResult:
        for name in list(self.held):
            if self.held[name].ran:
                self._commit(name)
            else:
                self._drop(name)
        # A loop node left running by an earlier process (its lease since expired): take it back
        # and commit it with its last update from the checkpoints.
        for n in self.ledger.graph(self.task_id).nodes:
            if n.status == "running" and n.key in shape.ran_nodes(self.graph, snap):
                claim = self.ledger.claim(self.task_id, self.worker, lease_s=self.lease_s, key=n.key,
                                          workflow_version=self.workflow_version)
                if claim is None:
                    raise _Stop(RunResult("blocked", reason="busy", node=n.key, error=f"held by {n.lease_owner}"))
                self.ledger.commit(claim, output=shape.last_update(self.graph, snap, n.key),
                                   summary=f"{n.key} succeeded (langgraph)")
        return RunResult("completed", output=snap.values, steps=steps)

    # ------------------------------------------------------------------ the ledger is the truth
    def _lost(self, name: str) -> None:
        h = self.held.get(name)
        why = h.keeper.lost if h is not None and h.keeper is not None and h.keeper.lost else "lease lost"
        raise _Stop(self._lease_lost(name, why))

    def _lease_lost(self, name: str, why: str) -> RunResult:
        self.held.pop(name, None)
        task = self.ledger.task(self.task_id)
        if task.status == "aborted":
            return RunResult("failed", reason="aborted", node=name, error=why)
        if task.status == "parked" or self._status(name) == "parked":
            return RunResult("blocked", reason="parked", node=name, error=why)
        return RunResult("blocked", reason="lease_lost", node=name, error=why)

    def _drop(self, name: str) -> None:
        h = self.held.pop(name, None)
        if h is not None and h.keeper is not None:
            h.keeper.stop()

    def _sync(self) -> RunnableConfig:
        """The config to continue from: the current checkpoint, or the one before the earliest
        node that LangGraph has run and the ledger has since reset."""
        task = self.ledger.task(self.task_id)
        if task.status == "aborted":
            raise _Stop(RunResult("failed", reason="aborted", error="the task was aborted by an operator"))
        if task.status == "parked":  # a parked task runs nothing new, not even one more pass of a loop
            raise _Stop(RunResult("blocked", reason="parked", error=f"task {self.task_id} is parked: "
                                  f"{task.park_reason or 'no reason given'}; resume it to go on"))
        snap = self.graph.get_state(self.config)
        if not snap.values and not snap.next:
            return self.config  # not started yet
        nodes = {n.key: n for n in self.ledger.graph(self.task_id).nodes}
        now = self.ledger.now()
        for name in list(self.held):  # leases of this supervisor revoked by an operator, or expired
            n = nodes.get(name)
            h = self.held[name]
            if (n is None or n.status != "running" or n.lease_owner != self.worker
                    or (n.lease_until or 0) <= now or (h.keeper is not None and h.keeper.lost)):
                self._drop(name)  # an expired one is claimed again (a reclaim) when the graph gets to it
        ran = shape.ran_nodes(self.graph, snap)
        reset = [k for k, n in nodes.items() if n.status in ("pending", "parked") and k in ran
                 and k not in snap.next and k not in self.held]
        if not reset:
            return self.config
        # For each reset node, the newest ancestor about to run it (the state it last ran from);
        # continue from the oldest of those, so every reset node runs again.
        found: dict[str, tuple[int, StateSnapshot]] = {}
        for depth, anc in enumerate(shape.ancestors(self.graph, snap)):
            if (getattr(anc, "metadata", None) or {}).get("source") == "update":
                continue  # a state update (the rejections handed to an earlier rerun): fork from what it updated
            for k in reset:
                if k not in found and k in anc.next:
                    found[k] = (depth, anc)
            if len(found) == len(reset):
                break
        if not found:
            return self.config
        for name in list(self.held):
            self._drop(name)
        start = max(found.values(), key=lambda f: f[0])[1]
        return self._with_rejections(start, nodes)

    def _with_rejections(self, start: StateSnapshot, nodes: Mapping[str, NodeView]) -> RunnableConfig:
        """The rerun starts from ``start``'s checkpoint with the operators' rejection reasons in
        the state under :data:`REJECTIONS_KEY` (``{node: [reason, ...]}``) when the graph's state
        declares that key; otherwise from ``start`` as it is."""
        rejections = {k: list(n.rejections) for k, n in nodes.items() if n.rejections}
        if REJECTIONS_KEY not in getattr(self.graph, "channels", {}) or not rejections:
            return start.config.copy()
        before = self.graph.get_state(start.parent_config) if start.parent_config else None
        writer = next((n for n in (before.next if before is not None else ())), None)
        if writer is None:
            return start.config.copy()
        cfg = self.graph.update_state(start.config, {REJECTIONS_KEY: rejections}, as_node=writer)
        if tuple(self.graph.get_state(cfg).next) != tuple(start.next):  # the update must not change what runs next
            return start.config.copy()
        return cfg.copy()


def _with_consequence(o: object) -> JsonMapping:
    """An interrupt's option, with what picking it does when the graph does not say: the graph
    resumes with it as ``interrupt()``'s answer. Anything else is handed on as it came: the
    ledger's rule for options refuses it with its reason."""
    if isinstance(o, Mapping) and "id" in o and not o.get("consequence"):
        return {**o, "consequence": f"the graph resumes with {str(o['id'])!r} as the interrupt's answer"}
    return cast(JsonMapping, o)
