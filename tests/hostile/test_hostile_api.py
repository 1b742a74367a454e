"""Bad values through the whole public API: every one is a typed ``Refused`` (``InvalidValue``)
with one clear line naming the argument, and nothing is written (every row of every table, and
the journal, unchanged). Table cases for each class of bad value, then a property over every
parameter of every public method with generated hostile values, on both backends."""

from __future__ import annotations

import decimal
import fractions
import inspect
import itertools
from typing import Any, Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostile_support import assert_one_clear_line
from store import Budget, Ledger, ManualClock, NodeSpec
from store.storage import sql
from store.errors import InvalidValue, NotFound, Refused, StaleRevision, WardenError
from store.checked import API
from store.storage.models import MODELS
from tests.support.asks import ask

NAN, INF = float("nan"), float("inf")


def state(ledger: Ledger) -> list[Any]:
    """Every row of every table, in a stable order: what "nothing written" means."""
    out = []
    for m in MODELS:
        table = m._meta.table_name
        out.append((table, sorted(map(repr, sql.fetch_all(ledger.db, f"SELECT * FROM {table}", [])))))
    return out


class World:
    """A small ledger with something of everything, and fresh valid arguments for each method."""

    def __init__(self, ledger: Ledger) -> None:
        self.l = ledger
        self.n = itertools.count()
        ledger.create_task("t", title="T", budget=Budget(tokens=10**6, wall_s=10**6))
        for key, deps in (("a", []), ("b", ["a"]), ("h", []), ("e", []), ("f", []), ("g", []), ("r", [])):
            ledger.add_node("t", key, deps=deps)
        self.ca = ledger.claim("t", "w1", lease_s=10**6)
        self.ch = ledger.claim("t", "w1", lease_s=10**6)
        self.hid = ask(ledger, self.ch, kind="confirm", question="ok?",
                                        options=[{"id": "yes", "label": "Yes"}, {"id": "no"}])
        self.ce = ledger.claim("t", "w1", lease_s=10**6)
        ledger.intend_effect(self.ce, "fx:1")
        ledger.intend_effect(self.ce, "fx:c")
        ledger.confirm_effect(self.ce, "fx:c", external_id="#7", compensation="undo it")
        self.cf = ledger.claim("t", "w1", lease_s=10**6)
        self.cg = ledger.claim("t", "w1", lease_s=10**6)
        # a resolved handoff: waiting for it returns at once whatever the (valid) timeout drawn
        cr = ledger.claim("t", "w1", lease_s=10**6)
        self.hr = ask(ledger, cr, kind="confirm", question="done?", options=[{"id": "ok"}])
        ledger.apply(ledger.plan_resolve(self.hr, option="ok"), operator="op")
        self.mid = ledger.propose_memory(self.ca, "the build comes first", source="tests")  # the task's mind

    def target(self) -> str:
        return self.l.db.display if self.l.db.backend == "sqlite" else self.l.db.url

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self.n)}"

    def valid(self, method: str) -> dict[str, Any]:
        """Arguments that make ``method`` succeed (or refuse for a reason that is not a value)."""
        t = "t"
        return {
            "open": lambda: {"target": self.target(), "read_only": True, "create": False},
            "create_task": lambda: {"task_id": self.fresh("task"), "title": "x", "inputs": {"k": [1, 2.5, None]},
                                    "constraints": ["keep"], "preconditions": {"scope": "all"},
                                    "budget": Budget(tokens=10), "max_claims": 3, "max_repairs": 1,
                                    "exist_ok": False, "actor": "me"},
            "add_node": lambda: {"task_id": t, "key": self.fresh("k"), "kind": "tool", "deps": ["a"], "title": "x",
                                 "preconditions": {"scope": "all"}, "est_wall_s": 5, "est_tokens": 10,
                                 "always_admit": False, "retryable": True, "units_total": 3, "max_claims": 2,
                                 "actor": "me"},
            "add_nodes": lambda: {"task_id": t, "specs": [NodeSpec(self.fresh("s"))], "actor": "me"},
            "admit": lambda: {"task_id": t, "node_key": "a"},
            "claim": lambda: {"task_id": t, "worker": "w2", "lease_s": 30, "kinds": ["tool"], "key": None,
                              "workflow_version": None, "max_step_s": 120},
            "check_expired": lambda: {"task_ids": [t], "actor": "cron"},
            "heartbeat": lambda: {"claim": self.ca, "units_done": 1, "units_total": 4, "tokens": 5,
                                  "observation": "seen", "lease_s": 10**6, "waiting_on": "ci", "wait_s": 60},
            "commit": lambda: {"claim": self.cf, "output": {"ok": True}, "output_ref": "run:x", "tokens": 1,
                               "artifact": ("a.md", b"x"), "units_done": 1, "next_nodes": [], "repair": False,
                               "summary": "done", "repair_from": []},
            "commit_many": lambda: {"commits": [(self.cf, {"output": 1})]},
            "fail": lambda: {"claim": self.cg, "error": "boom", "failure_class": "transient", "retryable": True,
                             "retry_after_s": 5, "tokens": 1},
            "request_human": lambda: {"claim": self.cg, "kind": "confirm", "question": "?",
                                      "options": [{"id": "y", "consequence": "it goes on"}], "recommendation": "y",
                                      "context": {"why": "w", "done": "d", "stuck": "s"},
                                      "tokens": 0},
            "request_effect_confirmation": lambda: {"claim": self.cg, "effect_key": self.fresh("fx:"),
                                                    "details": {"to": "x"}, "done": "d", "why": "w", "question": None,
                                                    "stuck": None, "tokens": 0},
            "intend_effect": lambda: {"claim": self.ce, "effect_key": self.fresh("fx:"), "payload": {"a": 1},
                                      "compensation": "undo"},
            "confirm_effect": lambda: {"claim": self.ce, "effect_key": "fx:1", "external_id": "#1",
                                       "compensation": "undo"},
            "note": lambda: {"claim": self.ce, "text": "a note", "layer": "decision"},
            "plan_park": lambda: {"task_id": t, "reason": "r", "node": None, "until": "2h",
                                  "wake_on": ["at:1h", "node:b"], "now": False, "auto_resume": True},
            "plan_compensated": lambda: {"task_id": t, "effect_key": "fx:c", "reason": "closed by hand"},
            "check_wakes": lambda: {"task_ids": [t]},
            "plan_resume": lambda: {"task_id": t, "node": None, "reason": "r"},
            "plan_narrow": lambda: {"task_id": t, "reason": "r", "set": {"scope": "x"}, "exclude": ["b"]},
            "plan_rewind": lambda: {"task_id": t, "node": "a", "reason": "r"},
            "plan_abort": lambda: {"task_id": t, "reason": "r"},
            "plan_resolve": lambda: {"handoff_id": self.hid, "option": "yes", "answer": "fine"},
            "plan_escalate": lambda: {"task_id": t, "node": "b", "reason": "r", "question": "?",
                                      "context": {"a": 1}},
            "plan": lambda: {"action": "rewind", "arguments": {"task_id": t, "node": "a", "reason": "r"}},
            "apply": lambda: {"plan": self.l.plan_abort(t, reason="r"), "operator": "op"},
            "tasks": lambda: {},
            "task": lambda: {"task_id": t},
            "graph": lambda: {"task_id": t},
            "graph_pages": lambda: {"task_id": t, "first": 2, "page": 2},
            "nodes": lambda: {"task_id": t, "keys": ["a", "b"]},
            "node": lambda: {"task_id": t, "key": "a"},
            "dependents": lambda: {"task_id": t, "key": "a"},
            "node_detail": lambda: {"task_id": t, "key": "a", "events_limit": 5, "observations_limit": 5},
            "observations": lambda: {"task_id": t, "key": "a", "limit": 5},
            "events": lambda: {"since": 0, "task_id": t, "limit": 5},
            "last_event_id": lambda: {},
            "effects": lambda: {"task_id": t},
            "handoffs": lambda: {"status": "open", "task_id": t},
            "handoff": lambda: {"handoff_id": self.hid},
            "actions": lambda: {"task_id": t, "limit": 5},
            "artifacts": lambda: {"task_id": t},
            "latest_artifact": lambda: {"task_id": t},
            "wait_for_resolution": lambda: {"handoff_id": self.hr, "timeout": 0},
            # the task's mind
            "conclude": lambda: {"claim": self.ca, "text": "found it", "source": "src/a.py", "kind": "rejected",
                                 "reason": "no"},
            "propose_memory": lambda: {"claim": self.ca, "text": self.fresh("memory "), "scope": "kind"},
            "replan": lambda: {"task_id": t, "add": [NodeSpec(self.fresh("rp"))], "remove": [], "reorder": [],
                               "narrow": None, "trigger": "pattern", "in_flight": "wait", "reason": "r",
                               "actor": "me"},
            "mind": lambda: {"task_id": t},
            "plans": lambda: {"task_id": t},
            "requirements": lambda: {"task_id": t},
            "conclusions": lambda: {"task_id": t, "kind": "finding", "node": None, "limit": 5},
            "node_mind": lambda: {"task_id": t, "key": "a"},
            "memories": lambda: {"status": "pending", "limit": 5},
            "memory": lambda: {"memory_id": self.mid},
            "plan_memory": lambda: {"memory_id": self.mid, "decision": "reject", "reason": "r"},
            "declare_quota": lambda: {"name": "api", "capacity": 2, "window_s": 60.0, "task_id": t, "actor": "me"},
            "quotas": lambda: {"task_id": t},
        }[method]()


