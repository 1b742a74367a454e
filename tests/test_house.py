"""The house rules, read from the code (docs/architecture.md "The rooms" and "Rules of the house").

* No import circles among the project's modules (imports inside functions count).
* No module over 600 lines.
* The store never imports Textual or Rich; the console never imports Peewee; nobody imports a
  private module of Textual (``textual.widgets._x``): it breaks on the next release.
* The store's rooms are its layers: a module imports only from its own layer or the layers below
  (the table ``LAYERS``), except the few imports listed in ``UPWARD``, each with its reason.
* Tests import shared helpers by a package name (``tests.support.x``), never a bare ``conftest``:
  pytest imports every directory's conftest.py as the same module ``conftest``, so a bare import
  gets whichever was imported last and a command mixing test directories fails to collect.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("store", "console")
MAX_LINES = 600

# The store's layers, bottom first. A module belongs to the longest prefix that names it.
LAYERS: tuple[tuple[str, ...], ...] = (
    # the vocabulary every room speaks: errors, text, time, JSON, values, columns, the frozen views
    ("store.errors", "store.text", "store.clock", "store.jsontypes", "store.validate", "store.columns",
     "store.views", "store.mind.views", "store.mind.rules"),
    ("store.judges",),                         # pure judgements: novelty, budget gates, cost density
    ("store.storage", "store.runs"),           # databases, SQL, schema, locks, the journal; run directories
    ("store.estimation",),                     # P80 estimates from the ledger's history
    ("store.ledger", "store.mind"),            # the write side: the graph's writes and the task's mind
    ("store.actions", "store.parks", "store.recovery"),  # operator actions, parks and their wake-ups, recovery
    ("store.facade", "store.checked", "store.worker"),   # the typed Ledger and the agent helpers
    ("store.reading",),                        # the read side: feed, signals, analysis, tallies, reports
    ("store.adapters", "store.notify"),        # integrations: agents (warden run, mcp, hooks, LangGraph); notifications
    ("store",),                                # the public face and the public import paths
)

# Imports that go up a layer, each with why it must.
UPWARD = {
    ("store.ledger.fenced", "store.parks.wake"):
        "a write that may meet a park's wake condition checks it in its own transaction, where an "
        "auto-resume applies",
}


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


KNOWN = modules()


def imports_of(name: str, path: Path) -> tuple[set[str], set[str]]:
    """(the project's modules it imports, every name it imports) — imports inside functions too."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    inside: set[str] = set()
    every: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            subs = [f"{mod}.{a.name}" for a in node.names]
            every.update(subs)
            targets = [t for t in subs if t in KNOWN] or [mod]
        else:
            continue
        for t in targets:
            every.add(t)
            while t and t not in KNOWN:
                t = t.rpartition(".")[0]
            if t and t != name:
                inside.add(t)
    return inside, every


GRAPH = {name: imports_of(name, path) for name, path in KNOWN.items()}


def layer_of(name: str) -> int:
    best, found = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > best:
                best, found = len(p), i
    return found


def test_no_import_circles() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan, iterative enough for our depth
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v][0]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not circles, circles


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_module_size(name: str) -> None:
    lines = KNOWN[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{KNOWN[name].relative_to(ROOT)}: {lines} lines (the limit is {MAX_LINES})"


def test_the_two_packages_keep_to_their_side() -> None:
    bad = []
    for name, (_, every) in GRAPH.items():
        for imp in every:
            top = imp.split(".")[0]
            if name.startswith("store") and top in ("textual", "rich"):
                bad.append(f"{name} imports {imp}")
            if name.startswith("console") and top in ("peewee", "playhouse"):
                bad.append(f"{name} imports {imp}")
            if imp.startswith("textual") and any(p.startswith("_") for p in imp.split(".")[1:]):
                bad.append(f"{name} imports a private part of Textual: {imp}")
    assert not bad, bad


def test_every_store_module_has_a_room() -> None:
    assert [n for n in KNOWN if n.startswith("store") and layer_of(n) < 0] == []


def upward(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for name, inside in graph.items():
        if not name.startswith("store"):
            continue
        for dep in inside:
            if dep.startswith("store") and layer_of(dep) > layer_of(name) and (name, dep) not in UPWARD:
                bad.append(f"{name} (layer {layer_of(name)}) imports {dep} (layer {layer_of(dep)})")
    return sorted(bad)


def test_the_rooms_are_the_layers() -> None:
    bad = upward({name: inside for name, (inside, _) in GRAPH.items()})
    assert not bad, "\n".join(bad)


def test_every_upward_import_listed_is_still_needed() -> None:
    for name, dep in UPWARD:
        assert dep in GRAPH[name][0], f"{name} no longer imports {dep}: drop it from UPWARD"


def test_the_layer_check_sees_an_upward_import() -> None:
    """Not vacuous: storage importing the read side is caught, a listed exception is not, and the
    mind's value types sit on the floor while the rest of the mind is on the write side."""
    graph = {"store.storage.db": {"store.reading.feed"}, "store.ledger.fenced": {"store.parks.wake"}}
    assert upward(graph) == ["store.storage.db (layer 2) imports store.reading.feed (layer 7)"]
    assert layer_of("store.mind.views") == 0 and layer_of("store.mind.replan") == layer_of("store.ledger.claims")


def bare_conftest_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "conftest":
            bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
        elif isinstance(node, ast.Import) and any(a.name == "conftest" for a in node.names):
            bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return bad


def test_no_test_imports_a_bare_conftest() -> None:
    bad = [hit for path in sorted((ROOT / "tests").rglob("*.py")) for hit in bare_conftest_imports(path)]
    assert not bad, "import from tests.support.<module> instead:\n" + "\n".join(bad)


def test_test_files_of_several_directories_collect_in_one_command() -> None:
    """The console's tests first, then a store test, then the console again: the order in which a
    bare ``from conftest import`` found the store's conftest. Run as CI runs (no PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    files = ["tests/console/test_text.py", "tests/store/test_feed_passes.py", "tests/console/test_terminal_safety.py",
             "tests/clients/test_real_run.py", "tests/hostile/test_hostile_readonly.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider",
                           *files], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    for f in files:
        assert f in done.stdout, done.stdout[-3000:]
