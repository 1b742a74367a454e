"""docs/agents.md is the agent contract: every ```python block in it runs, here.

Each block runs in an empty directory of its own (so ``Ledger.open("ledger.db")`` is a fresh
ledger), in a fresh namespace, compiled with the guide's file name and line numbers: a failing
block's traceback points at the line of docs/agents.md that broke.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUIDE = os.path.join(ROOT, "docs", "agents.md")
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def blocks() -> list[tuple[int, str]]:
    text = open(GUIDE, encoding="utf-8").read()
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in FENCE.finditer(text)]


def test_the_guide_has_the_contract_blocks():
    found = blocks()
    assert len(found) >= 8
    joined = "\n".join(code for _, code in found)
    for needle in ("LeaseLost", "request_human", "wait_for_resolution", "key=", "confirm_effect",
                   "failure_class", "LedgerBusy", "supervise(", '"warden", "run"', '"hook", "claude"',
                   'args=["mcp"'):
        assert needle in joined, needle


@pytest.mark.parametrize("line,code", blocks(), ids=lambda v: f"agents.md:{v}" if isinstance(v, int) else "")
def test_every_python_block_of_the_guide_runs(line, code, tmp_path, monkeypatch, capsys):
    if "langgraph" in code:
        pytest.importorskip("langgraph")
    if "from mcp import" in code:
        pytest.importorskip("mcp")
        # The SDK's stdio client hands the server the stderr it found at import (pytest's capture
        # has no descriptor): such a block runs as its own process, line numbers kept.
        script = tmp_path / "agents_md_block.py"
        script.write_text("\n" * (line - 1) + code)
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": ROOT}, timeout=600)
        assert done.returncode == 0, f"docs/agents.md:{line}: {done.stderr[-3000:]}"
        return
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["agent.py"])  # a block reading sys.argv sees no arguments
    source = "\n" * (line - 1) + code  # line numbers as in the guide
    exec(compile(source, GUIDE, "exec", dont_inherit=True), {"__name__": "__agents_md__"})
