#!/usr/bin/env python3
"""Regenerate the console screenshots (SVG, plus PNG via ``rsvg-convert``) from a deterministic demo.

    python scripts/screenshots.py [--out screenshots] [--size 100x30] [--no-png]

The ledger is ``console.demo.build_demo_ledger`` with a fixed seed on a ManualClock: the same
history, the same live agents run the same simulated seconds in-process, no real time involved. The
console is driven with Textual's Pilot on a clock fixed at that moment, so the same code gives the
same pictures. Every screen is captured, and every dialog the console has (an action key that
opens no modal is reported, not captured).

PNG needs ``rsvg-convert`` (Debian/Ubuntu: ``apt-get install -y librsvg2-bin``); without it only
the SVGs are written and the script says so.

Two things make the pictures read as the terminal does (:func:`readable_svg`): ``xml:space=
"preserve"`` — Textual writes each styled run as its own ``<text>`` starting with its spaces
(``&#160;``), which librsvg otherwise drops, running words together ("no_new_infoalarm",
"^ppalette", an indented line flush left); and a font stack naming the fonts that hold what Fira
Code lacks (``✋`` was tofu): DejaVu Sans Mono (``fonts-dejavu-core``) and the fallback subsets
``warden serve`` ships (console/serve/static/fonts: Noto Sans Symbols 2, Noto Emoji), which
:func:`to_png` hands to rsvg-convert's fontconfig as TrueType (fontTools, from the ``test`` extra:
librsvg's cairo lists a WOFF2 font but draws tofu from it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store import ManualClock  # noqa: E402
from console.demo import build_demo_ledger, maint_simulation  # noqa: E402

SEED = 7
T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
ADVANCE_S = 30.0  # the live agents' simulated seconds before the pictures are taken
TASK = "maint-billing"
SERVED_FONTS = ROOT / "console" / "serve" / "static" / "fonts"
FONT_STACK = 'Fira Code, "DejaVu Sans Mono", "Noto Sans Symbols2", "Noto Emoji", monospace'
TEXTUAL_STACK = "font-family: Fira Code, monospace;"


def readable_svg(svg: str) -> str:
    """Textual's SVG with its spaces kept by every renderer and a font stack that draws every glyph."""
    if 'xml:space="preserve"' not in svg:
        svg = svg.replace("<svg ", '<svg xml:space="preserve" ', 1)
    return svg.replace(TEXTUAL_STACK, f"font-family: {FONT_STACK};")

MIND_TASK = "perf-audit"  # requirements, conclusions, a replan, a memory proposed (console/demo/mind.py)


async def wait_for(pilot: Any, cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"screenshots: timed out waiting for {what}")
        await pilot.pause(0.02)


def idle(app: Any) -> bool:
    busy = [w for w in app.workers if w.group in ("analysis", "ledger", "graph") and w.is_running]
    return app.settled() and not busy


async def settle(pilot: Any) -> None:
    app = pilot.app
    for _ in range(2):
        await wait_for(pilot, lambda: idle(app), "the console to settle")
        await pilot.pause()


async def analysed(pilot: Any) -> None:
    """Estimates and signals computed now rather than on the app's timer."""
    await settle(pilot)
    if pilot.app.analysis_enabled:
        pilot.app.analysis.run_analysis()
    await settle(pilot)


class Shooter:
    def __init__(self, app: Any, pilot: Any, out: Path) -> None:
        self.app = app
        self.pilot = pilot
        self.out = out
        self.written: list[Path] = []
        self.missing: list[str] = []

    async def shoot(self, name: str, title: str) -> None:
        from textual.widgets import Input

        await settle(self.pilot)
        for inp in self.app.screen.query(Input):
            inp.cursor_blink = False
        await self.pilot.pause()
        svg = readable_svg(self.app.export_screenshot(title=f"warden — {title}"))
        path = self.out / f"{name}.svg"
        path.write_text(svg, encoding="utf-8")
        self.written.append(path)

    async def press_until(self, key: str, cond: Callable[[], bool], what: str, limit: int = 60) -> None:
        for _ in range(limit):
            if cond():
                return
            await self.pilot.press(key)
            await self.pilot.pause()
        raise SystemExit(f"screenshots: could not select {what}")

    async def dialog(self, key: str, name: str, title: str,
                     then: tuple[tuple[str, ...], str, str] | None = None) -> None:
        """Press ``key``; if a modal opens, capture it (and, with ``then``, press those keys and
        capture again); close whatever opened with escape."""
        from textual.screen import ModalScreen

        depth = len(self.app.screen_stack)
        await self.pilot.press(key)
        await settle(self.pilot)
        if len(self.app.screen_stack) == depth:
            self.missing.append(f"{name} ({key!r} opened no dialog)")
            return
        opened = type(self.app.screen).__name__
        if isinstance(self.app.screen, ModalScreen):
            await self.shoot(name, title)
            if then is not None:
                keys, name2, title2 = then
                await self.pilot.press(*keys)
                await self.shoot(name2, title2)
        else:
            self.missing.append(f"{name} ({key!r} opened {opened}, not a dialog)")
        await self.pilot.press("escape")
        await wait_for(self.pilot, lambda: len(self.app.screen_stack) == depth, f"{opened} to close")


