"""The Ledger: the one object agents and the console hold — the typed facade over the agent writes
(``store.ledger.claims``, ``fenced``), graph building (``build``), queries (``queries``) and the
operator actions (``store.actions``), all sharing :class:`~store.storage.core.LedgerCore`.

It lives above both packages (not in ``store.ledger``): the actions import the ledger's parts, and
the facade imports the actions, so a facade inside ``store.ledger`` made importing any part of the
ledger import the actions, which import the ledger.

Every agent write is a compare-and-set on (node, lease token, status running,
``lease_until > now``) judged with the injected clock at write time; when it does not match,
``LeaseLost`` is raised and nothing is written. Every write appends its journal events in the
same transaction.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping, Sequence

from store import actions as operator_actions
from store.parks import wake
from store.actions import Plan
from store.actions.registry import plan as plan_registered
from store.storage.db import retry_read, run_read
from store.errors import WardenError
from store.jsontypes import JsonMapping, JsonObject
from store.mind import agent as mind_agent
from store.mind import read as mind_read
from store.mind import record as mind_record
from store.mind import replan as mind_replan
from store.mind.rules import requirements as check_requirements
from store.mind.views import (
    ALIGNMENT_EVERY,
    DRIFT_AFTER,
    MemoryView,
    MindEntry,
    MindView,
    NodeMind,
    PlanVersionView,
    Requirement,
)
from store.views import (
    ActionView,
    ArtifactView,
    Budget,
    Claim,
    EffectView,
    EventView,
    GraphPage,
    GraphView,
    HandoffView,
    NodeDetail,
    NodeSpec,
    NodeView,
    ObservationView,
    Pulse,
    QuotaUse,
    TaskView,
)
from store.ledger import build, claims, fenced, queries, unsafe, waits
from store.ledger import effect_asks
from store.ledger import quotas as quotas_mod
from store.checked import checked
from store.storage.core import LedgerCore


@checked  # every argument of every public method checked once, here (store/checked.py)
class Ledger(LedgerCore):
    """A ledger on SQLite or PostgreSQL. Open with :meth:`open`."""

    # ------------------------------------------------------------------ graph building
    def create_task(
        self,
        task_id: str,
        *,
        title: str = "",
        workflow: str = "",
        workflow_version: str = "",
        inputs: object = None,
        constraints: Sequence[str] | None = None,
        preconditions: JsonMapping | None = None,
        budget: Budget | None = None,
        max_claims: int = 5,
        max_repairs: int = 3,
        exist_ok: bool = False,
        actor: str = "",
        origin: str | None = None,
        requirements: Sequence[Mapping[str, str]] | None = None,
        drift_after: int = DRIFT_AFTER,
        alignment_every: int = ALIGNMENT_EVERY,
        alignment_by: str = "human",
        confirm_kinds: Sequence[str] = (),
    ) -> TaskView:
        """Create a task. With ``exist_ok`` an existing task is returned unchanged (idempotent).

        ``origin``: which integration made it (``mcp``, ``run``, ``claude``, ``langgraph``; None is
        ``python``, an agent written against this API) — shown in the console and ``warden status``.

        ``requirements``: ``[{"id": "r1", "text": ...}, ...]`` — the items the work must meet, kept
        and handed back to every claim (``inputs["memory"]``); nodes say which they serve
        (``add_node(serves=...)``). With requirements the task judges drift: ``drift_suspected``
        after ``drift_after`` completed nodes in a row serve none, an alignment check every
        ``alignment_every`` completed nodes, answered by ``alignment_by`` (``human``: a handoff;
        ``agent``: a claim of kind ``alignment``); 0 turns either off.

        ``confirm_kinds``: node kinds whose effects a person confirms before they are intended
        (``payment``, ``delete``: docs/agents.md "Irreversible effects wait for a person")."""
        reqs = check_requirements("requirements", requirements)
        build.create_task(self, task_id, title=title, workflow=workflow, workflow_version=workflow_version,
                          inputs=inputs, constraints=constraints, preconditions=preconditions, budget=budget,
                          max_claims=max_claims, max_repairs=max_repairs, exist_ok=exist_ok, actor=actor,
                          origin=origin, requirements=reqs, confirm_kinds=tuple(confirm_kinds),
                          mind=mind_record.initial_mind(len(reqs), drift_after, alignment_every, alignment_by))
        return self.task(task_id)

    def add_node(
        self,
        task_id: str,
        key: str,
        *,
        kind: str = "tool",
        deps: Sequence[str] = (),
        title: str = "",
        preconditions: JsonMapping | None = None,
        est_wall_s: float | None = None,
        est_tokens: int | None = None,
        always_admit: bool = False,
        retryable: bool = True,
        units_total: float | None = None,
        max_claims: int | None = None,
        actor: str = "",
        serves: Sequence[str] = (),
        quotas: Sequence[str] = (),
        failure_class: str | None = None,
    ) -> NodeView:
        """Add one node. Unknown dependencies and cycles are refused; re-adding the same node
        with the same dependencies is a no-op (an agent may die between deciding and adding).
        ``serves``: the task's requirement ids this node's work serves (unknown ids are refused).
        ``quotas``: the declared quotas its claims draw on (``declare_quota``; undeclared names are
        refused). ``failure_class="irreversible_write"``: its work cannot be undone — not retryable,
        and each effect waits for a person's confirmation (docs/agents.md "Irreversible effects")."""
        spec = NodeSpec(key, kind, tuple(deps), title, preconditions, est_wall_s, est_tokens,
                        always_admit, retryable, units_total, max_claims, tuple(serves), tuple(quotas), failure_class)
        build.add_nodes(self, task_id, [spec], actor)
        return self.node(task_id, key)

    def add_nodes(self, task_id: str, specs: Iterable[NodeSpec], *, actor: str = "") -> int:
        """Add many nodes in one transaction (any order among themselves). Returns how many were new."""
        return build.add_nodes(self, task_id, list(specs), actor)

    # ------------------------------------------------------------------ shared quotas
    def declare_quota(self, name: str, capacity: int, *, window_s: float | None = None,
                      task_id: str | None = None, actor: str = "") -> QuotaUse:
        """Declare (or change) a shared external quota nodes draw on (``add_node(..., quotas=[name])``):
        with ``window_s``, at most ``capacity`` claims start in any ``window_s`` seconds (a rate
        limit); without, at most ``capacity`` nodes hold it at once (a licence, a GPU). On the whole
        ledger, or on one task (``task_id``: its own quota of that name wins). Claims in every
        process respect it; a node waiting on it stays pending (docs/agents.md "Shared quotas")."""
        quotas_mod.declare(self, name, int(capacity), window_s=window_s, task_id=task_id, actor=actor)
        return run_read(self.db, lambda: quotas_mod.quota(self, name, task_id))

    @retry_read
    def quotas(self, task_id: str | None = None) -> list[QuotaUse]:
        """The ledger's quotas (and ``task_id``'s own), each with how much is in use now."""
        return quotas_mod.quotas(self, task_id)

    # ------------------------------------------------------------------ claims and the budget
    @retry_read
    def admit(self, task_id: str, node_key: str) -> str:
        """The budget governor for one node: ``admit | admit_degraded | deny_hard``."""
        return claims.admit(self, task_id, node_key)

    def claim(self, task_id: str | None, worker: str, lease_s: float = 30.0, *,
              kinds: Sequence[str] | None = None, key: str | None = None,
              workflow_version: str | None = None, max_step_s: float | None = None,
              renew: str | None = None) -> Claim | None:
        """Claim a ready node of ``task_id`` (or of any active task when None), or None.

        Ready: pending, every dependency succeeded or abandoned, ``next_retry_at`` passed, task
        active. A running node whose lease has expired (``lease_until <= now``) is reclaimed.
        ``kinds``: only nodes of these kinds. ``key``: only that node (a framework that decides
        itself what runs next) — None when it is not ready (waiting on a dependency or a retry
        time, blocked, parked, running under a live lease, finished, the task not active or over
        its budget); ``NotFound`` when the task has no such node.
        Under a token or wall cap a pending node whose estimate (``est_tokens`` × 1.2,
        ``est_wall_s`` × 1.5) does not fit in what is left is passed over unless it is
        ``always_admit``. An aborted task offers only its ``compensation`` nodes (a claim across
        tasks gets them only when ``kinds`` names ``"compensation"``). A task of another
        ``workflow_version`` gives None (journalled once per task, worker and version): a claim
        naming none only takes tasks created without one. Past the task's hard budget gate (stop
        included) only ``always_admit`` nodes, the closing steps, are claimable.

        ``max_step_s``: the step's time limit, recorded on the node — heartbeats never extend the
        lease past it, and every write after it raises ``LeaseLost`` naming the limit.

        Never reclaimed: an expired node whose work cannot safely run twice (``retryable=False``,
        or an effect intended and never confirmed) — it fails and asks a human instead
        (:meth:`check_expired`). While a node of the task is on cost-density ``hold`` nothing new
        of the task is claimed (docs/agents.md "Rules the ledger holds").

        ``renew`` (with ``key``): the token of this worker's own lapsed claim of the node. When it
        is still the node's (nobody claimed it since) the lease is renewed: the same attempt, no
        claim spent from ``max_claims`` (docs/agents.md "Failures: classes and retries").
        """
        return claims.claim(self, task_id, worker, lease_s, kinds, key, workflow_version, max_step_s, renew)

    def check_expired(self, task_ids: Sequence[str] | None = None, *, actor: str = "") -> list[JsonObject]:
        """Judge every running node whose lease has expired and whose work cannot safely run twice
        (``retryable=False``, or an effect intended and never confirmed): it fails and asks a human
        (an ``exception`` handoff with the evidence) instead of waiting to be reclaimed. A claim
        does the same when it meets one; ``warden check-wakes`` and the console call this so it
        happens even when no worker is left. Returns ``{"task_id", "node", "handoff", "why"}`` per
        node judged now (each is judged once); on a read-only ledger it does nothing."""
        return unsafe.check_expired(self, task_ids, actor or "warden")

    # ------------------------------------------------------------------ fenced writes
    def heartbeat(
        self,
        claim: Claim,
        *,
        units_done: float | None = None,
        units_total: float | None = None,
        tokens: float | None = 0,
        observation: str | None = None,
        lease_s: float | None = None,
        waiting_on: str | None = None,
        wait_s: float | None = None,
        action: str | None = None,
        result: str | None = None,
        max_step_s: float | None = None,
    ) -> Pulse:
        """Extend the lease and record progress. Raises LeaseLost when the claim no longer holds.

        ``action`` is what the step did (the tool call: ``"search('moth index v2')"``), ``result``
        what it learned (its output: ``"0 results"``); ``observation`` a free narrative. New
        information is judged on the result when there is one (else the observation, else the
        action), against everything this attempt has seen: other actions that keep getting
        nothing new are ``no_new_info``, the same action with the same result is ``repeating``.
        While ``units_done`` rises (or a number in the report moves toward its stated total:
        "41/100" → "42/100", not an attempt count) neither is an alarm.

        ``max_step_s`` gives the step a time limit from its claim (an earlier one stays; what
        ``LeaseKeeper`` sends): no heartbeat extends the lease past it, and every write after it
        raises ``LeaseLost`` naming the limit — as with ``claim(max_step_s=)``.

        ``waiting_on="ci", wait_s=600`` declares that the node is polling something for up to
        ``wait_s``: its repeated observations meanwhile raise no stall signal, past the deadline it
        is ``overdue``; declaring the same wait again keeps its start, and an observation that
        brings new information without declaring a wait ends it. Returns a :class:`Pulse`;
        ``parked`` tells the agent its task or node was parked: finish the current step, then stop
        claiming.
        """
        return fenced.heartbeat(self, claim, units_done=units_done, units_total=units_total, tokens=tokens,
                                observation=observation, lease_s=lease_s, waiting_on=waiting_on, wait_s=wait_s,
                                action=action, result=result, max_step_s=max_step_s)

    def commit(
        self,
        claim: Claim,
        *,
        output: object = None,
        output_ref: str | None = None,
        tokens: float | None = 0,
        artifact: tuple[str, bytes] | None = None,
        units_done: float | None = None,
        next_nodes: Sequence[NodeSpec] = (),
        repair: bool = False,
        summary: str | None = None,
        repair_from: Sequence[str] = (),
    ) -> int:
        """Record the step's result atomically: output, artifact, tokens, timings, status
        succeeded, follow-up nodes (``next_nodes``) and the journal event. Returns the event id.

        ``repair=True``: the output is a failing check's verdict; one repair round is counted
        against the task's ``max_repairs`` and the work goes back — through ``next_nodes`` that
        depend on this node (the nodes that depended on it then wait for their last ones), else in
        place: ``repair_from`` (default: its direct dependencies) and everything downstream, this
        node included, → pending with the verdict in their next claim's ``inputs["repair"]``.
        With the budget spent the node fails and the task is marked failed
        (store/ledger/repair.py).
        """
        return fenced.commit(self, claim, output=output, output_ref=output_ref, tokens=tokens, artifact=artifact,
                             units_done=units_done, next_nodes=next_nodes, repair=repair, summary=summary,
                             repair_from=repair_from)

    def commit_many(self, commits: Sequence[tuple[Claim, fenced.CommitArgs]]) -> list[int | WardenError]:
        """Group commit: several steps' commits in ONE write transaction (one fsync).

        For an agent process that runs many steps at once. Each step stays all-or-nothing (it runs
        in its own savepoint and is fenced exactly like :meth:`commit`); a step whose lease is lost
        or whose commit is refused is skipped and its error returned in its place, the others
        commit. Returns, per step, the journal event id or the error.
        """
        return fenced.commit_many(self, commits)

    def fail(
        self,
        claim: Claim,
        *,
        error: str,
        failure_class: str = "transient",
        retryable: bool | None = None,
        retry_after_s: float | None = None,
        tokens: float | None = 0,
    ) -> int:
        """Record a failed step. Retryable → pending with a persisted ``next_retry_at``
        (deterministic back-off unless ``retry_after_s``); otherwise failed."""
        return fenced.fail(self, claim, error=error, failure_class=failure_class, retryable=retryable,
                           retry_after_s=retry_after_s, tokens=tokens)

    def request_human(
        self,
        claim: Claim,
        *,
        kind: str,
        question: str,
        options: Sequence[JsonMapping] = (),
        recommendation: str | None = None,
        context: JsonMapping | None = None,
        tokens: float | None = 0,
    ) -> str:
        """Open a needs_human handoff; the node becomes blocked until it is resolved. Returns the
        handoff id."""
        return fenced.request_human(self, claim, kind=kind, question=question, options=options,
                                    recommendation=recommendation, context=context, tokens=tokens)

    def request_effect_confirmation(self, claim: Claim, effect_key: str, *, details: JsonMapping, done: str,
                                    why: str, question: str | None = None, stuck: str | None = None,
                                    tokens: float | None = 0) -> str:
        """Ask a person to confirm an irreversible effect before ``intend_effect``: a ``confirm``
        handoff (options ``proceed`` / ``stop``, recommended ``proceed`` because ``why``) whose
        context carries ``done``, ``stuck`` and the effect's key and ``details``. The node is
        blocked until it is answered; claim it again and intend the effect. Returns the handoff id."""
        return effect_asks.request_effect_confirmation(self, claim, effect_key, details=details, done=done, why=why,
                                                       question=question, stuck=stuck, tokens=tokens)

    def intend_effect(self, claim: Claim, effect_key: str, *, payload: object = None,
                      compensation: str | None = None) -> EffectView:
        """Log an intended side effect *before* making the external call.

        Idempotent on ``effect_key`` within the task: when the key is already logged, the
        existing record is returned unchanged — if it is ``confirmed`` the effect already
        happened and must not be made again.
        """
        fenced.intend_effect(self, claim, effect_key, payload=payload, compensation=compensation)
        return queries.effect(self, claim.task_id, effect_key)

    def confirm_effect(self, claim: Claim, effect_key: str, *, external_id: str | None = None,
                       compensation: str | None = None) -> EffectView:
        """Record that an intended effect happened (with its external id and how to undo it)."""
        fenced.confirm_effect(self, claim, effect_key, external_id=external_id, compensation=compensation)
        return queries.effect(self, claim.task_id, effect_key)

    def note(self, claim: Claim, text: str, *, layer: str = "decision", data: JsonMapping | None = None) -> int:
        """Journal a note from the agent (a decision, an observation worth keeping); ``data``: more
        keys for the event's payload."""
        return fenced.note(self, claim, text, layer=layer, data=data)

    # ------------------------------------------------------------------ the task's mind (store/mind/)
    def conclude(self, claim: Claim, text: str, *, source: str | None = None, kind: str = "finding",
                 reason: str | None = None) -> int:
        """Record what this step found (``kind="finding"``) or a path it tried and abandoned
        (``kind="rejected"``, ``reason`` required), with where it came from (``source``, required: a
        file, a command's output). Later claims are handed them (``inputs["memory"]``). Returns the entry's id."""
        return mind_agent.conclude(self, claim, text, source=source, kind=kind, reason=reason)

    def propose_memory(self, claim: Claim, text: str, *, scope: str = "kind", source: str | None = None) -> str:
        """Propose a memory for later tasks of this workflow (``scope="kind"``: nodes of this
        node's kind; ``"workflow"``: every node), with where it came from (``source``, required: a
        file, a command's output). Pending until a person — not a worker of the task — confirms it;
        never handed out before. Returns its id (the same text again returns the same id)."""
        return mind_agent.propose_memory(self, claim, text, scope=scope, source=source)

    def replan(self, task_id: str, *, add: Sequence[NodeSpec] = (), remove: Sequence[str] = (),
               reorder: Sequence[str] = (), narrow: JsonMapping | None = None, trigger: str,
               in_flight: str = "wait", reason: str, actor: str) -> PlanVersionView:
        """Change the plan as one new version: ``add`` nodes, ``remove`` keys (abandoned),
        ``reorder`` keys (run first, in that order), ``narrow`` the goal (``{"drop": [requirement
        ids], "goal": text}``); ``in_flight`` says what happens to running nodes it removes
        (``wait`` | ``cancel`` | ``discard``); ``trigger`` what set it off (``evidence_conflict`` |
        ``pattern`` | ``diminishing_returns`` | ``operator``). Returns the version (docs/agents.md
        "Replanning" has the exact semantics)."""
        return mind_replan.replan(self, task_id, add=add, remove=remove, reorder=reorder, narrow=narrow,
                                  trigger=trigger, in_flight=in_flight, reason=reason, actor=actor)

    @retry_read
    def mind(self, task_id: str) -> MindView:
        """The task's mind: requirements and the nodes serving each (and those serving none),
        constraints, conclusions and rejected paths (newest first), plan versions, its memories."""
        return mind_read.mind(self, task_id)

    @retry_read
    def plans(self, task_id: str) -> list[PlanVersionView]:
        """The task's plan versions, oldest first (version 1: the plan as first built)."""
        return mind_replan.versions(self, task_id)

    @retry_read
    def requirements(self, task_id: str) -> list[Requirement]:
        return mind_read.requirements(self, task_id)

    @retry_read
    def conclusions(self, task_id: str, *, kind: str = "finding", node: str | None = None,
                    limit: int = 100) -> list[MindEntry]:
        """The task's conclusions (``kind="finding"``) or rejected paths, newest first."""
        self.task(task_id)
        return mind_read.entries(self, task_id, kind, limit, node)

    @retry_read
    def node_mind(self, task_id: str, key: str) -> NodeMind:
        """A node's requirements, the memory a claim of it would be handed now, its own entries."""
        return mind_read.node_mind(self, task_id, key)

    @retry_read
    def memories(self, *, status: str | None = None, limit: int = 500) -> list[MemoryView]:
        """Memories across tasks, newest first (``status``: pending | confirmed | rejected)."""
        return mind_read.memories(self, status, limit)

    @retry_read
    def memory(self, memory_id: str) -> MemoryView:
        return mind_read.memory(self, memory_id)

    # ------------------------------------------------------------------ operator actions
    @retry_read
    def plan_park(self, task_id: str, *, reason: str, node: str | None = None, until: float | str | None = None,
                  wake_on: str | Sequence[str] | None = None, now: bool = False, auto_resume: bool = False) -> Plan:
        """Park a task (or one node with ``node=``) until an outside signal (``until``: a time or
        a duration like ``2h``, to re-confirm by); ``now`` revokes running leases. ``wake_on``:
        conditions (``handoff:<id>``, ``node:<key>``, ``effect:<key>``, ``file:<path>``,
        ``at:<time>``) that raise a ``wake`` signal when met, and resume the park with
        ``auto_resume``."""
        return operator_actions.plan_park(self, task_id, reason=reason, node=node, until=until, wake_on=wake_on,
                                          now=now, auto_resume=auto_resume)

    @retry_read
    def plan_resume(self, task_id: str, *, node: str | None = None, reason: str | None = None) -> Plan:
        """Undo a park of the task (or of one node with ``node=``). A reason is optional."""
        return operator_actions.plan_resume(self, task_id, node=node, reason=reason)

    @retry_read
    def plan_narrow(self, task_id: str, *, reason: str, set: JsonMapping | None = None,  # noqa: A002
                    exclude: Sequence[str] = ()) -> Plan:
        """Narrow the task's scope: ``set={K: V}`` and/or ``exclude=[node keys]``."""
        return operator_actions.plan_narrow(self, task_id, reason=reason, set=set, exclude=exclude)

    @retry_read
    def plan_rewind(self, task_id: str, node: str, *, reason: str) -> Plan:
        """Rewind a node: it and everything downstream → pending, the reason fed back to the agent."""
        return operator_actions.plan_rewind(self, task_id, node, reason=reason)

    @retry_read
    def plan_abort(self, task_id: str, *, reason: str) -> Plan:
        """Abort a task: every unfinished node abandoned, leases revoked, open handoffs withdrawn."""
        return operator_actions.plan_abort(self, task_id, reason=reason)

    @retry_read
    def plan_resolve(self, handoff_id: str, *, option: str | None = None, answer: str | None = None) -> Plan:
        """Resolve a needs_human handoff with one of its options (and an optional answer)."""
        return operator_actions.plan_resolve(self, handoff_id, option=option, answer=answer)

    @retry_read
    def plan_escalate(self, task_id: str, node: str, *, reason: str, question: str | None = None,
                      context: JsonMapping | None = None) -> Plan:
        """Ask a human what should happen to a node (it becomes blocked on an ``exception`` handoff)."""
        return operator_actions.plan_escalate(self, task_id, node, reason=reason, question=question,
                                              context=context)

    @retry_read
    def plan_compensated(self, task_id: str, effect_key: str, *, reason: str) -> Plan:
        """Mark a confirmed effect compensated by hand (it was undone outside Warden): the reason
        says what was done. Its compensation node, if it has not run, is abandoned."""
        return operator_actions.plan_compensated(self, task_id, effect_key, reason=reason)

    @retry_read
    def plan(self, action: str, arguments: Mapping[str, object]) -> Plan:
        """Plan any registered action (``store.actions.ACTIONS``) by name, with the arguments its
        ``plan_<action>`` method takes (``{"task_id": "t", "node": "c", "reason": "…"}``), each
        checked by the same rule: how the ``warden`` subcommands and the console's dialogs plan."""
        return plan_registered(self, action, arguments)

    @retry_read
    def plan_memory(self, memory_id: str, *, decision: str, reason: str) -> Plan:
        """Confirm (``decision="confirm"``) or reject a proposed memory — or retract a confirmed
        one (``reject``): the registered actions ``memory-confirm`` / ``memory-reject``. Confirmed,
        it is handed to later claims of its kind / workflow."""
        name = {"confirm": "memory-confirm", "reject": "memory-reject"}.get(decision, "memory-" + decision)
        return plan_registered(self, name, {"memory_id": memory_id, "reason": reason})

    def apply(self, plan: Plan, *, operator: str) -> Plan:
        """Apply exactly ``plan`` in one transaction and return it applied, or raise
        ``StaleRevision`` when the ledger changed since it was computed. A resolved handoff
        wakes the parks waiting on it (``wake_on="handoff:<id>"``) at once."""
        done = operator_actions.apply(self, plan, operator=operator)
        wake.after_apply(self, done)
        return done

    def check_wakes(self, task_ids: Sequence[str] | None = None) -> list[JsonObject]:
        """Look at every park's wake conditions now (``at:`` and ``file:`` need somebody to look:
        the console does, ``warden check-wakes`` for cron, an agent loop may; a read never does).
        Journals each newly met condition and resumes the parks that auto-resume; returns the
        wakes noticed: ``{"task_id", "node", "condition", "evidence", "auto_resume"}`` each. On a
        ledger opened read-only it does nothing and returns []."""
        return wake.check(self, task_ids)

    # ------------------------------------------------------------------ queries
    @retry_read
    def tasks(self) -> list[TaskView]:
        return queries.tasks(self)

    @retry_read
    def task(self, task_id: str) -> TaskView:
        return queries.task(self, task_id)

    @retry_read
    def graph(self, task_id: str) -> GraphView:
        """The task and all its nodes in topological order, each with its dependency keys."""
        return queries.graph(self, task_id)

    def graph_pages(self, task_id: str, *, first: int = queries.GRAPH_FIRST_PAGE,
                    page: int = queries.GRAPH_PAGE) -> Iterator[GraphPage]:
        """The task's graph as pages of lean ``NodeRow`` tuples from one snapshot (see
        ``queries.graph_pages``)."""
        # ints: the rule (LIMIT) takes a whole float such as 1.0, which the driver's fetchmany refuses
        return queries.graph_pages(self, task_id, first=int(first), page=int(page))

    @retry_read
    def nodes(self, task_id: str, keys: Sequence[str]) -> list[NodeView]:
        """Just these nodes (for applying a feed delta), in topological order; unknown keys skipped."""
        return queries.nodes(self, task_id, keys)

    @retry_read
    def node(self, task_id: str, key: str) -> NodeView:
        return queries.node(self, task_id, key)

    @retry_read
    def dependents(self, task_id: str, key: str) -> tuple[str, ...]:
        return queries.dependents(self, task_id, key)

    @retry_read
    def node_detail(self, task_id: str, key: str, *, events_limit: int = 200,
                    observations_limit: int = 200) -> NodeDetail:
        return queries.node_detail(self, task_id, key, events_limit=events_limit,
                                   observations_limit=observations_limit)

    @retry_read
    def observations(self, task_id: str, key: str, limit: int = 50) -> list[ObservationView]:
        return queries.observations(self, task_id, key, limit)

    @retry_read
    def events(self, since: int = 0, *, task_id: str | None = None, limit: int = 1000) -> list[EventView]:
        """Journal events with ``id > since`` in id order (the tail cursor)."""
        return queries.events(self, since, task_id=task_id, limit=limit)

    @retry_read
    def last_event_id(self) -> int:
        return queries.last_event_id(self)

    @retry_read
    def effects(self, task_id: str) -> list[EffectView]:
        return queries.effects(self, task_id)

    @retry_read
    def handoffs(self, *, status: str | None = "open", task_id: str | None = None) -> list[HandoffView]:
        """Handoffs, oldest first (by default the open ones across all tasks)."""
        return queries.handoffs(self, status=status, task_id=task_id)

    @retry_read
    def handoff(self, handoff_id: str) -> HandoffView:
        return queries.handoff(self, handoff_id)

    def wait_for_resolution(self, handoff_id: str, *, timeout: float | None = None) -> JsonObject | None:
        """Block until the handoff is no longer open and return its resolution — ``{"handoff",
        "status" (resolved | withdrawn | expired), "kind", "question", "option", "answer", "by",
        "at" (ISO-8601 UTC), "at_ts" (epoch seconds)}`` — or None when ``timeout`` seconds pass
        first (``timeout=None`` waits as long as it takes). Sleeps on LISTEN/NOTIFY (PostgreSQL)
        or the database file's change notifications (SQLite), never a busy loop. An unknown id
        raises NotFound; in async code call it from a thread (``asyncio.to_thread``)."""
        return run_read(self.db, lambda: waits.wait_for_resolution(self, handoff_id, timeout))

    @retry_read
    def actions(self, task_id: str | None = None, limit: int = 100) -> list[ActionView]:
        """The operator audit, newest first."""
        return queries.actions(self, task_id, limit)

    @retry_read
    def artifacts(self, task_id: str) -> list[ArtifactView]:
        return queries.artifacts(self, task_id)

    @retry_read
    def latest_artifact(self, task_id: str) -> tuple[ArtifactView, bytes]:
        """The task's latest committed artifact and its bytes, after checking its sha256."""
        return queries.latest_artifact(self, task_id)
