"""`warden serve` in a real browser: headless Chromium (Debian's ``chromium``) driven by playwright.

The terminal's text is read from xterm.js's own buffer: a test-only init script notes the
``Terminal`` object when textual.js builds it (the page ships no such hook). Every request the
page makes is recorded, and any to another host is aborted and fails the test.

Where no browser can be had the tests skip, saying why; under CI (``$CI`` set) they fail instead,
since CI must run them (``.ci/run`` installs Chromium).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("textual_serve", reason="warden serve needs the serve extra: pip install 'warden[serve]'")

from tests.support.browser import CHROMIUM, Tab, chromium  # noqa: E402
from tests.support.serve import serving  # noqa: E402
from tests.support.waiting import Deadline  # noqa: E402

from console.glyphs import READ_ONLY_NOTICE, read_only_notice  # noqa: E402
from store import Ledger  # noqa: E402

pytestmark = pytest.mark.slow

# Status glyphs, signal, arrows, box drawing, blocks and the command palette's icon.
GLYPHS = list("○▶✋⏸✔✖⊘⚠→←↑↓…─│╭╮╰╯▁▄█▊▏░⏎⌫🔎★▼")

GLYPH_JS = """async (chars) => {
  await document.fonts.load("24px 'Roboto Mono'", chars.join(''));
  const canvas = document.createElement('canvas');
  canvas.width = 80; canvas.height = 40;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const draw = (ch) => {
    ctx.clearRect(0, 0, 80, 40);
    ctx.font = "24px 'Roboto Mono'";
    ctx.fillStyle = '#000';
    ctx.fillText(ch, 4, 30);
    return Array.from(ctx.getImageData(0, 0, 80, 40).data).join(',');
  };
  const tofu = draw('\\u{10FFFD}'), blank = draw(' ');
  return chars.filter(ch => { const d = draw(ch); return d === tofu || d === blank; });
}"""


def _need_browser() -> Any:
    reason = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "playwright is not installed (pip install 'warden[test]')"
        sync_playwright = None
    if reason is None and not os.access(CHROMIUM, os.X_OK):
        reason = f"no browser: {CHROMIUM} is missing (apt-get install chromium)"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the browser tests (.ci/run installs Chromium)")
        pytest.skip(reason)
    return sync_playwright


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(_need_browser()) as b:
        yield b


def test_console_in_the_browser(browser: Any, ledger_path: Path) -> None:
    with serving(ledger_path) as served:
        tab = Tab(browser, served)
        try:
            tab.page.goto(served.url + "&fontsize=15")
            assert tab.page.url == served.origin + "/?fontsize=15"  # the token left the address bar
            assert tab.page.evaluate("document.getElementById('terminal').dataset.fontSize") == "15"
            tab.wait_screen(lambda s: re.search(r"report-001\s+▶ active", s) and re.search(r"idle-002\s+⏸ parked", s)
                            and "read-only" in s, "the task list, read-only")
            # the keyboard is in the terminal without a click
            assert tab.page.evaluate("document.activeElement.classList.contains('xterm-helper-textarea')")
            # every glyph the console uses is drawn from the served fonts (not tofu, not blank)
            assert tab.page.evaluate(GLYPH_JS, GLYPHS) == []
            loaded = tab.page.evaluate("""() => { const o = []; document.fonts.forEach(f => {
                if (f.status === 'loaded') o.push(f.unicodeRange.slice(0, 12)); }); return o; }""")
            assert len(loaded) >= 4  # Roboto Mono and the three fallbacks the screen needed

            tab.page.keyboard.press("Enter")  # task list → graph
            text = tab.wait_screen(lambda s: "task report-001" in s and "NODE" in s, "the task graph")
            text = tab.wait_screen(lambda s: re.search(r"section-2\s+✋ blocked", s) is not None, "the graph's rows")
            assert re.search(r"collect\s+✔ succeeded", text) and re.search(r"section-3\s+✖ failed", text)

            tab.page.keyboard.press("p")  # an action key, read-only: a notice, no dialog, saying how to act
            text = tab.wait_screen(lambda s: "actions are disabled" in " ".join(s.split()), "the read-only notice")
            assert "--allow-actions" in " ".join(text.split()) and "--read-only)" not in text

            tab.page.keyboard.press("q")
            text = tab.wait_screen("The console ended", "the session's end")
            assert "The console ended (exit status 0)." in text
            assert tab.page.locator("#ended").is_visible()

            assert tab.foreign == []
            assert tab.requests and all(u.startswith((served.origin + "/", served.ws_url)) for u in tab.requests)
            assert not [m for m in tab.console if "Content Security Policy" in m or "Refused to" in m]
        finally:
            tab.close()
    with Ledger.open(str(ledger_path), create=False, read_only=True) as ledger:
        assert [a.operator for a in ledger.actions()] == ["op@host"]  # only the fixture's own park
    assert READ_ONLY_NOTICE.endswith("actions are disabled")  # this process was not served
    assert "--read-only" in READ_ONLY_NOTICE and "--allow-actions" in read_only_notice({"WARDEN_SERVED": "1"})


def test_strangers_are_refused(browser: Any, ledger_path: Path) -> None:
    with serving(ledger_path) as served:
        tab = Tab(browser, served)
        try:
            resp = tab.page.goto(served.origin + "/")
            assert resp.status == 401 and "token" in tab.page.content()
            resp = tab.page.goto(served.origin + "/?token=" + served.token[:-2])
            assert resp.status == 403
            resp = tab.page.goto(served.origin + "/static/js/textual.js")
            assert resp.status == 401
            opened = tab.page.evaluate("""(url) => new Promise(done => {
                const ws = new WebSocket(url);
                ws.onopen = () => { ws.close(); done('open'); };
                ws.onerror = () => done('refused');
                ws.onclose = () => done('refused');
            })""", served.ws_url)
            assert opened == "refused"
            assert served.sessions() == []
            assert tab.foreign == []
        finally:
            tab.close()


def test_allowed_actions_are_recorded_as_the_served_operator(browser: Any, ledger_path: Path) -> None:
    with serving(ledger_path, "--allow-actions", "--operator", "alice-web") as served:
        tab = Tab(browser, served)
        try:
            tab.page.goto(served.url)
            tab.wait_screen(lambda s: "report-001" in s and "idle-002" in s, "the task list")
            tab.page.keyboard.press("p")  # park the selected task (report-001)
            tab.wait_screen(lambda s: "Park" in s and "report-001" in s and "reason" in s.lower(), "the park dialog")
            tab.page.keyboard.type("paused from the browser")
            tab.wait_screen("paused from the browser", "the reason typed into the dialog")
            tab.page.keyboard.press("Control+s")
            deadline = Deadline(60)
            while True:
                with Ledger.open(str(ledger_path), create=False, read_only=True) as ledger:
                    acts = [a for a in ledger.actions() if a.reason == "paused from the browser"]
                if acts or deadline.expired():
                    break
                tab.page.wait_for_timeout(100)
            assert acts, "the park was not applied; the terminal shows:\n" + tab.screen()
            (act,) = acts
            assert (act.operator, act.action, act.task_id, act.result) == ("alice-web", "park", "report-001", "applied")
            tab.wait_screen(lambda s: re.search(r"report-001\s+⏸ parked", s) is not None, "the parked task")
            assert tab.foreign == []
        finally:
            tab.close()
