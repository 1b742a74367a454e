"""A node's own heartbeat figures (interval, units_at), declared waits, the bounded observation
write, and schema 3's migration — through the real Ledger API on a manual clock."""

from __future__ import annotations

import json

import pytest

from store import NodeSpec
from store.judges import novelty
from store.reading import signals as S
from store.reading.analysis import TaskAnalysis
from store.errors import InvalidValue, SchemaMismatch
from store.reading.cli_json import graph_json


def sigs(ledger, kind=None, task="t"):
    out = S.signals_for_task(ledger, ledger.task(task))
    return [s for s in out if kind is None or s.kind == kind]


@pytest.fixture
def task(ledger):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", "agent_step"), NodeSpec("chatty", "agent_step"),
                           NodeSpec("later", "agent_step", deps=("a",))])
    return "t"


# ---------------------------------------------------------------------- heartbeat_stale: its own history
@pytest.mark.parametrize("own,neighbour,lease", [(20.0, 2.0, 15), (5.0, 1.0, 15), (30.0, 0.5, 20), (12.0, 60.0, 10),
                                                 (20.0, 2.0, 5), (30.0, 0.5, 3)])
def test_heartbeat_stale_follows_the_nodes_own_interval(ledger, clock, task, own, neighbour, lease):
    # stale after 3 × its own long gap (at least 10 s), or at the lease's renewal point (half the
    # lease) when that is sooner: every 20 s under a 300 s lease is stale after 60 s, not 150 s
    a = ledger.claim("t", "wa", lease_s=lease * own)
    b = ledger.claim("t", "wb", lease_s=600)
    t0 = clock()
    t_a, t_b = t0 + own, t0 + neighbour
    while t_a < t0 + 10 * own:  # both beat at their own rates, interleaved
        if t_a <= t_b:
            clock.set(t_a)
            ledger.heartbeat(a)
            t_a += own
        else:
            clock.set(t_b)
            ledger.heartbeat(b, observation=f"neighbour step {t_b}")
            t_b += neighbour
    last = t_a - own
    limit = max(min(max(3 * own, 10.0), lease * own / 2), 2 * own)
    for at in (last + limit - 0.5, last + limit + 0.5):  # the neighbour keeps beating meanwhile
        while t_b <= at:
            clock.set(t_b)
            ledger.heartbeat(b)
            t_b += neighbour
        clock.set(at)
        got = [s for s in sigs(ledger, "heartbeat_stale") if s.node == "a"]
        if at < last + limit:
            assert got == []
        else:
            (s,) = got
            assert f"(its long gaps ~{S.dur(own)})" in s.evidence and s.since == last


def test_the_gap_from_claim_to_first_heartbeat_is_not_the_rhythm(ledger, clock, task):
    c = ledger.claim("t", "wa", lease_s=600)
    clock.advance(0.2)
    ledger.heartbeat(c)  # at once after the claim
    assert ledger.node("t", "a").beat_interval_s is None
    for _ in range(3):
        clock.advance(30)
        ledger.heartbeat(c)
    assert ledger.node("t", "a").beat_interval_s == pytest.approx(30.0)


def test_one_long_silence_does_not_redefine_usual(ledger, clock, task):
    c = ledger.claim("t", "wa", lease_s=900)
    for _ in range(6):
        clock.advance(10)
        ledger.heartbeat(c)
    clock.advance(250)  # one silence inside the lease
    ledger.heartbeat(c)
    assert 10 < ledger.node("t", "a").beat_interval_s < 15


# ---------------------------------------------------------------------- no_progress at any rate
@pytest.mark.parametrize("rate", [1.0, 2.0, 10.0, 45.0, 60.0])
def test_no_progress_fires_at_any_heartbeat_rate(ledger, clock, task, rate):
    c = ledger.claim("t", "wa", lease_s=max(60.0, 8 * rate))
    clock.advance(rate)
    ledger.heartbeat(c, units_done=1, units_total=9)
    moved = clock()
    limit = max(300.0, 8 * rate)
    while clock() + rate < moved + limit:
        clock.advance(rate)
        ledger.heartbeat(c, units_done=1, units_total=9, observation=f"still step one, try {clock()}")
        assert not sigs(ledger, "no_progress")
    clock.set(moved + limit)
    ledger.heartbeat(c, units_done=1, units_total=9)
    (s,) = sigs(ledger, "no_progress")
    assert s.since == moved and s.evidence.startswith("units_done 1/9 unchanged for ")


