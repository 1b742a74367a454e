"""The mind's counters on the task row (``task.mind``, a :class:`~store.mind.views.MindState`),
moved inside the transactions that change what they count.

A commit of a *countable* node (any kind but ``alignment`` and ``compensation``) of a task with
requirements moves two counters:

* the **drift run**: completed nodes in a row that serve no requirement (a node that serves one
  ends the run); ``drift_suspected`` fires when it reaches ``drift_after`` (default 8);
* **since the last check**: completed nodes since the last alignment check was answered; when it
  reaches ``alignment_every`` (default 12) an alignment check is opened (``alignment.open_check``),
  unless one is open already.

A task without requirements keeps no counters and raises neither signal: there is nothing to drift
from. Nothing here bumps the task revision (a count is not a change of the plan).
"""

from __future__ import annotations

from dataclasses import replace

from store.storage import sql
from store.storage.core import LedgerCore
from store.storage.models import dumps
from store.storage.tables import NodeRecord, TaskRecord
from store.mind import alignment
from store.mind.views import RUN_KEYS, MindState

UNCOUNTED_KINDS = ("alignment", "compensation")  # neither drifts nor counts towards a check


def of(task: TaskRecord) -> MindState:
    """The mind of a task row."""
    return MindState.of(task.mind)


def save(core: LedgerCore, task_id: str, state: MindState) -> None:
    """Write the mind back to the task row (inside the caller's write transaction)."""
    sql.execute(core.db, "UPDATE task SET mind = ? WHERE task_id = ?", [dumps(state.to_json()), task_id])


def counted(state: MindState, key: str, serves: object, now: float) -> MindState:
    """The counters after one countable node completed (pure)."""
    if serves:
        return replace(state, since_check=state.since_check + 1, run=0, run_since=None, run_keys=())
    return replace(state, since_check=state.since_check + 1, run=state.run + 1,
                   run_since=state.run_since if state.run else now, run_keys=(state.run_keys + (key,))[-RUN_KEYS:])


def on_commit(core: LedgerCore, task: TaskRecord, node: NodeRecord, output: object, now: float,
              actor: str) -> None:
    """Inside a commit's transaction, after its node succeeded: an alignment check's verdict, or
    the counters of a countable node (and the next alignment check when one is due)."""
    state = of(task)
    if node.kind == alignment.KIND:
        check = alignment.CheckNode(int(node.id), str(node.key), int(node.attempt or 0))
        alignment.on_verdict(core, task.task_id, check, output, now, actor, state)
        return
    if state.requirements <= 0 or node.kind in UNCOUNTED_KINDS:
        return
    state = counted(state, node.key, node.serves, now)
    if alignment.due(state):
        state = alignment.open_check(core, task, state, now)
    save(core, task.task_id, state)
