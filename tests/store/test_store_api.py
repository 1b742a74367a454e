"""The store's shape: a typed facade, one raw-SQL layer, one module per operator action.

These read the code (signatures, the AST) and drive the layer on both backends; the behaviour of
each action is tested in test_actions.py.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import Ledger, NodeSpec, Refused
from store.storage import sql
from store.actions import (
    AbortParams,
    ActionParams,
    CompensatedParams,
    EscalateParams,
    ConfirmMemoryParams,
    NarrowParams,
    ParkParams,
    Plan,
    ResolveParams,
    ResumeParams,
    RewindParams,
)
from store.storage.db import WardenPostgres, WardenSqlite
from store.storage.core import LedgerCore
from store.storage.models import MODELS, dumps
from store.storage.tables import TABLES, NodeRecord, TaskRecord
from tests.support.asks import ask

STORE = Path(__file__).resolve().parents[2] / "store"
OWNED = [STORE / "storage" / "sql.py", STORE / "reading" / "feed.py", STORE / "reading" / "cli_json.py",
         STORE / "worker.py", STORE / "facade.py", STORE / "checked.py", STORE / "storage" / "core.py",
         STORE / "storage" / "rows.py", STORE / "storage" / "budget_clock.py", STORE / "estimation" / "evidence.py",
         *sorted((STORE / "ledger").glob("*.py")), *sorted((STORE / "actions").glob("*.py")),
         *sorted((STORE / "mind").glob("*.py"))]


# ---------------------------------------------------------------------- the facade
def public_methods() -> list[tuple[str, typing.Any]]:
    return [(name, fn) for name, fn in inspect.getmembers(Ledger, predicate=callable)
            if not name.startswith("_") and (inspect.isfunction(fn) or inspect.ismethod(fn))]


def test_every_public_ledger_method_has_an_explicit_typed_signature() -> None:
    methods = public_methods()
    assert len(methods) >= 40  # the whole agent, operator and query API
    for name, fn in methods:
        sig = inspect.signature(fn)
        kinds = {p.kind for p in sig.parameters.values()}
        assert inspect.Parameter.VAR_POSITIONAL not in kinds and inspect.Parameter.VAR_KEYWORD not in kinds, name
        hints = typing.get_type_hints(fn)  # every annotation resolves to a real type
        assert "return" in hints, name
        missing = [p for p in sig.parameters if p not in ("self", "cls") and p not in hints]
        assert not missing, (name, missing)


@pytest.mark.parametrize("name", ["plan_park", "plan_resume", "plan_narrow", "plan_rewind", "plan_abort",
                                  "plan_resolve", "plan_escalate", "plan_memory", "apply"])
def test_operator_methods_return_a_plan(name: str) -> None:
    assert typing.get_type_hints(getattr(Ledger, name))["return"] is Plan


def test_ledger_is_the_shared_core() -> None:
    assert issubclass(Ledger, LedgerCore)
    for name in ("journal", "task_record", "node_record", "update_node", "bump_task", "ids_for_keys",
                 "maybe_complete_task", "maybe_fail_task", "bind"):
        assert callable(getattr(LedgerCore, name)), name


# ---------------------------------------------------------------------- the house, read from the code
def functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


@pytest.mark.parametrize("path", [p for p in OWNED if p.parent.name in ("ledger", "actions", "mind")
                                  or p.name in ("sql.py", "core.py", "rows.py", "budget_clock.py", "evidence.py",
                                                "checked.py")],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_imports_inside_functions(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for fn in functions(tree):
        inner = [n for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert not inner, f"{path.name}: {fn.name} imports inside its body (line {inner[0].lineno})"


NAMEDTUPLE_API = {"_fields", "_replace", "_asdict", "_make"}


@pytest.mark.parametrize("path", OWNED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_module_reaches_into_another_objects_private_members(path: Path) -> None:
    tree = ast.parse(path.read_text())
    bad = [(n.lineno, ast.unparse(n)) for n in ast.walk(tree)
           if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
           and n.attr not in NAMEDTUPLE_API
           and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))]
    assert not bad, f"{path.name}: {bad}"


@pytest.mark.parametrize("path", OWNED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_function_takes_an_untyped_ledger(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for fn in functions(tree):
        for a in fn.args.args + fn.args.kwonlyargs:
            if a.arg in ("ledger", "core", "tx"):
                assert a.annotation is not None and ast.unparse(a.annotation) not in ("Any", "typing.Any"), \
                    f"{path.name}: {fn.name}({a.arg}: {ast.unparse(a.annotation) if a.annotation else '?'})"


def test_raw_sql_is_written_only_through_the_sql_layer() -> None:
    """Only store/storage/sql.py calls the driver (``execute_sql`` / ``cursor``) in the modules it serves."""
    for path in [*OWNED, STORE / "storage" / "db.py", STORE / "storage" / "write_requests.py",
                 STORE / "storage" / "schema.py"]:
        if path.name == "sql.py":
            continue
        text = path.read_text()
        assert ".execute_sql(" not in text and ".cursor()" not in text, path


SQL_TEXT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|SET|LISTEN|CREATE|ALTER|DROP)\s", re.IGNORECASE)


@pytest.mark.parametrize("name", ["storage/db.py", "storage/backends.py"])
def test_the_database_opener_and_the_backends_write_no_sql_of_their_own(name: str) -> None:
    """The opener and the backend classes (which wrap the driver) leave every statement to
    store/storage/sql.py (the session set-up included): no SQL text in them, none sent by hand."""
    tree = ast.parse((STORE / name).read_text())
    texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    texts += ["".join(v.value for v in n.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
              for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)]
    assert not [t for t in texts if SQL_TEXT.match(t)], name
    calls = [ast.unparse(n.func) for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ("execute", "execute_sql", "executemany", "cursor")]
    # backends.py wraps the driver: its execute_sql and cursor overrides call Peewee's own (the
    # cursor override only refuses a connection inherited across fork()), and nothing else.
    assert all(c in ("super().execute_sql", "super().cursor") for c in calls), (name, calls)


# ---------------------------------------------------------------------- the sql layer
SQLITE = WardenSqlite(None)
POSTGRES = WardenPostgres(None)


def test_placeholders_translate_per_backend() -> None:
    text = "SELECT 1 FROM node WHERE task_id = ? AND key IN (?, ?)"
    assert sql.translate(SQLITE, text) == text
    assert sql.translate(POSTGRES, text) == "SELECT 1 FROM node WHERE task_id = %s AND key IN (%s, %s)"
    assert sql.marks(3) == "?, ?, ?" and sql.marks(1) == "?"
    assert sql.lock(SQLITE, " FOR UPDATE") == "" and sql.lock(POSTGRES, " FOR UPDATE") == " FOR UPDATE"
    assert sql.true(SQLITE) == "1" and sql.true(POSTGRES) == "TRUE"
    assert sql.id_array(SQLITE, [3, 1])[1] == "[3,1]" and sql.id_array(POSTGRES, [3, 1])[1] == [3, 1]


@pytest.mark.parametrize("n", [0, 1, 499, 500, 501, 1234])
def test_chunks_cover_the_sequence_in_order(n: int) -> None:
    seq = list(range(n))
    parts = list(sql.chunks(seq))
    assert [x for p in parts for x in p] == seq and all(0 < len(p) <= sql.CHUNK for p in parts)


def test_set_clause_encodes_json_columns_and_increments() -> None:
    sets, values = sql.set_clause({"status": "pending", "version": sql.Inc(1), "rejections": ["b", "a"],
                                   "preconditions": {"z": 1, "a": [1, 2]}, "wall_used_s": sql.Inc(2.5)})
    assert sets == ("status = ?, version = version + ?, rejections = ?, preconditions = ?, "
                    "wall_used_s = wall_used_s + ?")
    assert values == ["pending", 1, '["b","a"]', '{"a":[1,2],"z":1}', 2.5]


def test_decoding_parses_json_and_booleans_and_copies_cached_values(ledger) -> None:
    class Bits(typing.NamedTuple):
        id: int
        preconditions: typing.Any
        retryable: bool
        always_admit: bool
        output: typing.Any
        key: str

    row = sql.fetch_row(ledger.db, Bits, "SELECT 7 AS id, '{\"a\":1}' AS preconditions, 1 AS retryable, "
                                         "0 AS always_admit, NULL AS output, 'k' AS key")
    assert row == Bits(7, {"a": 1}, True, False, None, "k")
    assert row is not None and row.retryable is True and row.always_admit is False
    cache: dict[str, typing.Any] = {}
    one, two = sql.json_value('{"s":[1]}', cache), sql.json_value('{"s":[1]}', cache)
    assert one == two == {"s": [1]} and one is not two
    one["x"] = 1
    assert sql.json_value('{"s":[1]}', cache) == {"s": [1]}
    assert sql.json_value("{}") == {} and sql.json_value("[]") == [] and sql.json_value("null") is None


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(output=JSON_VALUES, rejections=st.lists(st.text(max_size=20), max_size=5),
       pre=st.dictionaries(st.text(min_size=1, max_size=8), JSON_VALUES, max_size=4),
       tokens=st.integers(0, 10**6), wall=st.floats(0, 1e6, allow_nan=False))
def test_a_raw_update_reads_back_what_was_written(ledger: Ledger, output, rejections, pre, tokens, wall) -> None:
    """set_clause + update_node + node_record round-trip on the real backend (both in CI)."""
    if not ledger.tasks():
        ledger.create_task("t")
        ledger.add_node("t", "a")
    before = ledger.node_record("t", "a")
    with ledger.db.atomic():
        n = ledger.update_node(before.id, {"output": output, "rejections": rejections, "preconditions": pre,
                                              "tokens_used": sql.Inc(tokens), "wall_used_s": sql.Inc(wall),
                                              "retryable": False})
    assert n == 1
    after = ledger.node_record("t", "a")
    assert after.output == json.loads(dumps(output)) and after.rejections == rejections
    assert after.preconditions == json.loads(dumps(pre)) and after.retryable is False
    assert after.tokens_used == before.tokens_used + tokens
    assert after.wall_used_s == pytest.approx(before.wall_used_s + wall)
    view = ledger.node("t", "a")  # the facade's view decodes the same row the same way
    assert view.output == after.output and view.rejections == tuple(rejections)


# ---------------------------------------------------------------------- one module per action
PLAN_KEYS = ["action", "task_id", "target", "reason", "revision", "versions", "reset", "abandoned", "parked", "kept",
             "revoked_leases", "handoffs_withdrawn", "resolutions_reapplied", "effects_not_undone", "compensations",
             "warnings", "changes", "task_status", "params", "planned_at"]
PARAM_KEYS = {
    "park": ["node", "until", "until_ts", "wake_on", "now", "wake_conditions", "auto_resume"],
    "resume": ["node"],
    "narrow": ["set", "exclude", "preconditions_before", "preconditions_after", "out_of_scope", "unaffected"],
    "rewind": ["node"],
    "abort": [],
    "resolve": ["handoff", "node", "option", "answer", "question"],
    "escalate": ["node", "question", "context", "kind", "options", "recommendation"],
    "compensated": ["effect_key", "node", "external_id", "compensation", "compensation_node"],
    "memory-confirm": ["memory", "decision", "status_before", "status_after", "text", "scope", "workflow", "kind"],
}
PARAM_TYPES = {"park": ParkParams, "resume": ResumeParams, "narrow": NarrowParams, "rewind": RewindParams,
               "abort": AbortParams, "resolve": ResolveParams, "escalate": EscalateParams,
               "compensated": CompensatedParams, "memory-confirm": ConfirmMemoryParams}


@pytest.fixture
def small(ledger, clock):
    ledger.create_task("t", preconditions={"scope": "all"})
    ledger.add_nodes("t", [NodeSpec("a", "a"), NodeSpec("b", "b", ("a",), preconditions={"scope": "x"}),
                           NodeSpec("c", "c", ("b",)), NodeSpec("h", "h")])
    for k in ("a", "b"):
        c = ledger.claim("t", "w", lease_s=60, kinds=[k])
        if k == "a":
            ledger.intend_effect(c, "pr:a", compensation="close the PR")
            ledger.confirm_effect(c, "pr:a", external_id="#1")
            ledger.propose_memory(c, "the build comes before the tests", scope="workflow", source="tests")
        ledger.commit(c, output={k: 1})
    c = ledger.claim("t", "w", lease_s=60, kinds=["h"])
    hid = ask(ledger, c, kind="confirm", question="go?", options=[{"id": "yes"}, {"id": "no"}])
    clock.advance(1)
    return hid


def plans(ledger: Ledger, hid: str) -> dict[str, typing.Callable[[], Plan]]:
    return {
        "park": lambda: ledger.plan_park("t", reason="wait", until="2h", wake_on="node:c"),
        "resume": lambda: ledger.plan_resume("t", node="c"),
        "narrow": lambda: ledger.plan_narrow("t", reason="cut", set={"scope": "y"}),
        "rewind": lambda: ledger.plan_rewind("t", "a", reason="again"),
        "abort": lambda: ledger.plan_abort("t", reason="stop"),
        "resolve": lambda: ledger.plan_resolve(hid, option="yes", answer="fine"),
        "escalate": lambda: ledger.plan_escalate("t", "c", reason="look"),
        "compensated": lambda: ledger.plan_compensated("t", "pr:a", reason="closed by hand"),
        "memory-confirm": lambda: ledger.plan_memory(ledger.memories()[0].id, decision="confirm", reason="seen it"),
    }


@pytest.mark.parametrize("action", list(PARAM_KEYS))
def test_each_action_has_typed_params_and_the_plan_json_shape_is_unchanged(ledger, small, action) -> None:
    if action == "resume":
        ledger.apply(ledger.plan_park("t", node="c", reason="hold"), operator="op")
    plan = plans(ledger, small)[action]()
    assert isinstance(plan.params, PARAM_TYPES[action]) and plan.params.action == plan.action == action
    assert dataclasses.is_dataclass(plan.params) and isinstance(plan.params, ActionParams)
    j = plan.to_json()
    assert list(j) == PLAN_KEYS
    assert list(j["params"]) == PARAM_KEYS[action]
    assert plan.params.to_json() == j["params"]
    assert not isinstance(plan.params, typing.Mapping)  # read by attribute, not as a mapping
    json.dumps(j)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.params.node = "x"  # type: ignore[misc, union-attr]
    done = ledger.apply(plan, operator="op")
    jd = done.to_json()
    assert list(jd) == PLAN_KEYS + ["applied", "action_id", "revision_after", "differed"]
    assert jd["differed"] == {"summary": "", "notes": [], "nodes": [], "preview": {}}  # applied as previewed
    extra = ["handoff"] if action == "escalate" else []
    assert list(jd["params"]) == PARAM_KEYS[action] + extra
    # the audit row holds the plan as applied (here: as shown) and what differed
    assert ledger.actions(limit=1)[0].plan == {**j, "differed": jd["differed"]}


def test_a_plan_whose_params_no_action_applies_is_refused_and_changes_nothing(ledger, small) -> None:
    @dataclasses.dataclass(frozen=True)
    class Unknown(ActionParams):
        action = "rewind"

        def to_json(self) -> dict[str, typing.Any]:
            return {}

    plan = ledger.plan_rewind("t", "a", reason="again")
    before = (ledger.task("t").revision, [n.status for n in ledger.graph("t").nodes], ledger.last_event_id())
    with pytest.raises(Refused, match="cannot apply"):
        ledger.apply(dataclasses.replace(plan, params=Unknown()), operator="op")
    assert (ledger.task("t").revision, [n.status for n in ledger.graph("t").nodes], ledger.last_event_id()) == before
    assert ledger.actions() == []


def test_a_json_column_is_stored_as_canonical_text_and_read_decoded(ledger) -> None:
    """A column declared Json() (store/storage/tables.py) is written by the models as canonical JSON
    text and decoded by the raw layer by its name (sql.JSON_COLUMNS, derived from the declarations)."""
    ledger.create_task("t", inputs={"b": 1, "a": [1, 2]}, constraints=["x"])
    assert {"inputs", "constraints", "preconditions", "payload", "rejections", "plan"} <= sql.JSON_COLUMNS
    raw = sql.scalar(ledger.db, "SELECT inputs FROM task WHERE task_id = ?", ["t"])
    assert raw == dumps({"a": [1, 2], "b": 1}) == '{"a":[1,2],"b":1}'
    assert ledger.task_record("t").inputs == {"a": [1, 2], "b": 1} and ledger.task("t").constraints == ("x",)


# ---------------------------------------------------------------------- no package cycle
def _store_imports() -> dict[str, set[str]]:
    """Each store module's imports, counting what Python runs for them: importing ``a.b.c`` runs
    the package ``a.b`` first (its ``__init__``), unless it is the importer's own package (already
    running). The top package ``store`` (the public face, which runs everything) is left out:
    every module is under it."""
    known: dict[str, Path] = {}
    for path in STORE.rglob("*.py"):
        parts = path.relative_to(STORE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        known[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        if name == "store":
            continue
        pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else (node.module or "")
                targets = [t for t in (f"{base}.{a.name}" for a in node.names) if t in known] or [base]
            else:
                continue
            for t in targets:
                while t and t not in known:
                    t = t.rpartition(".")[0]
                while t and t != "store":  # the module and every package above it
                    if t != name and not name.startswith(t + "."):
                        out.add(t)
                    t = t.rpartition(".")[0]
        graph[name] = out
    return graph


def test_no_package_cycle_in_the_store() -> None:
    """A cycle like ``store.ledger`` (its ``__init__``) → facade → actions → the ledger's core
    made importing one part of the ledger import the actions, which import the ledger:
    the facade now lives above both packages (store/facade.py)."""
    graph = _store_imports()
    assert "store.ledger" in graph["store.actions.abort"]  # a part's users do run the package
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan: a strongly connected component of two or more is a cycle
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, cycles


# ---------------------------------------------------------------------- test hooks live in tests
def test_named_points_are_a_module_function_tests_replace_not_a_ledger_attribute(ledger, monkeypatch) -> None:
    """The points where a test holds a transaction open (store/storage/checkpoints.py) are
    reached through a module function, which tests replace; a Ledger carries no hook table."""
    from store.storage import checkpoints

    assert not hasattr(ledger, "hooks") and not hasattr(ledger, "hook")
    assert checkpoints.reach("claim.locked", "t", "a") is None  # production: nothing
    seen: list[tuple[str, str, str]] = []
    monkeypatch.setattr(checkpoints, "reach", lambda point, task, key: seen.append((point, task, key)))
    ledger.create_task("t")
    ledger.add_node("t", "a")
    c = ledger.claim("t", "w", lease_s=60)
    assert c is not None
    ledger.intend_effect(c, "pr:1")
    ledger.commit(c, output={"ok": 1})
    assert ("claim.locked", "t", "a") in seen and ("effect.fenced", "t", "a") in seen
    if ledger.db.backend == "postgresql":  # a retried write's outcome is recorded before it commits
        assert ("tx.before_commit", "", "commit") in seen


def test_no_store_module_imports_or_re_exports_another_modules_private_names() -> None:
    """``from .wakeups import _inotify`` (re-exported by feed.py) was a private name made public by
    accident: a name another module needs is public where it is defined."""
    bad = []
    for path in sorted(STORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                bad += [f"{path.relative_to(STORE.parent)}: {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, bad


@pytest.mark.parametrize("name", ["estimation/estimates.py", "reading/signals.py", "reading/analysis.py"])
def test_estimates_and_signals_read_through_the_ledger_not_their_own_queries(name: str) -> None:
    """What the estimates and the signals read is typed rows from store/estimation/evidence.py
    (or the facade), not queries they build themselves (no models, no Peewee, no raw SQL)."""
    tree = ast.parse((STORE / name).read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m in ("models", "peewee", "sql") or m.endswith(".models")}, (name, imported)
    calls = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
             and n.attr in ("fetch_all", "fetch_one", "tuple_rows", "dict_rows", "first_dict", "bind", "execute_sql")]
    assert not calls, (name, calls)


# ---------------------------------------------------------------------- one row-reading style
# A row is read into a NamedTuple whose fields are its columns (sql.fetch_rows / fetch_row, or the
# typed LedgerCore.task_record / node_record) and read by attribute: docs/architecture.md "Reading
# rows". These were the other ways (dict rows by string key, Peewee's query builder for reads);
# none is left in the store and none may come back.
DICT_ROW_CALLS = {"fetch_one", "first_dict", "dict_rows", "tuple_rows", "decode_row", "task_row", "node_row",
                  "node_row_or_none", "node_row_by_id"}
BUILDER_READS = {"dicts", "tuples", "namedtuples", "objects", "first", "get", "get_or_none", "scalar", "count",
                 "exists", "iterator", "peek"}
MODEL_NAMES = {m.__name__ for m in MODELS}


def _row_call(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in DICT_ROW_CALLS | {"fetch_all"}:
                return True
    return False


def row_key_reads(source: str) -> list[str]:
    """``row["col"]`` where ``row`` came from a row read in the same function (assigned from one,
    or a loop over one): the string-key style a renamed column does not break at type-check time."""
    found = []
    for fn in functions(ast.parse(source)):
        rows: set[str] = set()
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign) and _row_call(n.value):
                rows |= {t.id for t in n.targets if isinstance(t, ast.Name)}
            elif isinstance(n, (ast.For, ast.comprehension)) and (
                    _row_call(n.iter) or (isinstance(n.iter, ast.Name) and n.iter.id in rows)):
                rows |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
        found += [f"line {n.lineno}: {ast.unparse(n)}" for n in ast.walk(fn)
                  if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in rows
                  and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)]
    return found


def other_row_styles(source: str) -> list[str]:
    """Row reads in a style other than the one: a dict-row helper (or ``dict(zip(columns, row))``),
    or a read through Peewee's query
    builder (``Model.select(...)``, ``Model.get(...)``, ``.dicts()`` / ``.tuples()`` /
    ``.namedtuples()`` / ``.first()`` / ``.scalar()`` ... on a query). The query builder stays
    for writes (``insert``, ``update``, ``delete``) and the schema's DDL."""
    found = []
    for n in ast.walk(ast.parse(source)):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in DICT_ROW_CALLS or (name == "dict" and n.args and isinstance(n.args[0], ast.Call)
                                      and getattr(n.args[0].func, "id", "") == "zip"):  # dict(zip(cols, row))
            found.append(f"line {n.lineno}: {ast.unparse(n)[:80]}")
        elif isinstance(f, ast.Attribute) and name in ("select", "get", "get_or_none", "alias") and (
                isinstance(f.value, ast.Name) and f.value.id in MODEL_NAMES):
            found.append(f"line {n.lineno}: {ast.unparse(n)[:80]}")
        elif isinstance(f, ast.Attribute) and name in BUILDER_READS and _on_a_query(f.value):
            found.append(f"line {n.lineno}: {ast.unparse(n)[:80]}")
    return found


