#!/usr/bin/env python3
"""Screenshots of the console served in a browser (`warden serve`), as PNG, for docs/deployment.md.

    python scripts/browser_screenshots.py [--out screenshots]

Builds the same demo ledger as scripts/screenshots.py (same seed, history ending a minute ago), serves it with `warden serve`
on a free loopback port and takes the pictures in headless Chromium (Debian's ``chromium``,
driven by playwright): the task list, the task graph, and the page after the console quit. The
served console runs in real time, so ages and countdowns differ from one run to the next.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store import ManualClock  # noqa: E402
from console.demo import build_demo_ledger  # noqa: E402
from tests.support.browser import Tab, chromium, screenshots_out  # noqa: E402
from tests.support.serve import serving  # noqa: E402

SEED = 7
TASK = "maint-billing"


def main(argv: list[str] | None = None) -> int:
    out = screenshots_out(argv, __doc__.split("\n\n")[0], ROOT / "screenshots")
    with tempfile.TemporaryDirectory(prefix="warden-browser-shots-") as tmp:
        # the served console runs on the real clock: start the history a minute ago so ages read true
        paths, _ = build_demo_ledger(Path(tmp) / "demo", seed=SEED, clock=ManualClock(time.time() - 60.0),
                                     advance_s=30.0)
        with serving(paths.ledger, "--operator", "alice") as served, chromium() as browser:
            tab = Tab(browser, served)
            page = tab.page
            page.set_viewport_size({"width": 1000, "height": 640})
            page.goto(served.url)
            tab.wait_screen(lambda s: TASK in s and "P80" in s, "the task list")
            # select the maintenance task, up the list then down (the list is drawn unfinished
            # first: where it stands depends on the demo's state); the status line names the selection
            for key in "k" * 15 + "j" * 30:
                if re.search(rf"{TASK}\b", tab.screen().split("\n")[-2]):
                    break
                page.keyboard.press(key)
                page.wait_for_timeout(150)
            else:
                raise SystemExit(f"browser_screenshots: {TASK} could not be selected in the task list")
            page.wait_for_timeout(1500)  # estimates and signals drawn
            page.screenshot(path=str(out / "browser-tasks.png"))
            page.keyboard.press("Enter")
            tab.wait_screen(lambda s: f"task {TASK}" in s and "NODE" in s, "the task graph")
            page.wait_for_timeout(1000)
            page.screenshot(path=str(out / "browser-graph.png"))
            page.keyboard.press("q")
            tab.wait_screen("The console ended", "the end of the session")
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / "browser-ended.png"))
            assert not tab.foreign, tab.foreign
            tab.close()
    for name in ("browser-tasks", "browser-graph", "browser-ended"):
        print(out / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
