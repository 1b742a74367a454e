"""What a preview promises, and whether applying it now still keeps that promise.

A preview is a promise about what the action will do to the work the operator looked at — not a
snapshot of every version number. On a busy task agents claim, step, finish, fail and ask while
the operator reads; that is the work going on, and an approved park or abort must go through it.

So at apply, under the task row's lock, when anything the plan was computed at moved, the action
is planned again on the current state with the approved params (``Action.replan``) and the two
plans are compared by the action's own rule (``Action.keeps``, with the shared rules here). When
the differences keep the promise, the current plan is applied and :func:`differences` says what
differed ("2 nodes finished meanwhile (left as they are): a, b; 1 node was claimed meanwhile and
is parked too: c"); when one would make the action do something the operator did not approve, the
apply is refused as stale with that one change named. The rules per action: docs/operations.md
("What a confirmed action applies").

Operator actions applied since the preview are read from the audit (Action rows whose
``revision_after`` is past the plan's revision: every applied action bumps the task revision).
"""

from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple, Sequence

from store.actions.plan import Differed, Plan
from store.clock import iso
from store.jsontypes import JsonObject
from store.storage import sql
from store.storage.core import LedgerCore
from store.text import safe_line

NAMED = 3  # node keys named in one note before "and N more"

# How an audited action reads in a refusal: "node f was rewound by bob at …".
_DONE = {"park": "parked", "resume": "resumed", "narrow": "narrowed", "rewind": "rewound", "abort": "aborted",
         "resolve": "answered", "escalate": "escalated", "compensated": "marked compensated",
         "healthy": "marked healthy"}


class Since(NamedTuple):
    """An action applied to the task since the preview, as its audit row tells it."""

    id: int
    at: float
    operator: str
    action: str
    target: str
    nodes: frozenset[str]  # the nodes it changed
    task_status: tuple[str, str]  # (before, after)

    def done(self) -> str:
        """"rewound by bob at 2027-…Z (action 12)"."""
        verb = _DONE.get(self.action, f"changed by a {self.action}")
        return f"{verb} by {self.operator} at {iso(self.at)} (action {self.id})"


def actions_since(core: LedgerCore, plan: Plan) -> list[Since]:
    """The actions applied to the plan's task after it was computed, oldest first."""
    out = []
    for aid, at, operator, action, target, data in sql.fetch_all(
            core.db, "SELECT id, at, operator, action, target, plan FROM action WHERE task_id = ? "
                     "AND result = 'applied' AND revision_after > ? ORDER BY id", [plan.task_id, plan.revision]):
        shown = sql.json_value(data)
        shown = shown if isinstance(shown, dict) else {}
        changes = shown.get("changes")
        status = shown.get("task_status")
        status = status if isinstance(status, dict) else {}
        out.append(Since(int(aid), float(at), str(operator), str(action), str(target),
                         frozenset(changes) if isinstance(changes, dict) else frozenset(),
                         (str(status.get("from") or ""), str(status.get("to") or ""))))
    return out


def refused(what: str) -> str:
    """A refusal's line: ``what`` changed since the preview."""
    return f"{what} since the preview; review again"


def task_moved(since: Sequence[Since], task_id: str) -> str | None:
    """Another action since the preview changed the task's status: what it was, or None."""
    for s in since:
        if s.task_status[0] != s.task_status[1]:
            return refused(f"task {task_id} was {s.done()}")
    return None


def nodes_touched(since: Sequence[Since], keys: Iterable[str]) -> str | None:
    """Another action since the preview changed one of ``keys``: which and how, or None."""
    wanted = set(keys)
    for s in since:
        hit = sorted(s.nodes & wanted)
        if hit:
            return refused(f"node {hit[0]} was {s.done()}")
    return None


def shared_rule(approved: Plan, current: Plan, since: Sequence[Since]) -> str | None:
    """The rule most actions keep: another action since the preview that changed the task's status,
    or a node this action changes (as previewed or now), refuses; so does a node this action would
    change now that the preview did not show (added since: the graph's shape changed under it).
    What agents did to those nodes meanwhile does not."""
    why = task_moved(since, approved.task_id)
    if why is None:
        why = nodes_touched(since, [*approved.changes, *current.changes])
    if why is None:
        why = unseen(approved, current)
    return why


def unseen(approved: Plan, current: Plan) -> str | None:
    """A node the current plan changes that the preview did not show."""
    for k, (_, to) in current.changes.items():
        if k not in approved.versions and k not in approved.changes:
            return (f"node {k} changed since the preview and this {approved.action} would now make it {to}, "
                    "which the preview did not show; review again")
    return None


# ---------------------------------------------------------------------- what differed
class _Seen(NamedTuple):
    key: str
    previewed: str | None  # status at the preview (None: not there yet)
    promised: str | None  # what the preview said it would become
    found: str | None  # status at the apply
    applied: str | None  # what the apply made it


