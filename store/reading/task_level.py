"""Task-level signals: ``wake``, ``budget_insufficient``, ``quota_wait`` and ``park_expired`` for a park
without an until (and, from store/mind/signals.py, ``drift_suspected`` and ``alignment_due``; from store/mind/patterns.py, ``failure_pattern``). Computed from the ledger as it is now (nothing stored), like every signal;
``store.reading.signals`` adds them to the others (:func:`extra`).

* ``wake`` (alarm) — a parked task or node whose wake condition is met (store/parks/conditions.py):
  names the condition and its evidence; resume it (it auto-resumes when asked, and then the
  signal is gone with the park). A ``file:`` condition is looked at here too, so a read-only
  console sees it.
* ``budget_insufficient`` (warn) — a ready pending node (not ``always_admit``) whose estimate with
  its margin (``est_tokens`` × 1.2, ``est_wall_s`` × 1.5) exceeds what is left under the task's
  caps, so a claim passes it over: names the node and the shortfall. At most
  ``BUDGET_INSUFFICIENT_NODES`` per task, plus one line saying how many more.
* ``park_expired`` (warn) — a park without an until that has lasted ``Thresholds.park_expiry_s``
  (48 h by default): re-confirm it or resume. (A park past its until is ``store.reading.signals``'.)
* ``cost_density`` the ledger acts on — a running node of a task with ``Budget(density_limit=)``
  on ``hold`` (alarm) or to ``finish_no_successor`` (warn), with the figures and what the ledger
  does (:func:`cost_density_acted`; the norm-based warning of the same node gives way to it).

Signals are returned as plain tuples in ``Signal``'s field order (kind, task_id, node, since,
severity, evidence) so this module does not import ``store.reading.signals``, which calls it.
"""

from __future__ import annotations

from dataclasses import replace

from store.judges import budget as budget_mod
from store.judges import density
from store.storage import sql
from store.parks import conditions as wc
from store.clock import duration_text
from store.storage.core import LedgerCore
from store.ledger import quotas
from store.mind import patterns as failure_patterns
from store.mind import signals as mind_signals
from store.views import TaskView

BUDGET_INSUFFICIENT_NODES = 20
QUOTA_WAIT = "quota_wait"  # a waiting state shown as a signal, never counted as a warning (console/model.py)
PARK_EXPIRY_S = 48 * 3600.0  # a park without an until asks to be re-confirmed after this long

SignalTuple = tuple[str, str, "str | None", "float | None", str, str]


def extra(ledger: LedgerCore, task: TaskView, now: float, thresholds: object = None) -> list[SignalTuple]:
    """``wake``, ``budget_insufficient`` and ``park_expired`` (no until) signals of ``task`` (a TaskView)."""
    if task.status not in ("active", "parked"):
        return []
    expiry = float(getattr(thresholds, "park_expiry_s", PARK_EXPIRY_S))
    out = wake_signals(ledger, task, now)
    out += park_expiry_signals(ledger, task, now, expiry)
    out += budget_insufficient(ledger, task, now)
    out += cost_density_acted(ledger, task)
    out += mind_signals.signals(task, now)  # drift_suspected, alignment_due (store/mind/signals.py)
    out += quota_waits(ledger, task, now)
    if task.status == "active":
        out += failure_patterns.signals(ledger, task.task_id)  # store/mind/patterns.py
    return out


# ---------------------------------------------------------------------- shared quotas
def quota_waits(ledger: LedgerCore, task: TaskView, now: float) -> list[SignalTuple]:
    """``quota_wait`` (info): a ready node a claim passes over because a quota it draws on is full
    (store/ledger/quotas.py). Not a stall: the node holds no lease and its clocks stand still."""
    if task.status != "active":
        return []
    waits = quotas.waiting(ledger, task.task_id, now)
    out: list[SignalTuple] = [(QUOTA_WAIT, task.task_id, w.node, None, "info", quotas.wait_text(w, now))
                              for w in waits[:quotas.WAIT_NODES]]
    if len(waits) > quotas.WAIT_NODES:
        out.append((QUOTA_WAIT, task.task_id, None, None, "info",
                    f"more than {quotas.WAIT_NODES} ready nodes wait on a quota (serialised by quota policy)"))
    return out


# ---------------------------------------------------------------------- cost density the ledger acts on
def cost_density_acted(ledger: LedgerCore, task: TaskView) -> list[SignalTuple]:
    """``cost_density`` for running nodes on which the ledger acts (``Budget(density_limit=)``,
    store/ledger/cost.py): ``hold`` (alarm: nothing else of the task is dispatched) and
    ``finish_no_successor`` (warn: its successors will be parked). It stands in for the plain
    norm-based ``cost_density`` warning of the same node."""
    if task.status != "active" or not getattr(task, "density_limit", None):
        return []
    limit = density.limit_for(task.density_limit)
    out: list[SignalTuple] = []
    for key, tokens, units_done, units_total, beat, verdict in sql.fetch_all(
            ledger.db, "SELECT key, tokens_used, units_done, units_total, heartbeat_at, density FROM node "
                       "WHERE task_id = ? AND status = 'running' AND density IS NOT NULL ORDER BY position",
            [task.task_id]):
        # the figures as they are now, under the verdict the ledger recorded (what it acts on)
        j = replace(density.judge(tokens, units_done, units_total, limit), verdict=verdict)
        severity = "alarm" if verdict == density.HOLD else "warn"
        out.append(("cost_density", task.task_id, key, beat, severity, j.evidence(key)))
    return out


