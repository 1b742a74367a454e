"""Alignment checks: every ``alignment_every`` completed nodes (default 12) of a task with
requirements, the commit that reaches the count adds a node of kind ``alignment`` that asks: *run
to its end, does the current plan still meet the requirement?* — with the requirements, the plan
and the work done since the last check.

Who answers is the task's ``alignment_by``:

* ``human`` (the default: no agent is known to answer): the node is made ``blocked`` on a
  needs_human handoff of kind ``alignment`` whose context carries the requirements, the plan and
  the work done, options ``aligned`` / ``drifting``. Resolving it completes the node with the
  verdict (``store/actions/resolve.py``).
* ``agent``: the node is pending for an agent that claims kind ``alignment`` (``claim(...,
  kinds=["alignment"])``; a claim without ``kinds`` never takes one) and finds the same material
  in ``claim.inputs["alignment"]``; it commits ``output={"verdict": "aligned"|"drifting",
  "notes": ...}``.

The count restarts when a check is asked (what completes while it waits counts towards the next);
``aligned`` ends the drift run, ``drifting`` raises
``drift_suspected`` until the next replan or an ``aligned`` verdict. Each verdict is kept as a
finding (origin ``alignment``) in the task's conclusions.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, NamedTuple

from store.storage import sql
from store.errors import Refused
from store.jsontypes import JsonObject
from store.ledger.build import add_nodes_tx
from store.storage.core import LedgerCore
from store.storage.models import Handoff, dumps
from store.storage.tables import TaskRecord
from store.views import NodeSpec
from store.mind.rules import VERDICTS
from store.mind.views import MindState
from store.storage.events import HandoffOpened, MindAlignment

KIND = "alignment"


class CheckNode(NamedTuple):
    """The alignment node a verdict answers."""

    id: int
    key: str
    attempt: int
LISTED = 24  # node keys listed in a check's context (done since the last check, the plan ahead)
OPTIONS = (
    {"id": "aligned", "label": "On track",
     "consequence": "work goes on; the count of nodes since the last check and the drift run restart"},
    {"id": "drifting", "label": "Drifting",
     "consequence": "drift_suspected is raised until the task is replanned (or a later check says on track); "
                    "agents read the verdict in their claim inputs"},
)


def due(state: MindState) -> bool:
    return (state.requirements > 0 and state.alignment_every > 0 and state.check is None
            and state.since_check >= state.alignment_every)


def material(core: LedgerCore, task_id: str, state: MindState, since: float | None) -> JsonObject:
    """What a check shows its answerer: the requirements, the plan ahead, the work done since the
    last check (bounded: ``LISTED`` keys each, with totals)."""
    reqs = [{"id": r, "text": t} for r, t in sql.fetch_all(
        core.db, "SELECT rid, text FROM requirement WHERE task_id = ? AND status = 'active' ORDER BY position",
        [task_id])]
    ahead = sql.fetch_all(core.db, "SELECT key, status, serves FROM node WHERE task_id = ? AND status IN "
                                   "('pending', 'running', 'blocked', 'parked', 'failed') AND kind <> ? "
                                   "ORDER BY position LIMIT ?", [task_id, KIND, LISTED + 1])
    done = sql.fetch_all(core.db, "SELECT key, serves FROM node WHERE task_id = ? AND status = 'succeeded' "
                                  "AND kind NOT IN (?, 'compensation') AND finished_at >= ? "
                                  "ORDER BY finished_at DESC, id DESC LIMIT ?",
                         [task_id, KIND, since if since is not None else 0.0, LISTED])
    return {
        "requirements": reqs,
        "plan": {"version": state.plan_version,
                 "ahead": [{"node": k, "status": s, "serves": sql.json_value(sv) or []} for k, s, sv in ahead[:LISTED]],
                 "more_ahead": len(ahead) > LISTED},
        "done": [{"node": k, "serves": sql.json_value(sv) or []} for k, sv in done],
        "done_since_check": state.since_check,
        "drift_run": {"nodes": state.run, "keys": list(state.run_keys)},
    }


def _free_key(core: LedgerCore, task_id: str, n: int) -> tuple[str, int]:
    while True:
        key = f"alignment-{n}"
        if core.node_record_or_none(task_id, key) is None:
            return key, n
        n += 1


def open_check(core: LedgerCore, task: TaskRecord, state: MindState, now: float) -> MindState:
    """Inside a commit: add the next alignment check (blocked on an ``alignment`` handoff when a
    person answers). Returns the state that names it; the count restarts from the question (what
    completes while it waits counts towards the next check)."""
    task_id = task.task_id
    key, n = _free_key(core, task_id, state.checks + 1)
    title = f"Alignment check {n}: does the plan still serve the requirement?"
    add_nodes_tx(core, task_id, [NodeSpec(key, KIND, title=title, always_admit=True, retryable=False)],
                 actor="warden")
    counted = state.since_check
    material_ = material(core, task_id, state, state.checked_at)
    state = replace(state, check=key, due_at=now, checks=n, since_check=0)
    if state.alignment_by == "human":
        node_id = int(sql.scalar(core.db, "SELECT id FROM node WHERE task_id = ? AND key = ?", [task_id, key]))
        why = f"{counted} nodes completed since the last alignment check; no agent answers this task's checks"
        recommendation = None
        if state.drift_after and state.run >= state.drift_after:
            recommendation = "drifting"
            why += f"; {state.run} completed nodes in a row serve no requirement"
        material_["why"] = why
        core.update_node(node_id, {"status": "blocked", "version": sql.Inc(1)})
        hid = core.bind(Handoff.insert(
            task=task_id, node=node_id, kind=KIND, status="open", opened_at=now, opened_by="warden",
            attempt=0, question=(f"Alignment check: {counted} nodes completed since the last check. Run to its "
                                 "end, does the current plan still meet the requirement?"),
            context=material_, options=[dict(o) for o in OPTIONS], recommendation=recommendation)).execute()
        core.journal(task_id, key, "warden", f"{key} asks a human (alignment): does the plan still serve the requirement?",
                     HandoffOpened(handoff=str(hid), kind=KIND, options=[o["id"] for o in OPTIONS],
                                   recommendation=recommendation), at=now)
    return state


def check_output(output: object) -> tuple[str, str | None]:
    """An alignment node's commit output: ``{"verdict": "aligned"|"drifting", "notes": str?}``."""
    if not isinstance(output, Mapping) or output.get("verdict") not in VERDICTS:
        raise Refused('an alignment check commits output={"verdict": "aligned" | "drifting", "notes": "..."}')
    verdict, notes = output["verdict"], output.get("notes")
    return str(verdict), (None if notes is None else str(notes)[:2000])