def _on_a_query(node: ast.AST) -> bool:
    """Whether an expression is a Peewee query chain (it starts from a model's select/insert/...)."""
    for n in ast.walk(node):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                and n.func.value.id in MODEL_NAMES):
            return True
    return False


def test_rows_are_read_by_attribute_and_string_keys_do_not_creep_back() -> None:
    over = {}
    for path in sorted(STORE.rglob("*.py")):
        reads = row_key_reads(path.read_text()) + other_row_styles(path.read_text())
        if reads:
            over[str(path.relative_to(STORE))] = reads
    assert not over, ("rows read in another style than the one (read them into a NamedTuple with "
                      f"sql.fetch_row/fetch_rows, or core.task_record/node_record): {over}")


def test_the_row_style_check_sees_the_old_styles() -> None:
    old = ("def f(core, t):\n    task = core.task_row(t)\n    return task['status']\n"
           "def g(db):\n    for r in sql.fetch_one(db, 'SELECT 1'):\n        r['task'] = r['task_id']\n"
           "def h(db):\n    return [dict(zip(COLS, v)) for v in sql.fetch_all(db, 'SELECT a FROM t')]\n")
    assert len(row_key_reads(old)) == 3 and len(other_row_styles(old)) == 3
    builder = ("def f(core, t):\n    a = core.bind(Task.select().where(Task.task_id == t)).dicts().first()\n"
               "    b = list(Node.select(Node.key).bind(core.db).tuples())\n"
               "    c = core.bind(Handoff.select(pw.fn.COUNT(Handoff.id))).scalar()\n"
               "    d = Event.get_or_none(Event.id == 1)\n"
               "    return a, b, c, d\n")
    assert len(other_row_styles(builder)) >= 4
    assert {int(x.split(":")[0].removeprefix("line ")) for x in other_row_styles(builder)} == {2, 3, 4, 5}
    new = ("def f(db, t):\n    task = sql.fetch_row(db, TaskState, 'SELECT ...', [t])\n    return task.status\n"
           "def g(core, t):\n    core.bind(Task.update(status='x').where(Task.task_id == t)).execute()\n"
           "    core.bind(Handoff.insert(task=t)).execute()\n    return sql.scalar(core.db, 'SELECT 1')\n")
    assert row_key_reads(new) == [] and other_row_styles(new) == []


