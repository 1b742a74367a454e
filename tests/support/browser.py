"""Driving a served console in headless Chromium (Debian's ``chromium``) with playwright.

The terminal's text is read from xterm.js's own buffer: a test-only init script (``HOOK``) notes
the ``Terminal`` object when textual.js builds it; the page ships no such hook. A ``Tab`` records
every request its page makes and aborts any to another host.
"""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from tests.support.serve import Served
from tests.support.waiting import Deadline

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HOOK = """
(() => {
  // Test-only: note each object that gets an xterm '_core' (the Terminal textual.js builds).
  window.__wardenTerms = [];
  Object.defineProperty(Object.prototype, '_core', {
    configurable: true,
    get() { return undefined; },
    set(value) {
      Object.defineProperty(this, '_core', {value, writable: true, configurable: true, enumerable: false});
      window.__wardenTerms.push(this);
    },
  });
})();
"""
SCREEN_JS = """() => {
  const t = (window.__wardenTerms || []).find(x => x && x.buffer && x.buffer.active && x.rows);
  if (!t) return null;
  const b = t.buffer.active, out = [];
  for (let i = 0; i < t.rows; i++) {
    const line = b.getLine(b.viewportY + i);
    out.push(line ? line.translateToString(true) : '');
  }
  return out.join('\\n');
}"""

@contextmanager
def chromium(sync_playwright: Any = None) -> Iterator[Any]:
    """Headless Chromium (Debian's ``chromium``, driven by playwright), closed on the way out."""
    if sync_playwright is None:
        from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def screenshots_out(argv: Sequence[str] | None, description: str, default: Path) -> Path:
    """A screenshot script's ``--out`` folder (made when missing)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", default=str(default))
    out = Path(ap.parse_args(argv).out)
    out.mkdir(parents=True, exist_ok=True)
    return out


class Tab:
    """A fresh browser context (no cookies) on one server, recording every request it makes."""

    def __init__(self, browser: Any, served: Served) -> None:
        self.served = served
        self.context = browser.new_context(viewport={"width": 1100, "height": 700})
        self.requests: list[str] = []
        self.foreign: list[str] = []
        self.console: list[str] = []
        self.context.add_init_script(HOOK)
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("websocket", lambda ws: self.requests.append(ws.url))
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))

    def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(self.served.origin + "/"):
            route.continue_()
        else:
            self.foreign.append(url)
            route.abort()

    def screen(self) -> str:
        return self.page.evaluate(SCREEN_JS) or ""

    def wait_screen(self, cond: Callable[[str], bool] | str, what: str = "", timeout: float = 60.0) -> str:
        check = (lambda s: cond in s) if isinstance(cond, str) else cond
        deadline = Deadline(timeout)
        while True:
            text = self.screen()
            if check(text):
                return text
            if deadline.expired():
                raise AssertionError(f"timed out waiting for {what or cond!r}; the terminal shows:\n{text}")
            self.page.wait_for_timeout(100)

    def close(self) -> None:
        self.context.close()
