"""Each node judged against its own normal: what healthy nodes of its kind (and its agent) do is
learnt from finished nodes and from alarms an operator marked healthy (the ``healthy`` action:
previewed, confirmed, recorded with who and why, audited, reported by ``warden status``); the loop
alarms — the operator's signal and the heartbeat's answer alike — come only past that normal, and
say how far the node is from it."""

from __future__ import annotations

import json

import pytest

from console.cli import main as warden
from store import NodeSpec
from store.errors import Refused, StaleRevision
from store.judges.norms import MIN_NODES
from store.reading import signals as S
from tests.support.loop_alarms import agrees, loops, start


# ---------------------------------------------------------------------- the operator teaches
def _looping(ledger, clock, c, times=5):
    for _ in range(times):
        clock.advance(5)
        ledger.heartbeat(c, action="gh run view 42", result="status: queued")


def _marked_normal(ledger, clock):
    """``MIN_NODES`` ci_watch nodes of w1, each looping on one poll, each marked healthy by bob."""
    for i in range(MIN_NODES):
        c = start(ledger, task=f"t{i}", kind="ci_watch")
        ledger.heartbeat(c, action="gh run view 42", result=f"status: queued ({i})")
        _looping(ledger, clock, c)
        ledger.apply(ledger.plan("healthy", {"task_id": f"t{i}", "node": "a", "reason": "by design"}), operator="bob")


