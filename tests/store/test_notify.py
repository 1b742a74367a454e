"""The notifier (store/notify/): journal events and alarms → grouped messages, delivered durably.

Every message goes through apprise to a local HTTP sink on 127.0.0.1 (``json://`` webhooks and
``ntfy://`` speaking ntfy's JSON publish); nothing leaves the machine. The notifier's clock is the
ledger's manual clock, so bursts, quiet times and back-off are exact; passes are run by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

pytest.importorskip("apprise", reason="warden notify needs the notify extra: pip install 'warden[notify]'")

from store import Ledger, ManualClock  # noqa: E402
from store.notify.config import ConfigError, parse, with_cli  # noqa: E402
from store.notify.follow import Notifier  # noqa: E402
from store.notify.state import State  # noqa: E402
from tests.support.sink import Sink, start_sink  # noqa: E402
from tests.support.asks import ask

BASE = "http://127.0.0.1:8000"
OPTS = [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}]


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = start_sink()
    yield s
    s.close()


def notifier(ledger_path: str, tmp_path: Path, clock: ManualClock, text: str, to: list[str],
             link_base: str | None = BASE) -> Notifier:
    cfg = with_cli(parse('group = "5s"\ngroup_max = "30s"\nretry_first = "10s"\n' + text, "test.toml"), to, link_base)
    n = Notifier(ledger_path, cfg, State(tmp_path / "state.sqlite"), clock=clock)
    n.begin()
    return n


def work(ledger: Ledger, task: str, nodes: int = 1) -> list:
    ledger.create_task(task, title=task)
    for i in range(nodes):
        ledger.add_node(task, f"n{i}", kind="step")
    return [ledger.claim(task, f"w{i}", lease_s=3600) for i in range(nodes)]


def passes(n: Notifier, clock: ManualClock, seconds: float, step: float = 1.0) -> None:
    """Run passes while the manual clock moves ``seconds`` in ``step``s."""
    moved = 0.0
    while True:
        n.step()
        if moved >= seconds:
            return
        clock.advance(step)
        moved += step


def test_a_burst_of_handoffs_is_one_message_per_destination_with_a_link_each(ledger, ledger_path, clock, tmp_path,
                                                                              sink) -> None:
    claims = work(ledger, "prod-api", 5)
    n = notifier(ledger_path, tmp_path, clock, "", [sink.url("json"), sink.url("ntfy", "oncall")])
    for i, c in enumerate(claims):
        ask(ledger, c, kind="confirm", question=f"Deploy step {i}?", options=OPTS)
        passes(n, clock, 1)
    assert sink.received == []  # the burst is not over: nothing yet
    passes(n, clock, 6)
    got = sink.wait_for(lambda r: len(r) == 2)
    hook = next(r for r in got if r.path == "/hook")
    ntfy = next(r for r in got if r.path == "/")
    assert ntfy.body["topic"] == "oncall" and ntfy.body["title"] == hook.body["title"]
    assert hook.title.startswith("Warden: 5 need you (prod-api)")
    for i in range(5):
        assert f"prod-api · n{i} confirm: Deploy step {i}? [yes | no]" in hook.text
    links = [line.split("answer: ")[1] for line in hook.text.splitlines() if "answer: " in line]
    assert len(links) == 5 and all(link.startswith(f"{BASE}/m/h/") and "#k=" in link for link in links)
    # each destination gets links of its own, each bound to its handoff
    assert set(links).isdisjoint(line.split("answer: ")[1] for line in ntfy.text.splitlines() if "answer: " in line)
    passes(n, clock, 120)
    assert len(sink.received) == 2  # nothing sent twice


def test_heartbeats_notes_and_commits_send_nothing_but_the_finish_does(ledger, ledger_path, clock, tmp_path,
                                                                        sink) -> None:
    [c] = work(ledger, "etl")
    n = notifier(ledger_path, tmp_path, clock, "", [sink.url("json")])
    for i in range(200):  # 200 heartbeats over 400 s of the clock, a pass every 5
        ledger.heartbeat(c, units_done=i, units_total=200, observation=f"row batch {i} loaded")
        passes(n, clock, 2) if i % 5 == 0 else clock.advance(2)
    assert sink.received == [], sink.received[0].text
    ledger.commit(c, output={"rows": 200})
    passes(n, clock, 10)
    [msg] = sink.wait_for(lambda r: len(r) == 1)
    assert "✔ etl finished" in msg.text and msg.title.startswith("Warden: 1 update (etl)")


def test_routes_choose_by_event_task_pattern_and_severity(ledger, ledger_path, clock, tmp_path, sink) -> None:
    oncall, team = sink.url("json", "oncall"), sink.url("json", "team")
    routes = f'''
[[route]]
name = "oncall"
to = "{oncall}"
events = ["handoff:permission"]
tasks = ["prod-*"]

[[route]]
name = "team"
to = ["{team}"]
severity = "alarm"
'''
    prod, dev = work(ledger, "prod-db")[0], work(ledger, "dev-db")[0]
    n = notifier(ledger_path, tmp_path, clock, routes, [])
    ask(ledger, prod, kind="permission", question="Allow Bash?", context={"tool": "Bash", "input": "rm -rf x"},
                         options=[{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}])
    ask(ledger, dev, kind="permission", question="Allow Bash?", context={"tool": "Bash", "input": "ls"},
                         options=[{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}])
    passes(n, clock, 40)
    [msg] = sink.wait_for(lambda r: len(r) == 1)
    assert msg.path == "/oncall" and "prod-db · n0 permission for Bash: rm -rf x" in msg.text
    assert "dev-db" not in msg.text  # not prod-*, and team takes only alarms


def test_a_quiet_period_holds_the_next_message_and_groups_what_came_meanwhile(ledger, ledger_path, clock, tmp_path,
                                                                              sink) -> None:
    claims = work(ledger, "prod-x", 3)
    n = notifier(ledger_path, tmp_path, clock, f'[[route]]\nname = "r"\nto = "{sink.url()}"\nquiet = "10m"\n', [])
    ask(ledger, claims[0], kind="direction", question="Which region?")
    passes(n, clock, 10)
    sink.wait_for(lambda r: len(r) == 1)
    ask(ledger, claims[1], kind="direction", question="Which bucket?")
    passes(n, clock, 60)
    ask(ledger, claims[2], kind="direction", question="Which queue?")
    passes(n, clock, 300, step=30)
    assert len(sink.received) == 1  # inside the quiet period
    passes(n, clock, 300, step=30)
    got = sink.wait_for(lambda r: len(r) == 2)
    assert "Which bucket?" in got[1].text and "Which queue?" in got[1].text and "Which region?" not in got[1].text


def test_a_failed_send_is_retried_with_back_off_and_its_state_is_kept(ledger, ledger_path, clock, tmp_path,
                                                                       sink) -> None:
    [c] = work(ledger, "prod-y")
    n = notifier(ledger_path, tmp_path, clock, "", [sink.url()])
    sink.fail(2, status=503)
    ask(ledger, c, kind="direction", question="Go on?")
    passes(n, clock, 6)
    rows = n.state.deliveries()
    assert [(d.state, d.attempts) for d in rows] == [("retrying", 1)] and "503" in (rows[0].last_error or "")
    first_retry = rows[0].next_at
    passes(n, clock, 8)
    assert n.state.deliveries()[0].attempts == 1  # not before its time (10 s)
    passes(n, clock, 2)
    assert n.state.deliveries()[0].attempts == 2 and n.state.deliveries()[0].next_at - first_retry >= 20 - 2
    passes(n, clock, 25)
    [msg] = sink.wait_for(lambda r: len(r) == 1)
    assert "Go on?" in msg.text
    assert [(d.state, d.attempts) for d in n.state.deliveries()] == [("sent", 3)]
    passes(n, clock, 100, step=10)
    assert len(sink.received) == 1


def test_an_alarm_is_told_once_while_it_lasts(ledger, ledger_path, clock, tmp_path, sink) -> None:
    ledger.create_task("prod-z")
    ledger.add_node("prod-z", "n0", kind="step")
    c = ledger.claim("prod-z", "w0", lease_s=120)
    ledger.heartbeat(c, units_done=1, units_total=10, observation="started")
    n = notifier(ledger_path, tmp_path, clock, "", [sink.url()])
    passes(n, clock, 100, step=10)
    assert sink.received == []
    clock.advance(100)  # the lease ends with nobody to renew it
    passes(n, clock, 40)
    [msg] = sink.wait_for(lambda r: len(r) == 1)
    assert "⚠ prod-z · n0 orphaned: lease of w0 expired" in msg.text and "1 alarm" in msg.title
    passes(n, clock, 600, step=15)
    assert len(sink.received) == 1


def test_a_restart_sends_nothing_twice_and_skips_nothing(ledger, ledger_path, clock, tmp_path, sink) -> None:
    claims = work(ledger, "prod-r", 2)
    n = notifier(ledger_path, tmp_path, clock, "", [sink.url()])
    ask(ledger, claims[0], kind="direction", question="First?")
    passes(n, clock, 10)
    sink.wait_for(lambda r: len(r) == 1)
    n.state.close()
    ask(ledger, claims[1], kind="direction", question="Second?")  # while it is down
    again = notifier(ledger_path, tmp_path, clock, "", [sink.url()])
    passes(again, clock, 10)
    got = sink.wait_for(lambda r: len(r) == 2)
    assert "Second?" in got[1].text and "First?" not in got[1].text


def test_a_first_start_tells_what_is_already_open(ledger, ledger_path, clock, tmp_path, sink) -> None:
    [c] = work(ledger, "prod-o")
    ask(ledger, c, kind="direction", question="Waiting since before?")
    n = notifier(ledger_path, tmp_path, clock, "", [sink.url()])
    passes(n, clock, 10)
    [msg] = sink.wait_for(lambda r: len(r) == 1)
    assert "Waiting since before?" in msg.text


def test_agent_text_reaches_the_message_literally_on_one_line(ledger, ledger_path, clock, tmp_path, sink) -> None:
    [c] = work(ledger, "prod-h")
    n = notifier(ledger_path, tmp_path, clock, "", [sink.url()], link_base=None)
    ask(ledger, c, kind="direction", question="ok?\x1b[31m red\u202e\nsecond line")
    passes(n, clock, 10)
    [msg] = sink.wait_for(lambda r: len(r) == 1)
    line = next(x for x in msg.text.splitlines() if "prod-h" in x)
    assert "\x1b" not in msg.text and "\u202e" not in msg.text and "second line" not in line
    assert "answer: warden resolve" in msg.text  # no link base: the command to answer


@pytest.mark.parametrize("text, why", [
    ('[[route]]\nto = "nosuchscheme://x"', "apprise cannot use"),
    ('[[route]]\nname = "a"\nto = "json://127.0.0.1/x"\nevents = ["heartbeat"]', "is not one of"),
    ('[[route]]\nto = "json://127.0.0.1/x"\nseverity = "loud"', "severity: one of"),
    ('[[route]]\nto = "json://127.0.0.1/x"\nquiet = "soon"', "a duration"),
    ('link_base = "warden.example.com"', "an http(s) address"),
    ('colour = "red"', "unknown key 'colour'"),
    ('[[route]]\nname = "x"\n', "'to'"),
])
def test_a_bad_configuration_is_one_line_naming_where(text: str, why: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse(text, "notify.toml")
    assert why in str(e.value) and str(e.value).startswith("notify.toml") and "\n" not in str(e.value)


def test_the_state_file_keeps_no_url_and_no_link_in_clear(ledger, ledger_path, clock, tmp_path, sink) -> None:
    [c] = work(ledger, "prod-s")
    secret_url = sink.url("json", "hook-with-secret-token-abc123")
    n = notifier(ledger_path, tmp_path, clock, "", [secret_url])
    ask(ledger, c, kind="direction", question="Where?")
    passes(n, clock, 10)
    [msg] = sink.wait_for(lambda r: len(r) == 1)
    token = msg.text.split("#k=")[1].split()[0]
    raw = (tmp_path / "state.sqlite").read_bytes() + (tmp_path / "state.sqlite-wal").read_bytes()
    assert b"secret-token-abc123" not in raw and token.encode() not in raw
    assert (tmp_path / "state.sqlite").stat().st_mode & 0o077 == 0
    assert json.dumps(n.state.counts()) == '{"sent": 1}'
