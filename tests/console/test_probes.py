"""The console's measuring instruments live on the test side (tests/support/console_probes.py), not
as attributes of the app: the benchmark's probes still see the first frame, each
change on screen and the graph's first rows; and no production object carries a probe."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.console_probes import ConsoleProbes

from tests.support.console_app import graph_loaded, make_app, settle, wait_for

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, code: str) -> None:
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(ROOT)!r})
        from store import Ledger
        ledger = Ledger.open({str(path)!r}, create=False)
        {code}
        print(ledger.last_event_id())
        ledger.close()
    """)
    out = subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, timeout=60, capture_output=True, text=True)
    return int(out.stdout.strip().splitlines()[-1])


async def test_probes_see_the_first_frame_each_change_and_the_graph(ledger_path):
    app = make_app(ledger_path)
    probes = ConsoleProbes(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: probes.first_frame is not None, what="the first frame")
        await settle(pilot)
        app.open_graph("report-001")
        screen = app.screen
        probes.watch_graph(screen)
        await graph_loaded(pilot)
        await wait_for(pilot, lambda: probes.graph_first_rows is not None, what="the graph's first rows")
        eid = _write(ledger_path, "ledger.claim('report-001', worker='zed', lease_s=600)")
        await wait_for(pilot, lambda: eid in probes.painted, what="the change on screen")
        # painted after the row changed on the graph screen, never before
        g = screen.model
        assert g.nodes[g.index["figures"]].status == "running"
        assert probes.applied_changes >= 1 and probes.apply_seconds > 0


def test_no_console_object_carries_a_probe():
    """No ``*_probe`` attribute anywhere in the console package (they were test hooks)."""
    found = []
    for path in (ROOT / "console").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr.endswith("_probe"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.attr}")
    assert found == []
