"""console/alerts.py: the pure diff (debounce, baseline, seen) and the hook runner, without Textual."""

from __future__ import annotations

import json
import os
import time
import sys
from pathlib import Path
from typing import Any

from console.alerts import BELL_EVERY_S, REARM_S, Alert, AlertDesk, AlertWatch, run_hook
from store.storage.events import HandoffOpened, OperatorActed
from store.views import EventView
from tests.support.waiting import Deadline

NOW = 1_800_000_000.0


def ev(i: int, event_kind: str, task: str = "t", node: str | None = "n", summary: str = "",
       **payload: Any) -> EventView:
    return EventView(id=i, at=NOW + i, task_id=task, node=node, layer="decision", kind=event_kind, actor="a",
                     summary=summary, payload=payload)


def opened(i: int, hid: str, task: str = "t", node: str = "n") -> EventView:
    said = HandoffOpened(handoff=hid, kind="confirm", options=["yes", "no"], recommendation=None)
    return ev(i, said.KIND, task, node, f"{node} asks a human (confirm): Open the PR?", **said.to_json())


def acted(i: int, action: str, node: str | None, withdrawn: list[str]) -> EventView:
    """An operator action's event as the shared apply writes it (store/actions/apply.py)."""
    did = OperatorActed(action=action, nodes=[node] if node else [], action_id=i, reason="why",
                        revoked_leases=[], handoffs_withdrawn=withdrawn, task_status=["active", "active"], revision=2)
    return ev(i, did.event_kind(), node=node, **did.to_json())


def sig(kind: str, node: str | None = "n", severity: str = "alarm", since: str | None = "2027-01-15T08:00:00.000Z",
        evidence: str = "last 5 observations added 0 new lines") -> dict[str, Any]:
    return {"kind": kind, "task_id": "t", "node": node, "since": since, "severity": severity, "evidence": evidence}


def started(*tasks: str) -> AlertWatch:
    w = AlertWatch()
    w.loaded(tasks)
    for t in tasks:
        assert w.signals(t, [], NOW) == []  # the first analysis: the startup state
    return w


# ---------------------------------------------------------------------- handoffs
def test_a_new_handoff_alerts_once_naming_task_and_node() -> None:
    w = started("t")
    [a] = w.events([opened(10, "7")], NOW)
    assert (a.kind, a.task, a.node, a.handoff, a.severity) == ("handoff", "t", "n", "7", "alarm")
    assert a.summary == "asks a human (confirm): Open the PR?"
    assert "t/n" in a.line() and "Open the PR?" in a.line()
    assert w.open_count == 1
    # the same event read again (a restarted feed), or another event naming the same handoff: nothing
    assert w.events([opened(10, "7")], NOW) == []
    assert w.events([opened(11, "7")], NOW) == []
    assert w.events([ev(12, "node.heartbeat")], NOW) == []
    assert w.open_count == 1


def test_handoffs_open_before_the_console_are_not_news() -> None:
    """The startup tail is the baseline: desk.took() moves the watch past it."""
    app = FakeApp()
    desk = AlertDesk(app, bell=True)
    desk.took(Pending(all_tasks=[Task("t")], tail=[opened(i, str(i)) for i in range(1, 51)]))
    assert app.bells == 0 and app.notes == [] and desk.open_count == 0
    desk.took(Pending(events=[opened(3, "3")]))  # an old event again (feed reloaded): still nothing
    assert app.bells == 0
    desk.took(Pending(events=[opened(51, "51", node="a"), opened(52, "52", node="b")]))  # two at once: one ring
    assert app.bells == 1 and len(app.notes) == 1 and desk.open_count == 2
    assert app.notes[0][0].splitlines() == ["✋ t/a: asks a human (confirm): Open the PR?",
                                            "✋ t/b: asks a human (confirm): Open the PR?"]
    assert app.notes[0][1]["title"] == "⚑ 2 alerts"
    assert all(n[1]["markup"] is False for n in app.notes)


def test_a_resolved_or_withdrawn_handoff_is_no_longer_open() -> None:
    w = started("t")
    w.events([opened(10, "7", node="a"), opened(11, "8", node="b"), opened(12, "9", node="c")], NOW)
    assert w.open_count == 3
    w.events([acted(13, "resolve", "a", [])], NOW)
    assert {a.node for a in w.open.values()} == {"b", "c"}
    w.events([acted(14, "abort", None, ["8", "9"])], NOW)
    assert w.open_count == 0


def test_seen_by_node_task_inbox_or_all() -> None:
    w = started("t", "u")
    w.events([opened(10, "1", "t", "a"), opened(11, "2", "t", "b"), opened(12, "3", "u", "c")], NOW)
    w.signals("u", [sig("repeating", node="d")], NOW)
    assert w.open_count == 4
    w.seen("t", "a")  # its node detail
    assert w.open_count == 3
    w.seen("u")  # its graph: both of u's
    assert w.open_count == 1
    w.events([opened(13, "4", "u", "e")], NOW)
    w.seen_handoffs()  # the inbox
    assert w.open_count == 0
    w.events([opened(14, "5")], NOW)
    w.seen_all()
    assert w.open_count == 0