def test_marking_an_alarm_healthy_clears_it_teaches_its_kind_and_is_audited(ledger, clock, capsys):
    c = start(ledger, kind="ci_watch")
    ledger.heartbeat(c, action="gh run view 42", result="status: queued (3 jobs)")
    with pytest.raises(Exception, match="raises no loop alarm"):
        ledger.plan("healthy", {"task_id": "t", "node": "a", "reason": "polls by design"})
    _looping(ledger, clock, c)
    assert loops(ledger)
    plan = ledger.plan("healthy", {"task_id": "t", "node": "a", "reason": "polls CI by design"})
    assert plan.params.alarm == "repeating" and plan.params.kind == "ci_watch"
    ledger.apply(plan, operator="alice")
    assert loops(ledger) == []  # judged afresh from the mark
    audit = [e for e in ledger.events(task_id="t") if e.kind == "operator.healthy"]
    assert len(audit) == 1 and audit[0].actor == "alice"
    # warden status says what was taught
    assert warden(["status", "--ledger", ledger.target, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["marked_healthy"] == [{"kind": "ci_watch", "marked": 1, "finished": 0}]
    assert warden(["status", "--ledger", ledger.target]) == 0
    assert "loop alarms marked healthy: 1 (ci_watch 1)" in capsys.readouterr().out
    # the same stretch again alarms again (one mark is not yet the kind's normal)
    _looping(ledger, clock, c)
    assert loops(ledger)


def test_a_kind_learns_its_normal_from_marks(ledger, clock):
    _marked_normal(ledger, clock)
    c = start(ledger, task="next", kind="ci_watch")
    ledger.heartbeat(c, action="gh run view 42", result="status: queued (x)")
    _looping(ledger, clock, c)
    assert loops(ledger, task="next") == []  # five polls of the same status are this kind's normal now
    _looping(ledger, clock, c, times=20)
    found = loops(ledger, task="next")
    assert found and all("healthy ci_watch nodes of w1 " in s.evidence and f"{MIN_NODES} marked healthy"
                         in s.evidence for s in found), [s.evidence for s in found]
    # another kind did not learn it
    c = start(ledger, task="other", kind="build")
    ledger.heartbeat(c, action="gh run view 42", result="status: queued (y)")
    _looping(ledger, clock, c)
    assert loops(ledger, task="other")


def test_a_kind_learns_its_normal_from_finished_nodes(ledger, clock):
    def quiet_node(task, quiet):
        c = start(ledger, task=task, kind="crawl")
        clock.advance(5)
        ledger.heartbeat(c, action="fetch /index", result="found 40 links")
        for j in range(quiet):  # pages that teach nothing new, then a find
            clock.advance(5)
            ledger.heartbeat(c, action=f"fetch /p{j}", result="404 Not Found")
        clock.advance(5)
        ledger.heartbeat(c, action="fetch /docs", result="found the API reference: 12 endpoints")
        return c

    for i in range(MIN_NODES):
        ledger.commit(quiet_node(f"h{i}", 6), output={"ok": i})
    c = start(ledger, task="next", kind="crawl")
    ledger.heartbeat(c, action="fetch /index", result="found 40 links")
    told = []
    for j in range(9):  # 6 quiet fetches are what healthy crawl nodes do; the 9th is past it
        clock.advance(5)
        told.append(agrees(ledger, ledger.heartbeat(c, action=f"fetch /q{j}", result="404 Not Found"), "next").stall)
    assert told[:6] == [None] * 6 and told[-1] == "no_new_info", told  # the heartbeat's answer moved with it
    (sig,) = loops(ledger, task="next")
    assert sig.kind == "no_new_info" and "healthy crawl nodes of w1 go at most 5 observations without news" in \
        sig.evidence and f"{MIN_NODES} finished)" in sig.evidence, sig.evidence
    assert "; this node: 8 without news" in sig.evidence, sig.evidence  # how far it is from its kind's normal
    # without that history the same stretch alarms at the defaults (another kind, nothing finished)
    c = start(ledger, task="fresh", kind="crawl_new")
    ledger.heartbeat(c, action="fetch /index", result="found 40 links")
    for j in range(6):
        clock.advance(5)
        p = ledger.heartbeat(c, action=f"fetch /q{j}", result="404 Not Found")
    assert p.stall == "no_new_info" and "healthy" not in p.stall_evidence


def test_a_norm_never_brings_an_alarm_earlier(ledger, clock):
    for i in range(MIN_NODES):  # healthy nodes that brought news at every step
        c = start(ledger, task=f"h{i}", kind="busy")
        for j in range(4):
            clock.advance(5)
            ledger.heartbeat(c, action=f"read part {j}", result=f"part {j} of {i}: {j * 17 + i} new facts")
        ledger.commit(c, output=i)
    c = start(ledger, task="next", kind="busy")
    ledger.heartbeat(c, action="read part 0", result="part 0: 3 new facts")
    told = []
    for _ in range(4):
        clock.advance(5)
        told.append(agrees(ledger, ledger.heartbeat(c, action="gh run view 42", result="status: queued"), "next").stall)
    assert told == [None, None, "repeating", "repeating"], told  # as without a norm: 3 alike in a row
    assert "healthy busy nodes of w1 repeat one observation at most 1 time in a row" in \
        loops(ledger, "next")[0].evidence


def test_mark_healthy_is_refused_where_it_means_nothing_and_stale_once_claimed_again(ledger, clock):
    c = start(ledger, kind="ci_watch")
    ledger.add_nodes("t", [NodeSpec("later", "ci_watch", deps=("a",))])
    with pytest.raises(Refused, match="node later is pending: only a running node"):
        ledger.plan("healthy", {"task_id": "t", "node": "later", "reason": "r"})
    with pytest.raises(Refused, match="reason"):
        ledger.plan("healthy", {"task_id": "t", "node": "a", "reason": " "})
    ledger.heartbeat(c, action="gh run view 42", result="status: queued (3 jobs)")
    _looping(ledger, clock, c)
    plan = ledger.plan("healthy", {"task_id": "t", "node": "a", "reason": "polls by design"})
    assert any("ci_watch" in w for w in plan.warnings) and plan.changes == {}
    clock.advance(400)  # the lease ran out: another agent claims it (a new attempt, its version moved)
    assert ledger.claim("t", "w2", lease_s=300) is not None
    with pytest.raises(StaleRevision):
        ledger.apply(plan, operator="alice")
    assert ledger.node("t", "a").healthy_at is None


def test_warden_healthy_previews_then_applies_with_who_and_why(ledger, clock, capsys):
    c = start(ledger, kind="ci_watch")
    ledger.heartbeat(c, action="gh run view 42", result="status: queued (3 jobs)")
    _looping(ledger, clock, c)
    target = ["--ledger", ledger.target]
    assert warden(["healthy", "t", "a", "--reason", "polls CI by design", "--dry-run", "--json", *target]) == 0
    preview = json.loads(capsys.readouterr().out)
    assert preview["action"] == "healthy" and preview["params"]["alarm"] == "repeating", preview
    assert loops(ledger)  # a preview changes nothing
    assert warden(["healthy", "t", "a", "--yes", *target]) == 2  # the reason is required
    capsys.readouterr()
    assert warden(["healthy", "t", "a", "--reason", "polls CI by design", "--yes", "--operator", "carol", *target]) == 0
    capsys.readouterr()
    assert ledger.node("t", "a").healthy_at is not None  # (the CLI's clock is the machine's: not this test's)
    (audit,) = [e for e in ledger.events(task_id="t") if e.kind == "operator.healthy"]
    assert audit.actor == "carol" and "polls CI by design" in json.dumps(audit.payload)
    ledger.add_nodes("t", [NodeSpec("later", "ci_watch", deps=("a",))])
    assert warden(["healthy", "t", "later", "--reason", "r", "--yes", *target]) != 0  # one line, nothing written
    err = capsys.readouterr().err
    assert "node later is pending" in err and "Traceback" not in err


def test_the_consoles_analysis_judges_against_the_norm_and_the_mark_as_status_does(ledger, clock):
    from store.reading.analysis import TaskAnalysis

    _marked_normal(ledger, clock)
    c = start(ledger, task="next", kind="ci_watch")
    an = TaskAnalysis(ledger, "next")
    cursor = ledger.last_event_id()
    ledger.heartbeat(c, action="gh run view 42", result="status: queued (x)")
    _looping(ledger, clock, c, times=25)
    for ev in ledger.events(cursor, task_id="next"):
        an.apply_event(ev, ledger.nodes("next", [ev.node]) if ev.node and ev.kind != "node.heartbeat" else [])
    assert an.signals() == S.signals_for_graph(ledger, ledger.graph("next"))
    assert any("5 marked healthy" in s.evidence for s in an.signals()), an.signals()
    cursor = ledger.last_event_id()  # marked healthy: the analysis reads the node again and clears it too
    ledger.apply(ledger.plan("healthy", {"task_id": "next", "node": "a", "reason": "by design"}), operator="bob")
    for ev in ledger.events(cursor, task_id="next"):
        an.apply_event(ev, ledger.nodes("next", [ev.node]) if ev.node and ev.kind != "node.heartbeat" else [])
    assert an.signals() == S.signals_for_graph(ledger, ledger.graph("next"))
    assert not [s for s in an.signals() if s.kind in ("no_new_info", "repeating")]


def test_a_signal_pass_reads_the_kinds_norms_only_when_a_node_loops(ledger, clock, monkeypatch):
    """``warden status`` judges every task: where nothing loops, no norm is read (a norm only widens
    the loop alarms); where a node loops, its kinds' norms are read once for the pass."""
    from store.ledger import norms
    from store.reading.analysis import TaskAnalysis

    reads = []
    monkeypatch.setattr(S, "read_norms", lambda core, kinds: reads.append(set(kinds)) or norms.read_norms(core, kinds))
    c = start(ledger, kind="ci_watch")
    ledger.heartbeat(c, action="gh run view 42", result="status: queued (3 jobs)")
    assert S.signals_for_task(ledger, ledger.task("t")) == TaskAnalysis(ledger, "t").signals()
    assert reads == []
    _looping(ledger, clock, c)
    assert loops(ledger) and reads == [{"ci_watch"}]
    assert TaskAnalysis(ledger, "t").signals() and reads == [{"ci_watch"}] * 2