def on_verdict(core: LedgerCore, task_id: str, node: CheckNode, output: object, now: float, actor: str,
               state: MindState) -> None:
    """Inside the write that answered a check (an agent's commit, a person's resolution): the
    verdict restarts the count, ``aligned`` ends the drift run, and it is kept as a finding."""
    verdict, notes = check_output(output)
    new = replace(state, checked_at=state.due_at if state.due_at is not None else now, verdict=verdict)
    if state.check == node.key:
        new = replace(new, check=None, due_at=None)
    if verdict == "aligned":
        new = replace(new, run=0, run_since=None, run_keys=())
    sql.execute(core.db, "UPDATE task SET mind = ? WHERE task_id = ?", [dumps(new.to_json()), task_id])
    text = f"alignment check {node.key}: {verdict}" + (f" — {notes}" if notes else "")
    sql.execute(core.db, "INSERT INTO conclusion (task_id, node_id, node_key, attempt, kind, text, source, reason, "
                         "origin, actor, at) VALUES (?, ?, ?, ?, 'finding', ?, ?, NULL, ?, ?, ?)",
                [task_id, node.id, node.key, node.attempt, text, f"answered by {actor}", KIND, actor, now])
    core.journal(task_id, node.key, actor, text[:500], MindAlignment(verdict=verdict, notes=notes, nodes=[node.key]),
                 at=now)