# ---------------------------------------------------------------------- signals
def test_signals_already_alarm_at_startup_ring_nothing() -> None:
    w = AlertWatch()
    w.loaded(["t"])
    assert w.signals("t", [sig("repeating"), sig("orphaned", node="m")], NOW) == []
    assert w.signals("t", [sig("repeating"), sig("orphaned", node="m")], NOW) == []  # still the same state
    assert w.open_count == 0


def test_a_node_entering_alarm_alerts_once() -> None:
    w = started("t")
    assert w.signals("t", [sig("no_progress", severity="warn")], NOW) == []  # warn: no alert
    [a] = w.signals("t", [sig("no_progress", severity="warn"), sig("repeating")], NOW)
    assert (a.kind, a.task, a.node, a.signal, a.severity) == ("signal", "t", "n", "repeating", "alarm")
    assert a.evidence == "last 5 observations added 0 new lines" and a.since == "2027-01-15T08:00:00.000Z"
    # repaints / re-analyses of the same state, its since moving (a longer streak): nothing
    for k in range(5):
        assert w.signals("t", [sig("repeating", since=f"2027-01-15T08:0{k}:00.000Z"),
                               sig("no_progress", severity="warn")], NOW + k) == []
    # a second alarm kind on the same node (the loop is also no_new_info now): the same alert
    assert w.signals("t", [sig("repeating"), sig("no_new_info")], NOW + 10) == []
    # not computed this time (None): nothing changes
    assert w.signals("t", None, NOW + 11) == [] and w.open_count == 1
    # another node entering alarm: its own alert
    assert [x.node for x in w.signals("t", [sig("repeating"), sig("repeating", node="m")], NOW + 12)] == ["m"]
    assert w.open_count == 2


def test_an_alarm_that_ends_and_flickers_back_is_one_alert() -> None:
    w = started("t")
    assert len(w.signals("t", [sig("repeating")], NOW)) == 1
    assert w.signals("t", [], NOW + 5) == [] and w.open_count == 1  # over, but it happened: open until seen
    assert w.signals("t", [sig("repeating")], NOW + 10) == []  # back within REARM_S: a flicker
    assert w.open_count == 1
    assert w.signals("t", [], NOW + 20) == []
    # quiet for REARM_S, then in alarm again: a new stall, a new alert
    [b] = w.signals("t", [sig("orphaned", since="2027-01-15T09:00:00.000Z")], NOW + 20 + REARM_S)
    assert (b.node, b.signal, b.since) == ("n", "orphaned", "2027-01-15T09:00:00.000Z")


def test_warn_turning_alarm_is_a_change() -> None:
    w = started("t")
    w.signals("t", [sig("budget_hard", node=None, severity="warn", since=None)], NOW)
    [a] = w.signals("t", [sig("budget_stop", node=None, since=None)], NOW)
    assert (a.node, a.signal) == (None, "budget_stop") and "t: budget_stop (alarm)" in a.line()


def test_a_task_created_after_startup_has_no_baseline() -> None:
    w = started("t")
    w.events([ev(20, "task.created", task="new", node=None)], NOW)
    assert [a.task for a in w.signals("new", [sig("orphaned")], NOW)] == ["new"]
    w.loaded(["t", "new", "other"])  # the feed reloaded: "other" was never heard of, so it is startup state
    assert w.signals("other", [sig("orphaned")], NOW) == []
    assert w.signals("new", [sig("orphaned")], NOW) == []  # still in alarm


def test_alert_json_keys() -> None:
    a = Alert("signal", "t", "n", "repeating", "alarm", NOW, "repeating (alarm): x", since="2027-01-15T08:00:00.000Z",
              evidence="x")
    j = a.to_json()
    assert set(j) == {"kind", "task", "node", "signal", "severity", "at", "since", "summary", "handoff", "evidence", "ledger"}
    assert j["at"] == "2027-01-15T08:00:00.000Z" and json.loads(json.dumps(j)) == j


# ---------------------------------------------------------------------- the hook
def test_hook_gets_the_alert_as_json_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "alert.json"
    a = Alert("handoff", "t", "n", None, "alarm", NOW, "asks \x1b[31m a human", handoff="7")
    argv = [sys.executable, "-c", f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())"]
    assert run_hook(argv, a) is None
    got = json.loads(out.read_text())
    assert got["task"] == "t" and got["handoff"] == "7" and got["summary"] == "asks \x1b[31m a human"
    assert "\x1b" not in out.read_text()  # escaped in the JSON text