@pytest.mark.parametrize("rate", [1.0, 30.0])
def test_units_that_move_never_raise_no_progress(ledger, clock, task, rate):
    c = ledger.claim("t", "wa", lease_s=max(60.0, 8 * rate))
    for i in range(int(900 / rate)):
        clock.advance(rate)
        ledger.heartbeat(c, units_done=i // max(1, int(120 / rate)), units_total=100)
    assert not sigs(ledger, "no_progress")


# ---------------------------------------------------------------------- declared waits
def poll(ledger, clock, c, n, step=30.0, **kw):
    for _ in range(n):
        clock.advance(step)
        ledger.heartbeat(c, observation="waiting for CI run 4411: status pending", **kw)


def test_identical_observations_during_a_declared_wait_raise_nothing(ledger, clock, task):
    c = ledger.claim("t", "wa", lease_s=120)
    clock.advance(10)
    ledger.heartbeat(c, observation="pushed the branch", units_done=3, units_total=9)
    poll(ledger, clock, c, 9, waiting_on="ci", wait_s=600, units_done=3, units_total=9)
    assert [s.kind for s in sigs(ledger) if s.node == "a"] == []
    n = ledger.node("t", "a")
    assert (n.wait_on, n.wait_until - n.wait_since) == ("ci", 600.0)
    assert S.wait_text(n, clock()) == "waiting on ci (6m left)"
    node = next(x for x in graph_json(ledger, "t")["nodes"] if x["key"] == "a")
    assert node["wait"] == {"on": "ci", "since": "2027-01-15T08:00:40.000Z", "until": "2027-01-15T08:10:40.000Z",
                            "left_s": 360.0, "text": "waiting on ci (6m left)"}


def test_the_same_wait_again_keeps_its_deadline(ledger, clock, task):
    c = ledger.claim("t", "wa", lease_s=120)
    poll(ledger, clock, c, 3, waiting_on="ci", wait_s=120)
    first = ledger.node("t", "a").wait_until
    poll(ledger, clock, c, 3, waiting_on="ci", wait_s=120)  # polling does not push the deadline
    assert ledger.node("t", "a").wait_until == first


def test_past_its_deadline_a_wait_is_overdue_and_then_repeats_count(ledger, clock, task):
    c = ledger.claim("t", "wa", lease_s=120)
    poll(ledger, clock, c, 3, waiting_on="ci", wait_s=100)  # declared at +30: until +130
    clock.advance(41)  # +131
    ledger.heartbeat(c)
    (s,) = sigs(ledger, "overdue")
    assert s.severity == "warn" and s.evidence == "waiting on ci for 1m41s, past its declared 1m40s"
    assert S.wait_text(ledger.node("t", "a"), clock()) == "waiting on ci (1s over)"
    assert not sigs(ledger, "repeating")
    poll(ledger, clock, c, 3, waiting_on="ci", wait_s=100)  # the same polls after the deadline count
    assert sigs(ledger, "repeating")


def test_new_information_ends_the_wait_but_its_polls_still_do_not_count(ledger, clock, task):
    c = ledger.claim("t", "wa", lease_s=120)
    poll(ledger, clock, c, 6, waiting_on="ci", wait_s=600)
    clock.advance(30)
    ledger.heartbeat(c, observation="CI passed; merging the branch")
    n = ledger.node("t", "a")
    assert n.wait_on is None and n.wait_until == clock() and S.wait_text(n, clock()) is None
    assert sigs(ledger) == []
    assert next(x for x in graph_json(ledger, "t")["nodes"] if x["key"] == "a")["wait"] is None


def test_a_wait_belongs_to_its_attempt(ledger, clock, task):
    c = ledger.claim("t", "wa", lease_s=120)
    poll(ledger, clock, c, 2, waiting_on="ci", wait_s=600)
    ledger.fail(c, error="runner lost", retry_after_s=0)
    c2 = ledger.claim("t", "wa", lease_s=120)
    n = ledger.node("t", "a")
    assert (n.wait_on, n.wait_since, n.wait_until, n.beat_interval_s, n.units_at) == (None,) * 5
    poll(ledger, clock, c2, 3)  # undeclared: the same polls are a loop
    assert sigs(ledger, "repeating")


@pytest.mark.parametrize("kw,msg", [
    (dict(wait_s=60), "wait_s needs waiting_on"),
    (dict(waiting_on="  "), "waiting_on must not be empty"),
    (dict(waiting_on="ci\nand more"), "waiting_on must be one line"),
    (dict(waiting_on=5), "waiting_on must be a string"),
    (dict(waiting_on="ci", wait_s=0), "wait_s must be a number above 0 and at most 604800"),
    (dict(waiting_on="ci", wait_s=-5), "wait_s must be a number above 0"),
    (dict(waiting_on="ci", wait_s=float("nan")), "wait_s must be a number above 0"),
    (dict(waiting_on="ci", wait_s=float("inf")), "wait_s must be a number above 0"),
    (dict(waiting_on="ci", wait_s=True), "wait_s must be a number above 0"),
    (dict(waiting_on="ci", wait_s="60"), "wait_s must be a number above 0"),
    (dict(waiting_on="ci", wait_s=10 ** 9), "wait_s must be a number above 0"),
])
def test_a_malformed_wait_is_refused_and_nothing_written(ledger, clock, task, kw, msg):
    c = ledger.claim("t", "wa", lease_s=120)
    before = ledger.last_event_id()
    with pytest.raises(InvalidValue, match=msg):  # an InvalidValue is a Refused
        ledger.heartbeat(c, observation="x", **kw)
    assert ledger.last_event_id() == before and ledger.observations("t", "a") == []


def test_task_analysis_follows_waits_and_intervals_from_the_payload(ledger, clock, task):
    an = TaskAnalysis(ledger, "t")
    cursor = ledger.last_event_id()
    c = ledger.claim("t", "wa", lease_s=120)
    poll(ledger, clock, c, 4, step=20, waiting_on="ci", wait_s=90, units_done=1, units_total=3)
    clock.advance(20)
    ledger.heartbeat(c, observation="CI failed: fixing the lint error", units_done=2, units_total=3)
    poll(ledger, clock, c, 3, step=20)
    for ev in ledger.events(cursor, task_id="t"):
        an.apply_event(ev, ledger.nodes("t", [ev.node]) if ev.node and ev.kind != "node.heartbeat" else [])
    assert an.nodes["a"] == ledger.node("t", "a")
    clock.advance(40)
    assert an.signals() == S.signals_for_graph(ledger, ledger.graph("t"))


# ---------------------------------------------------------------------- bounded observation writes
def letters(i):
    out = ""
    while True:
        i, r = divmod(i, 26)
        out += chr(97 + r)
        if not i:
            return out


def test_a_million_line_observation_writes_a_bounded_amount_and_says_so(ledger, clock, task):
    c = ledger.claim("t", "wa", lease_s=120)
    text = "\n".join(f"distinct output line q{letters(i)}" for i in range(1_000_000))  # words, not digits
    clock.advance(5)
    pulse = ledger.heartbeat(c, observation=text)
    assert pulse.new_units == novelty.MAX_LINES
    seen = ledger.db.execute_sql("SELECT COUNT(*) FROM seen_line").fetchone()[0]
    assert novelty.MAX_LINES <= seen <= novelty.MAX_MEMORY  # its lines, and the concepts of the first 64
    (ev,) = [e for e in ledger.events(0, task_id="t") if e.kind == "node.heartbeat"]
    assert ev.payload["unexamined_lines"] == 1_000_000 - novelty.MAX_LINES
    assert f"{1_000_000 - novelty.MAX_LINES:,} lines past the first {novelty.MAX_LINES:,} not examined" in ev.summary
    (obs,) = ledger.observations("t", "a")
    assert len(obs.text) < 5000 and obs.text.endswith("…[truncated]")


# ---------------------------------------------------------------------- schema 3
def test_a_schema_2_ledger_is_refused_then_migrated(ledger_path, clock, capsys):
    from console.cli import main as warden
    from store import Ledger

    with Ledger.open(ledger_path, clock=clock) as led:  # a schema 2 ledger: no heartbeat columns
        led.create_task("t")
        led.add_node("t", "a")
        for col in ("beat_interval_s", "units_at", "wait_on", "wait_since", "wait_until"):
            led.db.execute_sql(f"ALTER TABLE node DROP COLUMN {col}")
        led.db.execute_sql("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    with pytest.raises(SchemaMismatch, match="warden migrate"):
        Ledger.open(ledger_path, clock=clock)
    assert warden(["migrate", "--ledger", ledger_path]) == 0
    assert "migrated schema" in capsys.readouterr().out
    with Ledger.open(ledger_path, clock=clock) as led:
        c = led.claim("t", "w", lease_s=60)
        clock.advance(1)
        led.heartbeat(c, observation="hello", waiting_on="ci", wait_s=60)
        assert led.node("t", "a").wait_on == "ci"
        assert json.loads(json.dumps(graph_json(led, "t")))["nodes"][0]["wait"]["on"] == "ci"