def call(ledger: Ledger, method: str, kwargs: dict[str, Any]) -> Any:
    fn = getattr(type(ledger), method) if method == "open" else getattr(ledger, method)
    out = fn(**kwargs)
    if method == "open":
        out.close()
    elif method == "graph_pages":
        out = list(out)
    return out


def refused_cleanly(ledger: Ledger, fn: Callable[[], Any], arg: str | None = None) -> InvalidValue:
    before = state(ledger)
    with pytest.raises(Refused) as e:
        fn()
    assert isinstance(e.value, InvalidValue), repr(e.value)
    assert_one_clear_line(str(e.value), names=arg)
    if arg:
        assert e.value.argument.split("[")[0].split(".")[0].split(" ")[0] == arg.split("[")[0].split(" ")[0]
    assert state(ledger) == before, "a refused call wrote something"
    return e.value


# ---------------------------------------------------------------------- the classes, one by one
@pytest.fixture
def world(ledger) -> World:
    return World(ledger)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def refusing_world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One world per backend, shared by the table tests whose every call must be refused. Each
    of them asserts that its call wrote nothing (every row of every table compared), so the world
    stays as it was built; building it once instead of once per case (~350 cases per backend)
    saves about a minute. A case that wrongly wrote fails on that assertion itself."""
    from tests.conftest import PG_SKIP, PG_URL, T0, PgSchemas

    if request.param == "postgres" and not PG_URL:
        pytest.skip(PG_SKIP)
    schemas = PgSchemas()
    target = schemas.new() if request.param == "postgres" else str(tmp_path_factory.mktemp("world") / "ledger.db")
    led = Ledger.open(target, clock=ManualClock(T0))
    try:
        yield World(led)
    finally:
        led.close()
        schemas.drop()


IDS_THAT_MUST_NOT_PASS = ["x\n", "\nx", "x\r", "x\x00", "x y", "", "x" * 65, "ä", "x\u2028", "x/y", "x:y",
                          "\uff41", "x\t", "-x\n"]
KEYS_THAT_MUST_NOT_PASS = ["k\n", "\nk", "k\r\n", "k\x00", "k y", "", "k" * 201, "ä", "k\u0085", "k#"]


@pytest.mark.parametrize("bad", IDS_THAT_MUST_NOT_PASS, ids=range(len(IDS_THAT_MUST_NOT_PASS)))
def test_task_ids_are_matched_whole(refusing_world: World, bad: str) -> None:
    world = refusing_world
    refused_cleanly(world.l, lambda: world.l.create_task(bad), "task_id")


@pytest.mark.parametrize("bad", KEYS_THAT_MUST_NOT_PASS, ids=range(len(KEYS_THAT_MUST_NOT_PASS)))
def test_node_keys_are_matched_whole(refusing_world: World, bad: str) -> None:
    world = refusing_world
    refused_cleanly(world.l, lambda: world.l.add_node("t", bad), "key")
    forged = NodeSpec("ok")
    object.__setattr__(forged, "key", bad)  # a frozen dataclass can still be forged: checked again
    refused_cleanly(world.l, lambda: world.l.add_nodes("t", [forged]), "key")
    refused_cleanly(world.l, lambda: world.l.add_nodes("t", [NodeSpec.__new__(NodeSpec)]), "key")
    with pytest.raises(InvalidValue):
        NodeSpec(bad)


def test_the_longest_and_widest_ids_pass(world: World) -> None:
    tid = ("A-z0._" * 11)[:64]
    world.l.create_task(tid)
    key = ("Az09._-:/@+" * 19)[:200]
    world.l.add_node(tid, key)
    assert world.l.node(tid, key).key == key


@pytest.mark.parametrize("hid", [" 1", "1\n", "1 ", "+1", "1_0", "\u0661", "0x1", "1.0", "-1", ""])
def test_a_handoff_id_that_is_not_digits_resolves_nothing(refusing_world: World, hid: str) -> None:
    world = refusing_world
    before = state(world.l)
    with pytest.raises((NotFound, InvalidValue)) as e:
        world.l.apply(world.l.plan_resolve(hid, option="yes"), operator="op")
    assert_one_clear_line(str(e.value))
    with pytest.raises((NotFound, InvalidValue)):
        world.l.handoff(hid)
    assert state(world.l) == before
    assert world.l.handoff(world.hid).status == "open"


NOT_JSON = {
    "nan": NAN, "inf": INF, "-inf": -INF, "set": {1, 2}, "frozenset": frozenset(), "bytes": b"x",
    "bytearray": bytearray(b"x"), "mixed keys": {1: "a", "1": "b"}, "int key": {1: "a"}, "tuple key": {(1,): 2},
    "10**30": 10**30, "-10**30": -(10**30), "2**63": 2**63, "10**5000": 10**5000, "object": object(),
    "complex": 1j, "decimal": decimal.Decimal("1.5"), "fraction": fractions.Fraction(1, 3),
    "nested nan": {"a": [1, {"b": NAN}]}, "deep": None, "self": None, "surrogate": "\ud800",
    "surrogate key": {"\udfff": 1}, "function": len,
}
_deep: Any = 1
for _ in range(200):
    _deep = [_deep]
NOT_JSON["deep"] = _deep
_self: list[Any] = []
_self.append(_self)
NOT_JSON["self"] = _self


@pytest.mark.parametrize("case", sorted(NOT_JSON))
def test_values_that_are_not_json_are_refused_everywhere_json_goes(refusing_world: World, case: str) -> None:
    world = refusing_world
    bad = NOT_JSON[case]
    led = world.l
    refused_cleanly(led, lambda: led.create_task(world.fresh("j"), inputs={"x": bad}), "inputs")
    refused_cleanly(led, lambda: led.create_task(world.fresh("j"), preconditions={"x": bad}), "preconditions")
    refused_cleanly(led, lambda: led.commit(world.cf, output={"x": bad}), "output")
    refused_cleanly(led, lambda: ask(led, world.cg, kind="confirm", question="?", context={"x": bad}),
                    "context")
    refused_cleanly(led, lambda: led.intend_effect(world.ce, "fx:2", payload=[bad]), "payload")
    refused_cleanly(led, lambda: led.plan_narrow("t", reason="r", set={"k": bad}), "set")


NONSENSE: dict[str, tuple[str, Callable[[World], Any]]] = {
    "heartbeat lease_s=-100": ("lease_s", lambda w: w.l.heartbeat(w.ca, lease_s=-100)),
    "heartbeat lease_s=0": ("lease_s", lambda w: w.l.heartbeat(w.ca, lease_s=0)),
    "heartbeat lease_s=nan": ("lease_s", lambda w: w.l.heartbeat(w.ca, lease_s=NAN)),
    "heartbeat lease_s=inf": ("lease_s", lambda w: w.l.heartbeat(w.ca, lease_s=INF)),
    "heartbeat lease_s=True": ("lease_s", lambda w: w.l.heartbeat(w.ca, lease_s=True)),
    "heartbeat tokens=nan": ("tokens", lambda w: w.l.heartbeat(w.ca, tokens=NAN)),
    "heartbeat tokens=-1": ("tokens", lambda w: w.l.heartbeat(w.ca, tokens=-1)),
    "heartbeat tokens=10**30": ("tokens", lambda w: w.l.heartbeat(w.ca, tokens=10**30)),
    "heartbeat tokens='5'": ("tokens", lambda w: w.l.heartbeat(w.ca, tokens="5")),
    "heartbeat units_done=nan": ("units_done", lambda w: w.l.heartbeat(w.ca, units_done=NAN)),
    "heartbeat units_total=-3": ("units_total", lambda w: w.l.heartbeat(w.ca, units_total=-3)),
    "heartbeat observation=bytes": ("observation", lambda w: w.l.heartbeat(w.ca, observation=b"x")),
    "heartbeat observation=surrogate": ("observation", lambda w: w.l.heartbeat(w.ca, observation="\ud800")),
    "heartbeat claim=None": ("claim", lambda w: w.l.heartbeat(None)),  # type: ignore[arg-type]
    "commit units_done=nan": ("units_done", lambda w: w.l.commit(w.cf, units_done=NAN)),
    "commit tokens=inf": ("tokens", lambda w: w.l.commit(w.cf, tokens=INF)),
    "commit artifact=str": ("artifact", lambda w: w.l.commit(w.cf, artifact=("a", "text"))),
    "commit artifact=name only": ("artifact", lambda w: w.l.commit(w.cf, artifact="a.md")),
    "commit next_nodes=str": ("next_nodes", lambda w: w.l.commit(w.cf, next_nodes="abc")),
    "commit next_nodes=[dict]": ("next_nodes", lambda w: w.l.commit(w.cf, next_nodes=[{"key": "x"}])),
    "commit repair='yes'": ("repair", lambda w: w.l.commit(w.cf, repair="yes")),
    "fail retry_after_s=-1e9": ("retry_after_s", lambda w: w.l.fail(w.cg, error="x", retry_after_s=-1e9)),
    "fail retry_after_s=nan": ("retry_after_s", lambda w: w.l.fail(w.cg, error="x", retry_after_s=NAN)),
    "fail retry_after_s=inf": ("retry_after_s", lambda w: w.l.fail(w.cg, error="x", retry_after_s=INF)),
    "fail error=None": ("error", lambda w: w.l.fail(w.cg, error=None)),
    "fail failure_class=x": ("failure_class", lambda w: w.l.fail(w.cg, error="x", failure_class="x")),
    "claim lease_s=-1": ("lease_s", lambda w: w.l.claim("t", "w", lease_s=-1)),
    "claim lease_s=nan": ("lease_s", lambda w: w.l.claim("t", "w", lease_s=NAN)),
    "claim worker=''": ("worker", lambda w: w.l.claim("t", "")),
    "claim worker='w\\n'": ("worker", lambda w: w.l.claim("t", "w\n")),
    "claim worker=5": ("worker", lambda w: w.l.claim("t", 5)),
    "claim kinds='tool'": ("kinds", lambda w: w.l.claim("t", "w", kinds="tool")),
    "claim max_step_s=0": ("max_step_s", lambda w: w.l.claim("t", "w", max_step_s=0)),
    "claim max_step_s=nan": ("max_step_s", lambda w: w.l.claim("t", "w", max_step_s=NAN)),
    "claim max_step_s='2m'": ("max_step_s", lambda w: w.l.claim("t", "w", max_step_s="2m")),
    "commit repair_from='draft'": ("repair_from", lambda w: w.l.commit(w.cf, repair=True, repair_from="draft")),
    "create density_limit=0": ("density_limit", lambda w: w.l.create_task(w.fresh("m"), budget=Budget(
        density_limit=0))),
    "create max_claims=-1": ("max_claims", lambda w: w.l.create_task(w.fresh("m"), max_claims=-1)),
    "create max_claims=0": ("max_claims", lambda w: w.l.create_task(w.fresh("m"), max_claims=0)),
    "create max_claims=10**30": ("max_claims", lambda w: w.l.create_task(w.fresh("m"), max_claims=10**30)),
    "create max_claims=2.5": ("max_claims", lambda w: w.l.create_task(w.fresh("m"), max_claims=2.5)),
    "create max_repairs=-1": ("max_repairs", lambda w: w.l.create_task(w.fresh("m"), max_repairs=-1)),
    "create constraints=str": ("constraints", lambda w: w.l.create_task(w.fresh("m"), constraints="abc")),
    "create constraints=[1]": ("constraints", lambda w: w.l.create_task(w.fresh("m"), constraints=[1])),
    "create title=bytes": ("title", lambda w: w.l.create_task(w.fresh("m"), title=b"t")),
    "create budget=dict": ("budget", lambda w: w.l.create_task(w.fresh("m"), budget={"tokens": 5})),
    "create exist_ok='no'": ("exist_ok", lambda w: w.l.create_task(w.fresh("m"), exist_ok="no")),
    "create actor='a\\nb'": ("actor", lambda w: w.l.create_task(w.fresh("m"), actor="a\nb")),
    "add est_wall_s=nan": ("est_wall_s", lambda w: w.l.add_node("t", w.fresh("k"), est_wall_s=NAN)),
    "add est_wall_s=-1": ("est_wall_s", lambda w: w.l.add_node("t", w.fresh("k"), est_wall_s=-1)),
    "add est_tokens=1.5": ("est_tokens", lambda w: w.l.add_node("t", w.fresh("k"), est_tokens=1.5)),
    "add max_claims=-1": ("max_claims", lambda w: w.l.add_node("t", w.fresh("k"), max_claims=-1)),
    "add units_total=inf": ("units_total", lambda w: w.l.add_node("t", w.fresh("k"), units_total=INF)),
    "add deps='a'": ("deps", lambda w: w.l.add_node("t", w.fresh("k"), deps="a")),
    "add kind=''": ("kind", lambda w: w.l.add_node("t", w.fresh("k"), kind="")),
    "add kind=long": ("kind", lambda w: w.l.add_node("t", w.fresh("k"), kind="k" * 65)),
    "add kind='a\\n'": ("kind", lambda w: w.l.add_node("t", w.fresh("k"), kind="a\n")),
    "add preconditions=list": ("preconditions", lambda w: w.l.add_node("t", w.fresh("k"), preconditions=[1])),
    "request options=str": ("options", lambda w: ask(w.l, w.cg, kind="confirm", question="?",
                                                                    options="yes")),
    "request options=dict": ("options", lambda w: ask(w.l, w.cg, kind="confirm", question="?",
                                                                     options={"id": "y"})),
    "request options=[str]": ("options", lambda w: ask(w.l, w.cg, kind="confirm", question="?",
                                                                      options=["y"])),
    "request option no id": ("options", lambda w: ask(w.l, w.cg, kind="confirm", question="?",
                                                                     options=[{"label": "y"}])),
    "request option id newline": ("options", lambda w: ask(w.l, w.cg, kind="confirm", question="?",
                                                                          options=[{"id": "y\n"}])),
    "request option label bytes": ("options", lambda w: ask(w.l, w.cg, kind="confirm", question="?",
                                                                            options=[{"id": "y", "label": b"Y"}])),
    "request kind=bad": ("kind", lambda w: ask(w.l, w.cg, kind="bad", question="?")),
    "request tokens=nan": ("tokens", lambda w: ask(w.l, w.cg, kind="confirm", question="?",
                                                                  tokens=NAN)),
    "intend key newline": ("effect_key", lambda w: w.l.intend_effect(w.ce, "k\n")),
    "intend key empty": ("effect_key", lambda w: w.l.intend_effect(w.ce, "")),
    "intend key None": ("effect_key", lambda w: w.l.intend_effect(w.ce, None)),
    "confirm key newline": ("effect_key", lambda w: w.l.confirm_effect(w.ce, "fx:1\n")),
    "confirm external_id int": ("external_id", lambda w: w.l.confirm_effect(w.ce, "fx:1", external_id=42)),
    "note text bytes": ("text", lambda w: w.l.note(w.ce, b"x")),
    "note layer operator": ("layer", lambda w: w.l.note(w.ce, "x", layer="operator")),
    "park until nan": ("until", lambda w: w.l.plan_park("t", reason="r", until=NAN)),
    "park until inf": ("until", lambda w: w.l.plan_park("t", reason="r", until=INF)),
    "park until 'nanh'": ("until", lambda w: w.l.plan_park("t", reason="r", until="nanh")),
    "park until '1e400d'": ("until", lambda w: w.l.plan_park("t", reason="r", until="1e400d")),
    "park now='no'": ("now", lambda w: w.l.plan_park("t", reason="r", now="no")),
    "park reason=5": ("reason", lambda w: w.l.plan_park("t", reason=5)),
    "narrow exclude='abc'": ("exclude", lambda w: w.l.plan_narrow("t", reason="r", exclude="b")),
    "narrow set={1: 2}": ("set", lambda w: w.l.plan_narrow("t", reason="r", set={1: 2})),
    "rewind node=5": ("node", lambda w: w.l.plan_rewind("t", 5, reason="r")),
    "resolve option newline": ("option", lambda w: w.l.plan_resolve(w.hid, option="yes\n")),
    "apply plan=dict": ("plan", lambda w: w.l.apply({"action": "abort"}, operator="op")),
    "apply operator=''": ("operator", lambda w: w.l.apply(w.l.plan_abort("t", reason="r"), operator="")),
    "apply operator newline": ("operator", lambda w: w.l.apply(w.l.plan_abort("t", reason="r"),
                                                                operator="op\nroot")),
    "events since=-1": ("since", lambda w: w.l.events(-1)),
    "events since=nan": ("since", lambda w: w.l.events(NAN)),
    "events limit=0": ("limit", lambda w: w.l.events(0, limit=0)),
    "handoffs status=bad": ("status", lambda w: w.l.handoffs(status="bad")),
    "task task_id=None": ("task_id", lambda w: w.l.task(None)),
    "commit_many not pairs": ("commits", lambda w: w.l.commit_many([w.cf])),
    # declared waits, a claim by key or workflow version, park wake conditions
    "heartbeat waiting_on=''": ("waiting_on", lambda w: w.l.heartbeat(w.ca, waiting_on=" ")),
    "heartbeat waiting_on newline": ("waiting_on", lambda w: w.l.heartbeat(w.ca, waiting_on="ci\x1b\n")),
    "heartbeat waiting_on=5": ("waiting_on", lambda w: w.l.heartbeat(w.ca, waiting_on=5)),
    "heartbeat wait_s=0": ("wait_s", lambda w: w.l.heartbeat(w.ca, waiting_on="ci", wait_s=0)),
    "heartbeat wait_s=nan": ("wait_s", lambda w: w.l.heartbeat(w.ca, waiting_on="ci", wait_s=NAN)),
    "heartbeat wait_s=8 days": ("wait_s", lambda w: w.l.heartbeat(w.ca, waiting_on="ci", wait_s=8 * 86400)),
    "heartbeat wait_s alone": ("wait_s", lambda w: w.l.heartbeat(w.ca, wait_s=60)),
    "claim key=5": ("key", lambda w: w.l.claim("t", "w", key=5)),
    "claim key=''": ("key", lambda w: w.l.claim("t", "w", key="")),
    "claim workflow_version=bytes": ("workflow_version", lambda w: w.l.claim("t", "w", workflow_version=b"1")),
    "claim workflow_version=1": ("workflow_version", lambda w: w.l.claim("t", "w", workflow_version=1)),
    "park wake_on NUL": ("wake_on", lambda w: w.l.plan_park("t", reason="r", wake_on="file:/tmp/x\x00y")),
    "park wake_on newline": ("wake_on", lambda w: w.l.plan_park("t", reason="r", wake_on=["file:/tmp/x\ny"])),
    "park wake_on=[1]": ("wake_on", lambda w: w.l.plan_park("t", reason="r", wake_on=[1])),
    "park wake_on=dict": ("wake_on", lambda w: w.l.plan_park("t", reason="r", wake_on={"at": "2h"})),
    "park wake_on=bytes": ("wake_on", lambda w: w.l.plan_park("t", reason="r", wake_on=b"at:2h")),
    "park wake_on 101": ("wake_on", lambda w: w.l.plan_park("t", reason="r",
                                                             wake_on=[f"at:{i + 1}h" for i in range(101)])),
    "park wake_on long": ("wake_on", lambda w: w.l.plan_park("t", reason="r", wake_on="file:/" + "x" * 5000)),
    "park wake_on at:nanh": ("wake_on", lambda w: w.l.plan_park("t", reason="r", wake_on="at:nanh")),
    "park wake_on at:1e400d": ("wake_on", lambda w: w.l.plan_park("t", reason="r", wake_on=["at:1e400d"])),
    "park auto_resume='yes'": ("auto_resume", lambda w: w.l.plan_park("t", reason="r", wake_on="at:2h",
                                                                       auto_resume="yes")),
    "compensated effect_key=None": ("effect_key", lambda w: w.l.plan_compensated("t", None, reason="r")),
    "compensated effect_key=''": ("effect_key", lambda w: w.l.plan_compensated("t", "", reason="r")),
    "compensated reason=5": ("reason", lambda w: w.l.plan_compensated("t", "fx:c", reason=5)),
    "check_wakes task_ids='t'": ("task_ids", lambda w: w.l.check_wakes("t")),
    "check_wakes task_ids=[5]": ("task_ids", lambda w: w.l.check_wakes([5])),
    "wait_for_resolution timeout=-1": ("timeout", lambda w: w.l.wait_for_resolution(w.hid, timeout=-1)),
    "wait_for_resolution timeout=nan": ("timeout", lambda w: w.l.wait_for_resolution(w.hid, timeout=NAN)),
    "wait_for_resolution handoff_id=1.5": ("handoff_id", lambda w: w.l.wait_for_resolution(1.5, timeout=0)),
    "open busy_timeout_s=0": ("busy_timeout_s", lambda w: Ledger.open(w.target(), busy_timeout_s=0)),
    "open reconnect_s=nan": ("reconnect_s", lambda w: Ledger.open(w.target(), reconnect_s=NAN)),
    "open application_name newline": ("application_name", lambda w: Ledger.open(w.target(),
                                                                                 application_name="a\nb")),
    "open application_name long": ("application_name", lambda w: Ledger.open(w.target(),
                                                                              application_name="a" * 64)),
    "open backoff=3": ("backoff", lambda w: Ledger.open(w.target(), backoff=3)),
    "open clock=5": ("clock", lambda w: Ledger.open(w.target(), clock=5)),
}


@pytest.mark.parametrize("case", sorted(NONSENSE))
def test_nonsense_is_refused_naming_the_argument(refusing_world: World, case: str) -> None:
    world = refusing_world
    arg, fn = NONSENSE[case]
    refused_cleanly(world.l, lambda: fn(world), arg)


@pytest.mark.parametrize("kw", [dict(tokens=NAN), dict(tokens=-1), dict(tokens=0), dict(tokens=10**30),
                                dict(tokens=1.5), dict(wall_s=-1), dict(wall_s=0), dict(wall_s=INF),
                                dict(soft_ratio=0), dict(soft_ratio=1.5), dict(soft_ratio=NAN), dict(tokens="9")])
def test_a_budget_checks_itself(kw: dict[str, Any]) -> None:
    with pytest.raises(InvalidValue) as e:
        Budget(**kw)
    assert_one_clear_line(str(e.value), names=next(iter(kw)))


def test_valid_boundaries_pass(world: World) -> None:
    led = world.l
    assert Budget(tokens=1, wall_s=0.001, soft_ratio=1).tokens == 1
    led.create_task(world.fresh("ok"), inputs={"big": 2**63 - 1, "small": -(2**63), "f": 1e308, "u": "ü\x1b"},
                  max_claims=1, max_repairs=0)
    led.heartbeat(world.ca, tokens=0, units_done=0, lease_s=1e-3)
    led.heartbeat(world.ca, lease_s=10**9)
    assert led.heartbeat(world.ca, tokens=10**12, observation="x" * 100_000).lease_until > 0


# ---------------------------------------------------------------------- the whole surface
def test_every_argument_of_every_public_method_has_a_rule() -> None:
    """A new argument added without a rule fails here, not in production."""
    public = {n for n, f in vars(Ledger).items() if not n.startswith("_") and callable(f)} | {"open"}
    missing_methods = sorted(public - set(API))
    assert not missing_methods, f"public Ledger methods with no rules in store/checked.py: {missing_methods}"
    for name in sorted(public):
        fn = getattr(Ledger, name)
        assert hasattr(fn, "__checked__"), f"{name} is not wrapped by checked()"
        params = [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]
        missing = [p for p in params if p not in API[name]]
        assert not missing, f"{name}: no rule for {missing}"


HOSTILE_VALUES = st.one_of(
    st.sampled_from([NAN, INF, -INF, -1, -1e9, 0, 1, -0.0, 10**30, -(10**30), 2**63, 10**5000, True, False, None,
                     b"x", bytearray(b""), {1, 2}, frozenset(), object(), "", " ", "\n", "x\n", "\x00", "\ud800",
                     "a" * 5000, "[/]", "\x1b]0;x\x07", [], {}, {1: "a", "1": "b"}, [NAN], {"a": {"b": INF}},
                     NOT_JSON["deep"], NOT_JSON["self"], ("x",), ["x", 1], decimal.Decimal("NaN"),
                     fractions.Fraction(1, 3), 1j, len, "1", "0", "-1", "nan", "2h", "t", "a", "yes",
                     {"id": "y"}, [{"id": "y"}], [{"label": "x"}], ("a", b"x"), ("a", "x")]),
    st.text(max_size=30), st.integers(), st.floats(), st.binary(max_size=8),
    st.lists(st.one_of(st.integers(), st.floats(), st.text(max_size=3)), max_size=3),
    st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), st.one_of(st.floats(), st.text(max_size=3)),
                    max_size=3),
)
METHODS = sorted(m for m in API if hasattr(Ledger, m) and API[m])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_any_value_in_any_argument_is_a_warden_error_or_works(world: World, data: st.DataObject) -> None:
    """The property: a hostile value in any one argument of any public method either works (it
    was valid after all) or raises a WardenError with one clear line, having written nothing —
    never a TypeError, ValueError, OverflowError or a driver error."""
    method = data.draw(st.sampled_from(METHODS), label="method")
    params = [p for p in inspect.signature(getattr(Ledger, method)).parameters if p not in ("self", "cls")]
    arg = data.draw(st.sampled_from(params), label="argument")
    value = data.draw(HOSTILE_VALUES, label="value")
    try:
        kwargs = world.valid(method)
    except WardenError:
        return  # e.g. the task was aborted by an earlier example: the fixture's state moved on
    kwargs[arg] = value
    before = state(world.l)
    try:
        call(world.l, method, kwargs)
    except StaleRevision as e:
        assert_one_clear_line(str(e))
    except WardenError as e:
        assert_one_clear_line(str(e))
        assert state(world.l) == before, f"{method}({arg}=...) refused but wrote"
    except TypeError as e:
        # Only an argument list Python itself rejects (a programming error, not a value).
        assert "argument" in str(e) and method == "commit_many", e


def test_nul_is_refused_where_the_backend_cannot_store_it(world: World, backend: str) -> None:
    """An id never holds NUL; free text may on SQLite, and on PostgreSQL (which cannot store it)
    it is refused with a line saying so rather than a driver error."""
    led = world.l
    for fn, arg in ((lambda: led.task("t\x00"), "task_id"), (lambda: led.node("t", "a\x00"), "key"),
                    (lambda: led.claim("t", "w\x00"), "worker"), (lambda: led.intend_effect(world.ce, "fx\x00"),
                                                                  "effect_key")):
        refused_cleanly(led, fn, arg)
    if backend == "sqlite":
        led.note(world.ce, "nul\x00inside")
        assert any("nul\x00inside" == e.summary for e in led.events(0, task_id="t"))
    else:
        e = refused_cleanly(led, lambda: led.note(world.ce, "nul\x00inside"), "text")
        assert "PostgreSQL" in str(e)
    led.create_task(world.fresh("n"), inputs={"s": "nul\x00in json is escaped"})


def test_a_lease_keeper_drops_a_refused_value_and_keeps_the_lease(world: World, clock) -> None:
    """A bad observation must not stop the heartbeats (the lease would lapse): it is dropped,
    said in last_error, and the lease is extended all the same."""
    from store.worker import LeaseKeeper

    # no step limit: the 120 s default would cap this claim's long lease below `before`
    keeper = LeaseKeeper(world.l, world.ca, interval_s=3600, max_step_s=None)
    before = world.l.node("t", "a").lease_until
    clock.advance(10)
    assert keeper.progress(observation="\ud800 not text", now=True) is True
    assert "observation" in (keeper.last_error or "") and not keeper.lost
    assert world.l.node("t", "a").lease_until > before
    with pytest.raises(InvalidValue):
        keeper.progress(tokens=float("nan"))
