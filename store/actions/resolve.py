"""resolve: answer a needs_human handoff — the handoff → resolved (option, answer, by, at); its
node blocked → pending, with the resolution in its next claim's inputs. A failed node asking a
human (work that could not safely run twice, store/ledger/unsafe.py) → pending as a fresh retry,
unless the answer is ``leave_failed``. Two operators racing: one wins, the other is told who did.

The promise (store/actions/promise.py): this answer to this question. Whatever else happened to
the node or the task meanwhile, the answer is recorded and the node goes on from where it is now
(parked meanwhile: it stays parked and runs with the answer once resumed). Refused: the handoff was
answered or withdrawn since the preview, or the task aborted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

from store.storage import sql
from store.clock import iso
from store.storage.db import read_tx
from store.errors import NotFound, Refused
from store.jsontypes import JsonArray, JsonObject
from store.ledger import confirm, unsafe
from store.storage.core import LedgerCore, digest_json
from store.mind import alignment
from store.mind.views import MindState
from store.ledger.rules import HANDOFF, NAME_OPT, TEXT_OPT
from store.validate import HANDOFF_ID_RE, show
from store.actions import planning as pl
from store.actions.action import Action, Command, Flag, NoKey
from store.actions.changes import BUMP, FRESH, REVOKE, ApplyTx, Outcome, set_nodes
from store.actions.identity import agent_refusal
from store.actions.plan import Plan
from store.actions.promise import Since


@dataclass(frozen=True)
class ResolveParams(Action):
    action = "resolve"
    reason_required = False  # the option and answer are the reason
    title = "Resolve"
    key = NoKey("opened on a handoff: enter in the handoff inbox (h)")
    arguments = {"handoff_id": HANDOFF, "option": NAME_OPT, "answer": TEXT_OPT}
    cli = Command("answer a handoff with one of its options", (
        Flag("handoff", "handoff_id", metavar="HANDOFF", help="the handoff's id (warden handoffs lists them)"),
        Flag("--option", "option", metavar="ID", help="one of the handoff's option ids"),
        Flag("--answer", "answer", metavar="TEXT", help="free text for the agent"),
    ), listed_after="handoffs", examples=('warden resolve 12 --option approve',
                                          'warden resolve 12 --option revise --answer "cite the 2024 figures"'))

    handoff: str
    node: str
    option: str | None
    answer: str | None
    question: str

    def to_json(self) -> JsonObject:
        return {"handoff": self.handoff, "node": self.node, "option": self.option, "answer": self.answer,
                "question": self.question}

    def node_target(self, target: str) -> str | None:
        return self.node

    def stale(self, core: LedgerCore, plan: Plan, task: pl.TaskState) -> str | None:
        """The handoff was resolved or withdrawn since the preview (two operators racing: one
        wins, the other is told who did)."""
        return still_open(core, plan)

    def replan(self, core: LedgerCore, plan: Plan) -> Plan:
        return plan_resolve(core, self.handoff, option=self.option, answer=self.answer)

    def refuse_operator(self, core: LedgerCore, plan: Plan, operator: str) -> str | None:
        """An irreversible effect is confirmed by a person, not by an agent of its task
        (store/ledger/confirm.py, store/actions/identity.py)."""
        asked = sql.fetch_all(core.db, "SELECT context, opened_by FROM handoff WHERE id = ?", [int(self.handoff)])
        if not asked or confirm.effect_of(sql.json_value(asked[0][0])) is None:
            return None
        return agent_refusal(core, plan.task_id, operator, f"answering handoff {self.handoff} (an irreversible "
                             "effect)", also=[asked[0][1]])

    def keeps(self, approved: Plan, current: Plan, since: Sequence[Since]) -> str | None:
        """The handoff still open (:meth:`stale`) is the promise."""
        return None

    def apply(self, tx: ApplyTx) -> Outcome:
        # a failed node asking a human (store/ledger/unsafe.py) goes back as a fresh retry
        retry = [tx.ids[k] for k, (a, b) in tx.plan.changes.items() if a == "failed" and b == "pending"]
        set_nodes(tx, [i for i in tx.changed_to("pending") if i not in retry], {"status": "pending", **REVOKE, **BUMP})
        set_nodes(tx, retry, {**FRESH, "error": None, "failure_class": None})
        answered = tx.changed_to("succeeded")  # an alignment check: the option is its verdict
        if answered:
            output = {"verdict": self.option, "notes": self.answer, "by": tx.operator}
            set_nodes(tx, answered, {"status": "succeeded", "output": output, "output_digest": digest_json(output),
                                     "finished_at": tx.now, **REVOKE, **BUMP})
            alignment.on_verdict(tx.core, tx.plan.task_id, alignment.CheckNode(answered[0], self.node, 0), output,
                                 tx.now, tx.operator, MindState.of(tx.task.mind))
        n = sql.execute_count(tx.core.db, "UPDATE handoff SET status = 'resolved', resolution_option = ?, "
                              "resolution_answer = ?, resolved_by = ?, resolved_at = ? WHERE id = ? AND status = 'open'",
                              [self.option, self.answer, tx.operator, tx.now, int(tx.plan.target)])
        if n != 1:  # cannot happen under the write lock after the check; refuse rather than double-resolve
            raise RuntimeError("handoff changed under the write lock")
        return Outcome(task_fields=tx.reopens(), payload={"handoff": tx.plan.target, "option": self.option,
                                                          "answer": self.answer}, settle=True)


class HandoffRow(NamedTuple):
    """What resolving a handoff reads of it."""

    id: int
    task_id: str
    node_id: int
    kind: str
    status: str
    question: str
    options: JsonArray  # [{"id", "label", "consequence"}]
    resolution_option: str | None
    resolved_by: str | None
    resolved_at: float | None


def _read(core: LedgerCore, hid: int) -> HandoffRow | None:
    return sql.fetch_row(core.db, HandoffRow, f"SELECT {sql.columns(HandoffRow)} FROM handoff WHERE id = ?", [hid])


def handoff_row(core: LedgerCore, handoff_id: object) -> HandoffRow:
    if not HANDOFF_ID_RE.fullmatch(str(handoff_id)):  # " 5\n" is not handoff 5
        raise NotFound(f"unknown handoff {show(handoff_id)}")
    row = _read(core, int(str(handoff_id)))
    if row is None:
        raise NotFound(f"unknown handoff {handoff_id!r}")
    return row


def not_open(h: HandoffRow) -> str:
    """Why a handoff cannot be resolved any more (who resolved or withdrew it, when)."""
    if h.status == "resolved":
        return (f"handoff {h.id} was already resolved by {h.resolved_by} at {iso(h.resolved_at)} "
                f"(option {h.resolution_option})")
    if h.status == "withdrawn":
        return f"handoff {h.id} was withdrawn by {h.resolved_by or 'an operator'} at {iso(h.resolved_at)}"
    return f"handoff {h.id} is {h.status}"


def plan_resolve(core: LedgerCore, handoff_id: str, *, option: str | None = None, answer: str | None = None) -> Plan:
    """Resolve a needs_human handoff with one of its options (and an optional answer)."""
    with read_tx(core.db):
        h = handoff_row(core, handoff_id)
        hid = str(h.id)
        task = pl.open_task(core, h.task_id)
        if h.status != "open":
            raise Refused(not_open(h))
        offered = [str(o.get("id")) for o in (h.options or [])]
        option = None if option is None or str(option) == "" else str(option)
        answer = None if answer is None or str(answer).strip() == "" else str(answer)
        if offered:
            if option is None:
                raise Refused(f"handoff {hid} needs --option: one of {', '.join(offered)}")
            if option not in offered:
                raise Refused(f"option {option!r} is not offered by handoff {hid}: one of {', '.join(offered)}")
        elif option is not None:
            raise Refused(f"handoff {hid} offers no options: answer it with --answer TEXT")
        elif answer is None:
            raise Refused(f"handoff {hid} offers no options: answer it with --answer TEXT")
        reason = " — ".join(x for x in (option, answer) if x)
        n = pl.node_by_id(core, h.node_id)
        changes: dict[str, tuple[str, str]] = {}
        warnings = []
        if n.status == "blocked" and h.kind == alignment.KIND:
            changes[n.key] = ("blocked", "succeeded")  # the answer is the check's verdict (store/mind/alignment.py)
        elif n.status == "blocked":
            changes[n.key] = ("blocked", "pending")
        elif n.status == "failed" and option != unsafe.LEAVE_FAILED:
            changes[n.key] = ("failed", "pending")  # run it again: a retry with the person's answer
        elif n.status == "failed":
            warnings.append(f"node {n.key} stays failed: the task fails unless other work can still move")
        elif n.status == "parked":
            warnings.append(f"node {n.key} is parked: it stays parked until resumed, then runs with this resolution")
        else:
            warnings.append(f"node {n.key} is {n.status}: the resolution is recorded for its next claim")
        verdict = option if n.key in changes and changes[n.key][1] == "succeeded" else None
        after = pl.reopened_status(core, task, changes, drifting=None if verdict is None else verdict == "drifting")
        if verdict == "drifting" and pl.reopened_status(core, task, changes, drifting=False) == "completed":
            warnings.append("nothing is left to run, but a drifting verdict keeps the task active (drift_suspected) "
                            "until a replan or a narrow answers it")
        params = ResolveParams(handoff=hid, node=n.key, option=option, answer=answer, question=h.question)
        return pl.make_plan(core, params, task, hid, reason, [n], changes, status_after=after, versions_of=[n],
                            warnings=warnings)


def still_open(core: LedgerCore, plan: Plan) -> str | None:
    """At apply, under the task's lock: why the handoff can no longer be resolved, or None."""
    h = _read(core, int(plan.target))
    if h is None:
        return f"handoff {plan.target} no longer exists"
    return None if h.status == "open" else not_open(h)