def test_a_new_ledger_has_exactly_the_declared_columns(ledger) -> None:
    """store/storage/tables.py declares every table once: a new ledger's tables (made from the models
    derived from it) have exactly its records' fields, and the task and node records read a row whole."""
    have = {t: [c.name for c in ledger.db.get_columns(t)] for t in ledger.db.get_tables()}
    assert have == {t.name: [f.name for f in dataclasses.fields(t.record)] for t in TABLES}
    assert [f.name for f in dataclasses.fields(TaskRecord)] == have["task"]
    assert {f.name for f in dataclasses.fields(NodeRecord)} == set(have["node"])


def test_a_row_type_reads_its_columns_decoded(ledger) -> None:
    """sql.fetch_rows / fetch_row: the SELECT list is the row type's fields (sql.columns), JSON and
    boolean columns decoded as fetch_one decodes them."""

    class NodeBits(typing.NamedTuple):
        key: str
        preconditions: typing.Any
        retryable: bool
        est_wall_s: float | None

    ledger.create_task("t")
    ledger.add_node("t", "a", preconditions={"scope": "x"}, retryable=False, est_wall_s=2.5)
    ledger.add_node("t", "b")
    assert sql.columns(NodeBits, "n") == "n.key, n.preconditions, n.retryable, n.est_wall_s"
    rows = sql.fetch_rows(ledger.db, NodeBits, f"SELECT {sql.columns(NodeBits)} FROM node WHERE task_id = ? "
                                               "ORDER BY position", ["t"])
    assert rows == [NodeBits("a", {"scope": "x"}, False, 2.5), NodeBits("b", {}, True, None)]
    assert rows[0].retryable is False and rows[1].retryable is True
    one = sql.fetch_row(ledger.db, NodeBits, f"SELECT {sql.columns(NodeBits)} FROM node WHERE key = ?", ["b"])
    assert one == rows[1] and sql.fetch_row(ledger.db, NodeBits, "SELECT key, preconditions, retryable, "
                                                                  "est_wall_s FROM node WHERE key = 'zz'") is None
    with pytest.raises(TypeError):
        sql.columns(tuple)  # not a row type
