"""``drift_suspected`` and ``alignment_due``: judged from the task row's mind counters alone
(``task.mind``, kept by the commits that move them, store/mind/state.py), so ``warden status``,
``warden graph`` and the console's incremental analysis give the same signals from the same row.

* ``drift_suspected`` (warn) — ``drift_after`` (default 8; ``create_task(drift_after=...)``, 0 turns
  it off) completed nodes in a row serve no requirement: every step may look reasonable while the
  path leaves the goal. The evidence lists them. Also (alarm) while the latest
  alignment check answered ``drifting`` and no replan has followed.
* ``alignment_due`` (info) — an alignment check is open: ``alignment_every`` (default 12;
  ``create_task(alignment_every=...)``, 0 turns it off) nodes completed since the last one. The
  evidence says who answers it (a person: the handoff inbox; an agent claiming kind alignment).

Only tasks with requirements raise them (there is nothing to drift from otherwise), and only while
the task is active or parked. Returned as plain tuples in ``Signal``'s field order.
"""

from __future__ import annotations

from store.clock import duration_text, iso
from store.views import TaskView

SignalTuple = tuple[str, str, "str | None", "float | None", str, str]
KINDS = ("drift_suspected", "alignment_due")
SHOWN = 12  # node keys named in the evidence


def signals(task: TaskView, now: float) -> list[SignalTuple]:
    state = task.mind
    if task.status not in ("active", "parked") or state.requirements <= 0:
        return []
    out: list[SignalTuple] = []
    tid = task.task_id
    if state.drift_after > 0 and state.run >= state.drift_after:
        keys = list(state.run_keys)
        shown = ", ".join(keys[-SHOWN:])
        more = state.run - min(len(keys), SHOWN)
        out.append(("drift_suspected", tid, None, state.run_since, "warn",
                    f"{state.run} completed nodes in a row serve no requirement: {shown}"
                    + (f" and {more} earlier" if more > 0 else "")
                    + f" (the first finished {iso(state.run_since)}); say which requirement each serves, "
                      "replan or narrow"))
    if state.verdict == "drifting":
        out.append(("drift_suspected", tid, None, state.checked_at, "alarm",
                    "the latest alignment check answered drifting and no replan has followed: replan, narrow "
                    "or park the task"))
    if state.alignment_every > 0 and state.check is not None:
        who = ("a person (see the handoff inbox)" if state.alignment_by == "human"
               else "an agent that claims kind alignment")
        waited = f", asked {duration_text(now - state.due_at)} ago" if state.due_at is not None else ""
        last = f"the last check {iso(state.checked_at)}" if state.checked_at is not None else "no check yet"
        out.append(("alignment_due", tid, state.check, state.due_at, "info",
                    f"alignment check {state.check} waits for {who}{waited} ({last}; every "
                    f"{state.alignment_every} completed nodes)"))
    return out
