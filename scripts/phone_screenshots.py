#!/usr/bin/env python3
"""Screenshots of `warden serve`'s handoffs page on a phone (390×844, touch), as PNG, for docs/operations.md.

    python scripts/phone_screenshots.py [--out screenshots]

Builds a small ledger with three open handoffs (a confirmation with a recommendation, an edit's
permission request with its diff, a Bash permission request with Claude Code's "always allow" rule
and one rule already granted in the task), serves it with `--allow-actions` on a free loopback
port and takes, in headless Chromium (Debian's ``chromium``, driven by playwright): the list behind
the server's token, and one handoff opened through a notification's single-use link.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store import Ledger  # noqa: E402
from store.notify.state import State, default_path  # noqa: E402
from tests.support.browser import chromium, screenshots_out  # noqa: E402
from tests.support.serve import serving  # noqa: E402

TOKEN = "phone-screenshots-0123456789"
TASK = "prod-deploy"
DIFF = "--- a/app/parser.py\n+++ b/app/parser.py\n@@ -1,2 +1,2 @@\n def parse(x):\n-    return x\n+    return x.strip()"
RULE = {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}], "behavior": "allow",
        "destination": "session"}
RULE_OPTIONS = [{"id": "allow", "label": "Allow Bash"}, {"id": "deny", "label": "Deny"},
                {"id": "always-1", "label": "Always: allow Bash(npm test:*) — this session"}]
RULE_CONTEXT = {"tool": "Bash", "session": "9b2e4c1a",
                "rules": [{"option": "always-1", "rule": RULE, "text": "allow Bash(npm test:*) — this session"}]}


def build(path: str) -> str:
    """The ledger; returns the id of the handoff the link opens."""
    with Ledger.open(path, create=True) as led:
        led.create_task(TASK)
        for key in ("tests-1", "migrate", "edit", "tests-2"):
            led.add_node(TASK, key, kind="step")
        granted = led.request_human(led.claim(TASK, "claude-0", lease_s=3600, key="tests-1"), kind="permission",
                                    question="Allow Claude Code to use Bash?", options=RULE_OPTIONS,
                                    context={**RULE_CONTEXT, "input": "npm test -- lexer"})
        led.apply(led.plan_resolve(granted, option="always-1"), operator="alice (phone page from 192.0.2.10)")
        led.request_human(
            led.claim(TASK, "claude-1", lease_s=3600, key="migrate"), kind="confirm",
            question="Run the migration on prod now?\nIt locks the orders table for ~40 s.",
            options=[{"id": "run", "label": "Run it now", "consequence": "orders wait ~40 s"},
                     {"id": "wait", "label": "Wait for 02:00", "consequence": "the deploy ends tonight"}],
            recommendation="wait",
            context={"done": "the 1.4.2 deploy is built and its tests pass",
                     "stuck": "the migration locks the orders table; the time to run it is yours",
                     "why": "02:00 has the fewest orders", "table": "orders"})
        led.request_human(
            led.claim(TASK, "claude-2", lease_s=3600, key="edit"), kind="permission", question="Allow Claude Code to use Edit?",
            context={"tool": "Edit", "diff": DIFF, "file": "app/parser.py", "session": "9b2e4c1a"},
            options=[{"id": "allow", "label": "Allow Edit"}, {"id": "deny", "label": "Deny"}])
        return led.request_human(led.claim(TASK, "claude-3", lease_s=3600, key="tests-2"), kind="permission",
                                 question="Allow Claude Code to use Bash?", options=RULE_OPTIONS,
                                 context={**RULE_CONTEXT, "input": "npm test -- parser"})


def main(argv: list[str] | None = None) -> int:
    out = screenshots_out(argv, __doc__.split("\n\n")[0], ROOT / "screenshots")
    with tempfile.TemporaryDirectory(prefix="warden-phone-shots-") as tmp:
        path = str(Path(tmp) / "ledger.db")
        linked = build(path)
        state = State(default_path(path, None))
        try:
            key = state.mint(linked, "oncall", time.time(), 3600.0)
        finally:
            state.close()
        with serving(path, "--token", TOKEN, "--allow-actions", "--operator", "alice", token=TOKEN) as served, \
                chromium() as browser:
            ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True,
                                      device_scale_factor=2)
            page = ctx.new_page()
            page.goto(f"{served.origin}/m/?token={TOKEN}")
            page.wait_for_selector(".card ul.rules")
            page.evaluate("document.fonts.ready")
            page.screenshot(path=str(out / "phone-handoffs.png"), full_page=True)
            link = ctx.new_page()
            link.goto(f"{served.origin}/m/h/{linked}#k={key}")
            link.wait_for_selector(".card .send")
            link.evaluate("document.fonts.ready")
            link.screenshot(path=str(out / "phone-link.png"))
            ctx.close()
    for name in ("phone-handoffs", "phone-link"):
        print(out / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
