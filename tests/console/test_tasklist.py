"""The task list's model at fleet size (console/tasklist.py): the urgency order, the
filter and the summary stay what a from-scratch computation says after any sequence of changes,
and a change costs the same whatever the number of tasks (one row looked at, not all)."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from console.tasklist import ALIVE_AFTER_WRITE_S, RATE_SHOWN_EVERY_S, TaskListModel, severities
from store.views import EventView, TaskView

T0 = 1_800_000_000.0
STATUSES = ["active", "active", "active", "parked", "completed", "failed", "aborted"]


def view(tid: str, **kw) -> TaskView:
    base = dict(task_id=tid, title=f"title of {tid}", workflow="", workflow_version="", status="active", revision=1,
                inputs=None, constraints=(), preconditions={}, token_cap=None, wall_cap_s=None, soft_ratio=0.7,
                tokens_used=0, started_at=None, wall_used_s=0.0, max_claims=5, max_repairs=3, repair_count=0,
                claim_count=0, parked_at=None, park_reason=None, park_until=None, wake_on=None, created_at=T0,
                updated_at=T0, finished_at=None)
    base.update(kw)
    return TaskView(**base)


def random_view(rng: random.Random, tid: str) -> TaskView:
    cap = rng.choice([None, 1000, 10_000])
    return view(tid, status=rng.choice(STATUSES), token_cap=cap, tokens_used=rng.randint(0, 12_000) if cap else rng.randint(0, 50),
                handoffs_open=rng.choice([0, 0, 0, 1, 2]), counts={"pending": rng.randint(0, 9), "succeeded": rng.randint(0, 9)},
                title=rng.choice(["nightly index", "report", "fix the flaky test"]), origin=rng.choice(["python", "mcp"]))


def random_analysis(rng: random.Random) -> tuple[dict, list]:
    eta = {"p50_s": None, "p80_s": rng.choice([None, 30.0, 600.0, 7200.0]), "samples": 3, "confidence": "low", "why": []}
    sigs = [{"kind": "stall", "severity": rng.choice(["alarm", "warn"])} for _ in range(rng.choice([0, 0, 1, 2]))]
    return eta, sigs


def expected(model: TaskListModel) -> list[str]:
    """The display order computed from scratch."""
    terms = model.filter_text.casefold().split()

    def shown(v: TaskView) -> bool:
        return all(t in v.task_id.casefold() or t in v.title.casefold() or v.status.startswith(t) or t == v.origin
                   for t in terms)

    def key(i: int):
        r = model.rows[i]
        v = r.view
        if model.order == "created":
            return (i,)
        if v.status in ("completed", "failed", "aborted"):
            return (1, i)
        alarms, warns, gate, ratio = severities(v, r.signals)
        p80 = r.eta.get("p80_s")
        steps = (int(ratio * 10), int(math.log2(p80)) if p80 is not None and p80 >= 1 else (-1 if p80 is None else 0))
        return (0, -alarms, -v.handoffs_open, -{"stop": 3, "hard": 2, "soft": 1}.get(gate, 0), -steps[0], -warns,
                -steps[1], i)

    order = sorted((i for i, r in enumerate(model.rows) if shown(r.view)), key=key)
    return [model.rows[i].view.task_id for i in order]


def shown(model: TaskListModel) -> list[str]:
    return [model.row_at(p).view.task_id for p in range(model.row_count())]


def check(model: TaskListModel) -> None:
    assert shown(model) == expected(model)
    for p in range(model.row_count()):
        assert model.position_of_task(model.row_at(p).view.task_id) == p
    s = model.summary
    views = [r.view for r in model.rows]
    assert s.handoffs == sum(v.handoffs_open for v in views)
    assert s.tokens == sum(v.tokens_used for v in views)
    assert s.alarms == sum(severities(r.view, r.signals)[0] for r in model.rows)
    by: dict[str, int] = {}
    for v in views:
        by[v.status] = by.get(v.status, 0) + 1
    assert s.by_status == by


def repaint_covers(model: TaskListModel, before: list[str], paint, changed: set[str]) -> None:
    """What the change asks to repaint covers every position whose row is another task now, or
    is a task that changed (the screen repaints nothing else)."""
    after = shown(model)
    if paint.reshaped:
        return
    assert len(after) == len(before)  # the count did not change without ``reshaped``
    span = paint.span if paint.span is not None else range(0)
    for p, tid in enumerate(after):
        if tid != before[p] or tid in changed:
            assert p in paint.rows or p in span, (p, tid, before[p])


@pytest.mark.parametrize("seed", range(12))
def test_order_filter_and_summary_stay_exact_through_any_changes(seed):
    rng = random.Random(seed)
    model = TaskListModel(lambda: T0)
    model.load([random_view(rng, f"t{i:03d}") for i in range(rng.randint(0, 40))])
    check(model)
    for _ in range(300):
        op = rng.random()
        n = len(model.rows)
        if op < 0.45 and n:
            tids = {f"t{rng.randrange(n):03d}" for _ in range(rng.choice([1, 1, 2, 5]))}
            before = shown(model)
            paint = model.update([random_view(rng, tid) for tid in sorted(tids)])
            repaint_covers(model, before, paint, tids)
            if len(tids) == 1 and not paint.reshaped and paint.span is None:  # repainted where it is
                p = model.position_of_task(next(iter(tids)))
                assert paint.rows == ([p] if p is not None else [])
        elif op < 0.75 and n:
            tids = {f"t{rng.randrange(n):03d}" for _ in range(rng.choice([1, 1, 3]))}
            before = shown(model)
            paint = model.set_analyses([(tid, *random_analysis(rng)) for tid in sorted(tids)])
            assert paint.changed <= tids  # a result equal to what the row shows changes nothing
            repaint_covers(model, before, paint, set(paint.changed))
        elif op < 0.82:
            model.update([random_view(rng, f"t{n:03d}")])  # a new task
        elif op < 0.9:
            model.set_filter(rng.choice(["", "", "t01", "nightly", "mcp", "act", "rep t00", "zzz"]))
        elif op < 0.97:
            model.set_order(rng.choice(["created", "urgency"]))
        else:
            model.load([random_view(rng, f"t{i:03d}") for i in range(n)])  # the ledger read afresh
        check(model)


def test_urgency_puts_alarms_then_handoffs_then_budget_first_and_finished_tasks_last():
    model = TaskListModel(lambda: T0)
    model.load([
        view("done", status="completed", handoffs_open=3),
        view("quiet"),
        view("waiting", handoffs_open=2),
        view("spent", token_cap=1000, tokens_used=1050),  # past its cap: the hard gate counts as an alarm
        view("soft", token_cap=1000, tokens_used=750),
        view("stuck"),
        view("long"),
    ])
    model.set_analysis("stuck", None, [{"kind": "stall", "severity": "alarm"}, {"kind": "x", "severity": "alarm"}])
    model.set_analysis("long", {"p80_s": 9000.0}, [])
    model.set_order("urgency")
    assert shown(model) == ["stuck", "spent", "waiting", "soft", "long", "quiet", "done"]
    paint = model.update([view("quiet", handoffs_open=5)])
    assert paint.span == range(2, 6) and not paint.reshaped  # from 5th to 3rd: positions 2..5 shifted
    assert shown(model)[:3] == ["stuck", "spent", "quiet"]
    model.set_order("created")
    assert shown(model) == ["done", "quiet", "waiting", "spent", "soft", "stuck", "long"]


def test_the_filter_matches_every_word_against_id_title_status_and_origin():
    model = TaskListModel(lambda: T0)
    model.load([view("fix-1", origin="mcp"), view("fix-2", status="parked"), view("nightly", title="index rebuild")])
    for text, want in [("fix", ["fix-1", "fix-2"]), ("mcp", ["fix-1"]), ("park", ["fix-2"]), ("fix park", ["fix-2"]),
                       ("REBUILD", ["nightly"]), ("nothing", [])]:
        model.set_filter(text)
        assert shown(model) == want, text
    model.set_filter("fix")
    paint = model.update([view("nightly", title="fix the index")])  # now matches: shown
    assert paint.reshaped and shown(model) == ["fix-1", "fix-2", "nightly"]


def test_a_change_looks_at_one_row_whatever_the_number_of_tasks(monkeypatch):
    """5,000 tasks: an update or an analysis result computes one key and one filter match — the
    same as with 50 — and never re-sorts or re-filters the list."""
    calls = {"key": 0, "match": 0}
    real_key, real_match = TaskListModel._key, TaskListModel._matches

    def key(self, i):
        calls["key"] += 1
        return real_key(self, i)

    def match(self, v):
        calls["match"] += 1
        return real_match(self, v)

    monkeypatch.setattr(TaskListModel, "_key", key)
    monkeypatch.setattr(TaskListModel, "_matches", match)
    rng = random.Random(5)
    for n in (50, 5000):
        model = TaskListModel(lambda: T0)
        model.load([random_view(rng, f"t{i:04d}") for i in range(n)])
        model.set_order("urgency")
        model.set_filter("t")
        for _ in range(20):
            calls.update(key=0, match=0)
            model.update([random_view(rng, f"t{rng.randrange(n):04d}")])
            assert calls == {"key": 1, "match": 1}
            calls.update(key=0, match=0)
            eta, sigs = random_analysis(rng)
            model.set_analysis(f"t{rng.randrange(n):04d}", eta, sigs)
            assert calls == {"key": 1, "match": 1}


def test_spend_rate_and_agents_alive():
    mono = [100.0]
    wall = [T0]
    model = TaskListModel(lambda: wall[0], monotonic=lambda: mono[0])
    model.load([view("a", tokens_used=1000), view("b", tokens_used=0)])
    assert model.summary.spend_rate(mono[0]) is None
    mono[0] += 30
    model.update([view("b", tokens_used=600)])
    assert model.summary.spend_rate(mono[0]) == pytest.approx(20.0)  # 600 tokens in 30 s
    mono[0] += 90
    model.update([view("b", tokens_used=660)])
    mono[0] += 1
    model.update([view("a", tokens_used=1060)])
    assert model.summary.spend_rate(mono[0]) == pytest.approx(120 / 91, rel=0.05)  # the last minute or so
    e = lambda actor, at, **p: EventView(1, at, "a", "n", "execution", "node.heartbeat", actor, "", p)  # noqa: E731
    model.agents.seed([("w1", T0 + 300)])
    model.agents.saw([e("w2", T0, lease_until=T0 + 30), e("w3", T0 - 61), dataclasses.replace(e("op", T0), layer="operator")])
    assert model.agents.count(T0) == 2  # w1 holds a lease, w2 wrote just now; w3 is gone; operators are not agents
    assert model.agents.count(T0 + ALIVE_AFTER_WRITE_S + 1) == 1
    assert model.summary_text().startswith("1 agent ")  # one of each, not "1 agents"


def test_the_spend_rate_moves_the_summary_at_most_once_a_second_and_the_rest_at_once():
    """A fleet's every write moves the spend rate's last digits: the summary line would be drawn
    again for each. Its text moves at most every RATE_SHOWN_EVERY_S; counts, alarms and handoffs
    at once."""
    mono = [100.0]
    model = TaskListModel(lambda: T0, monotonic=lambda: mono[0])
    model.load([view("a", tokens_used=0), view("b", tokens_used=0)])
    model.summary_text()
    texts = []
    tokens = 0
    rng = random.Random(7)
    for step in range(40):  # a write every 0.1 s for 4 s, each spending tokens
        mono[0] += 0.1
        tokens += rng.randint(10, 90)
        model.update([view("a", tokens_used=tokens)])
        texts.append(model.summary_text())
    changes = sum(1 for x, y in zip(texts, texts[1:]) if x != y)
    assert 2 <= changes <= 4 / RATE_SHOWN_EVERY_S + 1, (changes, texts)  # once a second, not 39 times
    assert "tokens/min" in texts[-1] and "—" not in texts[-1]
    before = model.summary_text()
    model.update([view("b", status="parked", tokens_used=0)])
    after = model.summary_text()
    assert "1 parked" in after and "1 parked" not in before, "a count moves the line at once"