async def take_all(out: Path, size: tuple[int, int]) -> Shooter:
    from console.app import WardenApp
    from console.commands import WardenCommands
    from console.screens import NodeDetailScreen, TaskGraphScreen

    loop_key = f"fix-{maint_simulation(SEED, faults=True)['loop_module']}"
    app = WardenApp("ledger.db", "runs", operator="operator@console", project=".", records=None,
                    clock=ManualClock(T0 + ADVANCE_S))
    async with app.run_test(size=size) as pilot:
        s = Shooter(app, pilot, out)
        await analysed(pilot)
        await s.press_until("j", lambda: app.screen.selected_task() == TASK, TASK)
        await analysed(pilot)
        await s.shoot("tasks", "task list")
        await s.dialog("p", "dialog-park-task", "park a task")
        await s.dialog("n", "dialog-narrow", "narrow a task's scope")
        await s.dialog("a", "dialog-abort", "abort a task")

        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen) and app.screen.model is not None,
                       "the task graph")
        await analysed(pilot)
        await s.press_until("j", lambda: app.screen.selected_node() == loop_key, loop_key)
        await analysed(pilot)
        await s.shoot("graph", f"task graph ({TASK})")
        await s.dialog("r", "dialog-rewind", "rewind a node")
        await s.dialog("p", "dialog-park-node", "park a node")
        await s.dialog("R", "dialog-recovery-advice", "recovery advice for a node")

        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.detail is not None
                       and app.screen.explained is not None, "the node detail and its signals")
        await settle(pilot)
        await s.shoot("node", f"node detail ({loop_key}, looping)")
        await pilot.press("escape", "escape")

        await pilot.press("h")
        await s.shoot("handoffs", "handoff inbox")
        await s.dialog("enter", "dialog-resolve", "resolve a handoff")
        await pilot.press("escape")

        await pilot.press("g")
        await s.shoot("runs", "runs and recovery")
        await s.dialog("enter", "dialog-recover", "recovery wizard",
                       then=(("enter",) * 5, "dialog-recover-decision", "recovery wizard: the decision"))
        await pilot.press("escape")

        await pilot.press("e")
        await s.shoot("events", "event log")
        await pilot.press("escape")

        # The task's mind: perf-audit's requirements, conclusions, rejected paths and its
        # replan; the memory inbox with the memory it proposed, and the confirm dialog.
        app.open_graph(MIND_TASK)
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen) and app.screen.model is not None
                       and app.screen.model.task_id == MIND_TASK, "the mind task's graph")
        await analysed(pilot)
        await pilot.press("m")
        await wait_for(pilot, lambda: getattr(app.screen, "loaded", False), "the Mind screen")
        await pilot.press("3", "j")
        await s.shoot("mind", f"the task's mind ({MIND_TASK})")
        await pilot.press("escape", "escape")
        await pilot.press("M")
        await wait_for(pilot, lambda: getattr(app.screen, "loaded", False), "the memory inbox")
        await s.shoot("memory-inbox", "memory inbox")
        await s.dialog("y", "dialog-memory-confirm", "confirm a proposed memory")
        await pilot.press("escape")

        await pilot.press("question_mark")
        await s.shoot("help", "help")
        await pilot.press("escape")

        # Textual's own commands (theme, screenshot, …) arrive from a second provider in whatever
        # order the two finish; the picture shows Warden's commands only, so it is repeatable.
        app.COMMANDS = {WardenCommands}
        await s.dialog("ctrl+p", "palette", "command palette")
    return s


def served_fonts(into: Path) -> None:
    """The fallback fonts ``warden serve`` ships, as TrueType files in ``into``."""
    try:
        from fontTools.ttLib import TTFont
    except ImportError:
        print("screenshots: fontTools is missing (pip install 'warden[test]'): ✋ and ⏸ may be tofu in the PNGs",
              file=sys.stderr)
        return
    for woff2 in sorted(SERVED_FONTS.glob("*.woff2")):
        font = TTFont(str(woff2))
        font.flavor = None
        font.save(str(into / woff2.with_suffix(".ttf").name))


def to_png(paths: list[Path]) -> list[Path]:
    exe = shutil.which("rsvg-convert")
    if exe is None:
        print("screenshots: rsvg-convert not found (apt-get install -y librsvg2-bin): PNGs not written",
              file=sys.stderr)
        return []
    out = []
    with tempfile.TemporaryDirectory(prefix="warden-fonts-") as tmp:
        conf = Path(tmp) / "fonts.conf"  # the system's fonts plus the ones warden serve ships
        served_fonts(Path(tmp))
        conf.write_text('<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n'
                        '  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>\n'
                        f"  <dir>{tmp}</dir>\n  <cachedir>{tmp}/cache</cachedir>\n</fontconfig>\n")
        env = dict(os.environ, FONTCONFIG_FILE=str(conf))
        for svg in paths:
            png = svg.with_suffix(".png")
            subprocess.run([exe, "--background-color=#0c0c0c", "-o", str(png), str(svg)], check=True, env=env)
            out.append(png)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "screenshots"), help="output directory (default: screenshots/)")
    p.add_argument("--size", default="100x30", help="terminal size WxH (default 100x30)")
    p.add_argument("--no-png", action="store_true", help="only the SVGs")
    args = p.parse_args(argv)
    w, h = (int(x) for x in args.size.lower().split("x"))
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="warden-shots-") as tmp:
        demo = Path(tmp) / "demo"
        paths, sim = build_demo_ledger(demo, seed=SEED, clock=ManualClock(T0), advance_s=ADVANCE_S)
        sim.ledger.close()
        os.chdir(demo)  # relative ledger/runs paths keep the pictures free of temp names
        try:
            shooter = asyncio.run(take_all(out, (w, h)))
        finally:
            os.chdir(here)
    pngs = [] if args.no_png else to_png(shooter.written)
    for path in shooter.written + pngs:
        print(path.relative_to(out.parent) if out.parent in path.parents else path)
    for m in shooter.missing:
        print(f"not captured: {m}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
