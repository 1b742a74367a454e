"""The console tests' fixed ledger (built with a ManualClock at a fixed time) and the helpers that
drive a WardenApp under textual's pilot, waiting on conditions (never on sleeps).

Imported as ``from tests.support.console_app import …`` by the console's conftest and tests: a
module of its own name, so a pytest command mixing test directories finds it whatever conftest
was imported last."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

from textual.command import CommandList, CommandPalette

from store import Budget, Ledger, ManualClock
from tests.support.asks import ask
from tests.support.waiting import Deadline

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
NOW = T0 + 600.0

# Agent text carrying terminal escapes and markup: it must show literally, never act.
HOSTILE = ("evil \x1b]52;c;aGFja2Vk\x07 \x1b]8;;https://evil.example\x07link\x1b]8;;\x07 \x1b[2J"
           " \x9b31m \u202egnp.exe [@click=app.quit]x[/] [link=https://evil.example]y[/link] [/]")


PARAGRAPHS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def build_ledger(path: Path) -> Path:
    """Three tasks: a report in progress (every node status), a hostile one, a parked one."""
    clock = ManualClock(T0)
    ledger = Ledger.open(path, clock=clock)
    try:
        ledger.create_task("report-001", title="Quarterly pilot report",
                           budget=Budget(tokens=100_000, wall_s=4 * 3600))
        ledger.add_node("report-001", "collect", kind="tool", title="Collect sources", est_wall_s=60)
        ledger.add_node("report-001", "outline", kind="llm_call", deps=["collect"], title="Outline", est_wall_s=120)
        for i in range(1, 4):
            ledger.add_node("report-001", f"section-{i}", kind="llm_call", deps=["outline"],
                            title=f"Section {i}", est_wall_s=300)
        ledger.add_node("report-001", "figures", kind="tool", deps=["collect"], title="Figures", est_wall_s=90)
        ledger.add_node("report-001", "approve", kind="human", deps=["section-1", "section-2", "section-3"],
                        title="Approve the draft")
        ledger.add_node("report-001", "publish", kind="tool", deps=["approve", "figures"], title="Publish")

        c = ledger.claim("report-001", worker="alice", lease_s=60)  # collect
        clock.advance(40)
        ledger.heartbeat(c, units_done=3, units_total=3, tokens=1200, observation="found 3 sources\nsource a")
        ledger.commit(c, output={"sources": 3}, output_ref="run:r1/artifact/sources.json", tokens=300)
        clock.advance(5)
        c = ledger.claim("report-001", worker="alice", lease_s=300)  # outline
        clock.advance(100)
        ledger.note(c, "Outline keeps the three sections the constraints ask for", layer="decision")
        ledger.commit(c, output={"sections": 3}, tokens=4000)
        clock.advance(5)
        c1 = ledger.claim("report-001", worker="bob", lease_s=120)  # section-1
        c2 = ledger.claim("report-001", worker="carol", lease_s=120)  # section-2
        c3 = ledger.claim("report-001", worker="dave", lease_s=120)  # section-3
        clock.advance(30)
        ledger.fail(c3, error="rate limited by the provider", failure_class="transient", retryable=False)
        for k in range(4):
            clock.advance(20)
            ledger.heartbeat(c1, units_done=k + 1, units_total=8, tokens=800,
                             # new words each time (a counter alone is not new information)
                             observation="\n".join(f"paragraph {PARAGRAPHS[j]}" for j in range(k * 2 + 2)))
        ask(ledger, c2, kind="confirm", question="Include the unaudited Q3 figures?",
                             options=[{"id": "yes", "label": "Include", "consequence": "flagged as unaudited"},
                                      {"id": "no", "label": "Leave out", "consequence": "section is shorter"}],
                             recommendation="no")

        ledger.create_task("evil-task", title=HOSTILE)
        ledger.add_node("evil-task", "fetch", kind="tool\x1b[31m", title=HOSTILE)
        c = ledger.claim("evil-task", worker="mallory\x1b]0;pwned\x07")
        clock.advance(10)
        ledger.heartbeat(c, units_done=1, units_total=2, observation=HOSTILE)
        ledger.note(c, HOSTILE, layer="decision")

        ledger.create_task("idle-002", title="Nightly index rebuild")
        ledger.add_node("idle-002", "rebuild", kind="tool")
        ledger.apply(ledger.plan_park("idle-002", reason="waiting for the data drop"), operator="op@host")
    finally:
        ledger.close()
    return path


def make_app(target: Any = "ledger.db", **kw: Any):
    from console.app import WardenApp

    kw.setdefault("clock", ManualClock(NOW))
    return WardenApp(str(target), kw.pop("runs", "runs"), **kw)


async def wait_for(pilot: Any, cond: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Pump the app until ``cond()`` holds (a condition, not a sleep); fail after ``timeout`` idle
    seconds (a safety net that stretches with the machine's load, never a measurement)."""
    deadline = Deadline(timeout)
    while not cond():
        deadline.check(what or str(cond))
        await pilot.pause(0.01)


def graph_of(app: Any) -> Any:
    """The graph the open graph screen holds (the one nearest the top; None: no graph screen, or
    its first page is not in yet). Screens own their data: the app holds no graph."""
    from console.screens import TaskGraphScreen

    for s in reversed(app.screen_stack):
        if isinstance(s, TaskGraphScreen):
            return s.model
    return None


async def graph_loaded(pilot: Any) -> None:
    """Wait until the open task graph's model is complete (every node read)."""
    app = pilot.app
    await wait_for(pilot, lambda: graph_of(app) is not None and graph_of(app).complete, what="the graph")


def idle(app: Any) -> bool:
    """Loaded, no request queued, no one-off worker running, no analysis run under way."""
    busy = [w for w in app.workers if w.group in ("ledger", "graph", "tasks") and w.is_running]
    return app.settled() and not busy and not app.analysis.busy


async def settle(pilot: Any) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: idle(app), what="the app to settle")
    await pilot.pause()
    await wait_for(pilot, lambda: idle(app), what="the app to settle")
    await pilot.pause()


async def workers_done(pilot: Any, node: Any, timeout: float = 30.0) -> None:
    """Wait until every worker ``node`` started (a dialog's plan, apply, resolve or record
    worker) has finished: an apply that was started has written by then. A condition, not a sleep."""
    deadline = Deadline(timeout)
    while True:
        running = [w for w in pilot.app.workers if w.node is node and not w.is_finished]
        if not running:
            break
        deadline.check(f"the workers of {node}")
        try:  # an empty list would mean "every worker", the feed's included: never passed
            await asyncio.wait_for(pilot.app.workers.wait_for_complete(running), max(0.1, deadline.left()))
        except Exception:  # noqa: BLE001 - failed or cancelled workers are finished too
            pass
    await pilot.pause()


async def run_from_palette(pilot: Any, name: str, typed: str | None = None) -> None:
    """ctrl+p, type, move the highlight to ``name`` among the hits, enter — as an operator would."""
    app = pilot.app
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="the command palette")
    palette = app.screen
    hits = palette.query_one(CommandList)
    await pilot.press(*(typed or name))

    def hit_names() -> list[str]:
        return [str(hits.get_option_at_index(i).prompt).split("\n")[0] for i in range(hits.option_count)]

    await wait_for(pilot, lambda: name in hit_names() and hits.highlighted is not None, what=f"the hit {name!r}")
    target = hit_names().index(name)
    while hits.highlighted != target:
        await pilot.press("down" if hits.highlighted < target else "up")
    await pilot.press("enter")
    if name != "Quit":
        await wait_for(pilot, lambda: app.screen is not palette, what="the palette to close")