# (singular, plural) for what happened to a node meanwhile, by its status found at the apply
_HAPPENED = {
    "added": ("was added", "were added"), "running": ("was claimed", "were claimed"),
    "succeeded": ("finished", "finished"), "failed": ("failed", "failed"),
    "blocked": ("asked a human", "asked a human"), "pending": ("went back to pending", "went back to pending"),
    "parked": ("was parked", "were parked"), "abandoned": ("was abandoned", "were abandoned"),
}
# what the apply made it, when that is not what it was found as
_MADE = {"parked": "parked", "abandoned": "abandoned", "pending": "reset", "blocked": "blocked",
         "succeeded": "marked succeeded"}


def _named(keys: Sequence[str]) -> str:
    shown = ", ".join(safe_line(k, limit=80) for k in keys[:NAMED])
    return shown + (f" and {len(keys) - NAMED} more" if len(keys) > NAMED else "")


def _note(happened: str, outcome: str | None, keys: Sequence[str]) -> str:
    one = len(keys) == 1
    verb = _HAPPENED.get(happened, ("changed", "changed"))[0 if one else 1]
    noun = "node" if one else "nodes"
    if outcome is None:
        tail = " (left as it is)" if one else " (left as they are)"
    else:
        tail = f" and {'is' if one else 'are'} {outcome} too"
    return f"{len(keys)} {noun} {verb} meanwhile{tail}: {_named(keys)}"


def differences(core: LedgerCore, approved: Plan, applied: Plan) -> Differed:
    """What the plan about to be applied (``applied``: planned again at the apply) differs by from
    the one the operator approved: per node, and the handoffs, effects and task status around them."""
    keys = list(dict.fromkeys([*approved.statuses, *approved.changes, *applied.statuses, *applied.changes]))
    unknown = [k for k in keys if k not in applied.statuses and k not in applied.changes]
    found_now = _statuses(core, applied.task_id, unknown) if unknown else {}
    seen: list[_Seen] = []
    for k in keys:
        previewed = approved.statuses.get(k) or (approved.changes[k][0] if k in approved.changes else None)
        promised = approved.changes[k][1] if k in approved.changes else previewed
        found = applied.changes[k][0] if k in applied.changes else applied.statuses.get(k) or found_now.get(k)
        made = applied.changes[k][1] if k in applied.changes else found
        if (previewed, promised) == (found, made):
            continue
        seen.append(_Seen(k, previewed, promised, found, made))
    groups: dict[tuple[str, str | None], list[str]] = {}
    for s in seen:
        happened = "added" if s.previewed is None else (s.found or "gone")
        outcome = _MADE.get(s.applied or "", s.applied) if s.key in applied.changes else None
        groups.setdefault((happened, outcome), []).append(s.key)
    notes = [_note(h, o, ks) for (h, o), ks in groups.items()]
    notes += _around(approved, applied)
    if not notes:
        return Differed()
    return Differed(notes=tuple(notes), preview=_preview(approved), nodes=tuple(
        {"node": s.key, "previewed": s.previewed, "promised": s.promised, "found": s.found, "applied": s.applied}
        for s in seen))


def noted(approved: Plan, differed: Differed, notes: Sequence[str]) -> Differed:
    """``differed`` with the action's own notes (``Outcome.notes``) added."""
    if not notes:
        return differed
    return Differed(notes=(*differed.notes, *notes), nodes=differed.nodes,
                    preview=differed.preview or _preview(approved))


def _preview(approved: Plan) -> JsonObject:
    return {"revision": approved.revision, "planned_at": iso(approved.planned_at), "summary": approved.summary()}


def _around(approved: Plan, applied: Plan) -> list[str]:
    """The task's status, handoffs and effects that differ."""
    out = []
    (was, to), (now, after) = approved.task_status, applied.task_status
    if was != now:
        out.append(f"the task was {was}, found {now}" + (f"; it ends {after}" if after != to else ""))
    elif to != after:
        out.append(f"the task ends {after}, not {to}")
    more = [h for h in applied.handoffs_withdrawn if h not in approved.handoffs_withdrawn]
    gone = [h for h in approved.handoffs_withdrawn if h not in applied.handoffs_withdrawn]
    if more:
        out.append(f"{len(more)} handoff(s) opened meanwhile {'is' if len(more) == 1 else 'are'} withdrawn too: "
                   f"{_named(more)}")
    if gone:
        out.append(f"{len(gone)} handoff(s) closed meanwhile (nothing to withdraw): {_named(gone)}")
    was_effects = {e.get("effect_key") for e in approved.effects_not_undone}
    new = [str(e.get("effect_key")) for e in applied.effects_not_undone if e.get("effect_key") not in was_effects]
    if new:
        out.append(f"{len(new)} effect(s) confirmed meanwhile, not undone: {_named(new)}")
    return out


def _statuses(core: LedgerCore, task_id: str, keys: Sequence[str]) -> Mapping[str, str]:
    out: dict[str, str] = {}
    for chunk in sql.chunks(list(keys)):
        for k, status in sql.fetch_all(core.db, f"SELECT key, status FROM node WHERE task_id = ? AND key IN "
                                                f"({sql.marks(len(chunk))})", [task_id, *chunk]):
            out[str(k)] = str(status)
    return out


__all__ = ["Since", "actions_since", "differences", "nodes_touched", "noted", "refused", "shared_rule", "task_moved",
           "unseen"]