# ---------------------------------------------------------------------- wake
def wake_signals(ledger: LedgerCore, task: TaskView, now: float) -> list[SignalTuple]:
    out: list[SignalTuple] = []
    for node, entry in wc.targets(task.wake_state):
        if node is None and task.status != "parked":
            continue
        if node is not None:
            if sql.scalar(ledger.db, "SELECT status FROM node WHERE task_id = ? AND key = ?",
                          [task.task_id, node]) != "parked":
                continue
        hit = None
        for cond in entry.get("conditions", ()):
            files = {cond["target"]: wc.file_changed(cond)} if cond.get("kind") == "file" else None
            hit = wc.met(ledger, task.task_id, cond, now, files)
            if hit is not None:
                break
        if hit is None:
            continue
        since, evidence = hit
        what = f"node {node}" if node else f"task {task.task_id}"
        tail = f"resume {what}"
        if entry.get("auto_resume_failed"):
            tail = f"the automatic resume failed ({entry['auto_resume_failed']}): resume {what} by hand"
        elif entry.get("auto_resume"):
            tail = (f"{what} resumes on its own at the next wake check (the console, warden check-wakes) "
                    "or resume it now")
        out.append(("wake", task.task_id, node, since, "alarm", f"wake condition met: {evidence}: {tail}"))
    return out


# ---------------------------------------------------------------------- parks without an until
def park_expiry_signals(ledger: LedgerCore, task: TaskView, now: float, expiry: float) -> list[SignalTuple]:
    out: list[SignalTuple] = []
    if expiry <= 0:
        return out
    if task.status == "parked" and task.park_until is None and task.parked_at is not None \
            and task.parked_at + expiry <= now:
        out.append(("park_expired", task.task_id, None, task.parked_at + expiry, "warn",
                    f"parked {duration_text(now - task.parked_at)} ago without an until (past the "
                    f"{duration_text(expiry)} limit): re-confirm the park or resume"))
    for key, parked_at in sql.fetch_all(ledger.db, "SELECT key, parked_at FROM node WHERE task_id = ? "
                                                   "AND status = 'parked' AND park_until IS NULL AND parked_at <= ? "
                                                   "ORDER BY position", [task.task_id, now - expiry]):
        out.append(("park_expired", task.task_id, key, parked_at + expiry, "warn",
                    f"node parked {duration_text(now - parked_at)} ago without an until (past the "
                    f"{duration_text(expiry)} limit): re-confirm the park or resume"))
    return out


# ---------------------------------------------------------------------- admission by estimate
def budget_insufficient(ledger: LedgerCore, task: TaskView, now: float) -> list[SignalTuple]:
    """Ready pending nodes a claim passes over because their estimate does not fit."""
    if task.status != "active" or not (task.token_cap or task.wall_cap_s):
        return []
    ratio = budget_mod.usage_ratio(task.tokens_used, task.token_cap, task.wall_used_s, task.wall_cap_s)
    if budget_mod.gate(ratio, task.soft_ratio) in ("hard", "stop"):
        return []  # the budget gate already holds every such node back (budget_hard / budget_stop)
    tokens_left, wall_left = budget_mod.left(task.tokens_used, task.token_cap, task.wall_used_s, task.wall_cap_s)
    tests, params = [], []
    if tokens_left is not None:
        tests.append(f"n.est_tokens * {budget_mod.TOKEN_MARGIN} > ?")
        params.append(float(tokens_left))
    if wall_left is not None:
        tests.append(f"n.est_wall_s * {budget_mod.WALL_MARGIN} > ?")
        params.append(float(wall_left))
    rows = sql.fetch_all(
        ledger.db,
        "SELECT n.key, n.est_tokens, n.est_wall_s FROM node n WHERE n.task_id = ? AND n.status = 'pending' "
        f"AND NOT n.always_admit = {sql.true(ledger.db)} AND ({' OR '.join(tests)}) "
        "AND NOT EXISTS (SELECT 1 FROM edge e JOIN node d ON d.id = e.src_id WHERE e.dst_id = n.id "
        "AND d.status NOT IN ('succeeded', 'abandoned')) ORDER BY n.position LIMIT ?",
        [task.task_id, *params, BUDGET_INSUFFICIENT_NODES + 1])
    out: list[SignalTuple] = []
    for key, est_tokens, est_wall_s in rows[:BUDGET_INSUFFICIENT_NODES]:
        short = budget_mod.shortfall(est_tokens, est_wall_s, tokens_left, wall_left)
        out.append(("budget_insufficient", task.task_id, key, None, "warn", _evidence(
            est_tokens, est_wall_s, tokens_left, wall_left, short)))
    if len(rows) > BUDGET_INSUFFICIENT_NODES:
        out.append(("budget_insufficient", task.task_id, None, None, "warn",
                    f"more than {BUDGET_INSUFFICIENT_NODES} ready nodes do not fit in what is left of the budget"))
    return out


def _evidence(est_tokens: float | None, est_wall_s: float | None, tokens_left: float | None, wall_left: float | None,
              short: dict[str, float]) -> str:
    parts = []
    if "tokens" in short and tokens_left is not None and est_tokens is not None:
        need = est_tokens * budget_mod.TOKEN_MARGIN
        parts.append(f"needs {need:,.0f} tokens (est {int(est_tokens):,} × {budget_mod.TOKEN_MARGIN:g}), "
                     f"{max(tokens_left, 0):,.0f} left: short {short['tokens']:,.0f} tokens")
    if "wall_s" in short and wall_left is not None and est_wall_s is not None:
        need = est_wall_s * budget_mod.WALL_MARGIN
        parts.append(f"needs {duration_text(need)} of wall clock (est {duration_text(est_wall_s)} × "
                     f"{budget_mod.WALL_MARGIN:g}), {duration_text(max(wall_left, 0))} left: short "
                     f"{duration_text(short['wall_s'])}")
    return "; ".join(parts) + ": not claimed (raise the cap, lower the estimate, or narrow the task)"

