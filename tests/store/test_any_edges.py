"""``Any`` only at the JSON edge: a value's type is named everywhere else.

Every ``Any`` in store/ and console/ is counted from the syntax tree (annotations written as strings
included); the only module allowed to spell it is store/jsontypes.py, whose aliases
(``JsonObject``, ``JsonMapping``, ``JsonArray``) name a decoded or to-be-encoded JSON value. The
tables below are what was left while the typing landed; each must be empty.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"store/jsontypes.py"}

# Left in the top-level store modules.
LEFT_STORE: dict[str, int] = {
    "store/storage/backends.py": 2,
    "store/storage/db.py": 3,
    "store/storage/pgshared.py": 2,
    "store/storage/sql.py": 4,
    "store/storage/write_requests.py": 1,
}

# Left in the store's packages (adapters, ledger, actions, mind, recovery, runs).
LEFT_STORE_PACKAGES: dict[str, int] = {}

# Left in the console.
LEFT_CONSOLE: dict[str, int] = {
    "console/analysis.py": 1,
    # the analysis worker's pipe: a frame is a pickled message, checked where it is read
    "console/analysis_client.py": 2,
    "console/analysis_worker.py": 1,
    "console/plainterm.py": 2,
}


def _any_in_text(text: str) -> int:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return 0
    return _count(tree)


def _count(tree: ast.AST) -> int:
    n = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "Any":
            n += 1
        elif isinstance(node, ast.Attribute) and node.attr == "Any":
            n += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "Any" in node.value:
            n += _any_in_text(node.value)  # an annotation written as a string, a cast("Any", …)
    return n


def any_uses(source: str) -> int:
    """How many times ``Any`` is used (not imported) in one module's source."""
    return _count(ast.parse(source))


def counts() -> dict[str, int]:
    found: dict[str, int] = {}
    for package in ("store", "console"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            n = any_uses(path.read_text(encoding="utf-8"))
            if n and rel not in ALLOWED:
                found[rel] = n
    return found


def test_the_guard_sees_every_spelling() -> None:
    assert any_uses("from typing import Any\n") == 0  # importing is not using
    assert any_uses("def f(x: Any) -> None: ...") == 1
    assert any_uses("def f(x) -> 'dict[str, Any]': ...") == 1
    assert any_uses("import typing\nx: typing.Any = 1") == 1
    assert any_uses("y = cast('list[Any]', z)") == 1
    assert any_uses("y: 'Anything' = 1") == 0
    assert any_uses("s = 'Any text at all'") == 0


def test_any_only_at_the_json_edge() -> None:
    left = {**LEFT_STORE, **LEFT_STORE_PACKAGES, **LEFT_CONSOLE}
    found = counts()
    grew = {k: (left.get(k, 0), v) for k, v in found.items() if v > left.get(k, 0)}
    assert not grew, f"Any outside the JSON edge (module: (allowed, found)); use store/jsontypes.py or a real type: {grew}"
    stale = {k: (v, found.get(k, 0)) for k, v in left.items() if found.get(k, 0) < v}
    assert not stale, f"fewer Any than the table says — lower it (module: (table, found)): {stale}"