def test_hook_failures_are_one_line(tmp_path: Path) -> None:
    a = Alert("handoff", "t", "n", None, "alarm", NOW, "x")
    bad = run_hook([sys.executable, "-c", "import sys; print('no route to phone', file=sys.stderr); sys.exit(3)"], a)
    assert bad is not None and "exited 3" in bad and "no route to phone" in bad and "\n" not in bad
    slow = run_hook([sys.executable, "-c", "import time; time.sleep(60)"], a, timeout=0.5)
    assert slow is not None and "killed" in slow
    missing = run_hook([str(tmp_path / "nope")], a)
    assert missing is not None and "nope" in missing


def test_what_a_hook_leaves_running_ends_with_it(tmp_path: Path) -> None:
    """A hook that exits 0 leaving a background child: the child is ended when the hook exits
    (it outlived the console before)."""
    a = Alert("handoff", "t", "n", None, "alarm", NOW, "x")
    pidfile = tmp_path / "child.pid"
    argv = ["sh", "-c", f"sleep 300 & echo $! > {pidfile}; exit 0"]
    assert run_hook(argv, a) is None
    child = int(pidfile.read_text())
    deadline = Deadline(30)
    try:
        while True:  # ended (a condition with a deadline: the kill is sent before run_hook returns)
            try:
                state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:
                break
            if state == "Z":
                break
            assert not deadline.expired(), f"the hook's child {child} still runs"
            time.sleep(0.01)
    except AssertionError:
        os.kill(child, 9)  # still running: this test's own child, ended here
        raise


# ---------------------------------------------------------------------- the desk, with a stand-in app
class Task:
    def __init__(self, task_id: str) -> None:
        self.task_id = task_id


class Pending:
    def __init__(self, *, all_tasks: Any = None, tail: Any = None, events: Any = ()) -> None:
        self.all_tasks, self.tail, self.events = all_tasks, tail, list(events)


class FakeApp:
    def __init__(self) -> None:
        self.t = NOW
        self.bells = 0
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.changed = 0
        self.workers: list[Any] = []
        self.timers: list[Any] = []

    def now(self) -> float:
        return self.t

    def bell(self) -> None:
        self.bells += 1

    def notify(self, message: str, **kw: Any) -> None:
        self.notes.append((message, kw))

    def alerts_changed(self) -> None:
        self.changed += 1

    def run_worker(self, fn: Any, **kw: Any) -> None:
        self.workers.append((fn, kw))

    def later(self, delay: float, fn: Any) -> None:
        self.timers.append((delay, fn))


def test_no_bell_still_notifies_and_counts() -> None:
    app = FakeApp()
    desk = AlertDesk(app, bell=False)
    desk.took(Pending(all_tasks=[Task("t")]))
    desk.analysed({"t": (None, [])})
    desk.analysed({"t": (None, [sig("repeating")])})
    assert app.bells == 0 and len(app.notes) == 1 and desk.open_count == 1 and app.changed == 1
    desk.seen("t", "n")
    assert desk.open_count == 0 and app.changed == 2


def test_the_hook_runs_in_a_thread_worker_per_alert() -> None:
    app = FakeApp()
    desk = AlertDesk(app, hook=["true"])
    desk.took(Pending(all_tasks=[Task("t")]))
    desk.took(Pending(events=[opened(1, "1"), opened(2, "2", node="m")]))
    assert [kw["thread"] for _, kw in app.workers] == [True, True]
    assert all(kw["group"] == "alert-hook" and kw["exit_on_error"] is False for _, kw in app.workers)


def test_many_alerts_at_once_are_one_notification_of_three_lines_and_a_count() -> None:
    app = FakeApp()
    desk = AlertDesk(app)
    desk.took(Pending(all_tasks=[Task("t")]))
    desk.took(Pending(events=[opened(i, str(i), node=f"n{i}") for i in range(1, 11)]))
    assert app.bells == 1 and len(app.notes) == 1 and app.notes[0][0].splitlines()[-1] == "and 7 more"
    assert len(app.notes[0][0].splitlines()) == 4
    assert desk.open_count == 10


def test_the_bell_rings_at_most_every_ten_seconds() -> None:
    app = FakeApp()
    desk = AlertDesk(app)
    desk.took(Pending(all_tasks=[Task("t")]))
    for i in range(1, 6):  # five handoffs, a second apart
        app.t = NOW + i
        desk.took(Pending(events=[opened(i, str(i), node=f"n{i}")]))
    # one notification at once; the four after it gathered into the next one, BELL_EVERY_S later
    assert len(app.notes) == 1 and [d for d, _ in app.timers] == [BELL_EVERY_S - 1]
    app.t = NOW + 1 + BELL_EVERY_S
    app.timers.pop()[1]()
    assert len(app.notes) == 2 and app.notes[1][0].splitlines()[-1] == "and 1 more"
    assert app.notes[1][1]["title"] == "⚑ 4 alerts"
    desk.took(Pending(events=[opened(9, "9", node="n9")]))
    assert app.bells == 2  # ten seconds since the last ring
    assert len(app.notes) == 2 and [d for d, _ in app.timers] == [BELL_EVERY_S]  # a notification was just shown
