"""The one-line header every screen shows: ledger, mode, live/snapshot, and the unavailable banner.

Outages: while the ledger cannot be read the header is the banner — ``⚠ UNAVAILABLE``,
or ``⚠ UNREACHABLE`` when a PostgreSQL server went away (said within about 2 s: the feed's LISTEN
connection is the sentinel, store/storage/watch.py) — with the one-line reason; for
``RECONNECTED_SHOWN_S`` after it is back the mode says ``reconnected`` (what changed meanwhile has
been read from the journal's cursor by then).
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.visual import VisualType
from textual.widgets import Static

from ..glyphs import MARKS
from ..host import host_of
from ..text import safe_line
from .covered import covered


RECONNECTED_SHOWN_S = 10.0


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { height: 1; width: 1fr; }
    """

    def __init__(self, title: str = "", *, id: str | None = None) -> None:
        super().__init__("", markup=False, id=id)
        self.title = safe_line(title)
        self._missed = False

    def catch_up(self) -> None:
        """Its screen is on top again: say what changed meanwhile."""
        if self._missed:
            self.update_from_app()

    def on_mount(self) -> None:
        hub = host_of(self).hub
        hub.subscribe(self, hub.status_changed, lambda _: self.update_from_app())
        self.update_from_app()

    def on_unmount(self) -> None:
        host_of(self).hub.forget(self)

    def update_from_app(self) -> None:
        if covered(self):  # drawn when its screen is back on top (console/widgets/covered.py)
            self._missed = True
            return
        self._missed = False
        app = host_of(self)
        text = Text()
        text.append(" warden ", style="bold reverse")
        text.append(" ")
        label = getattr(app, "ledger_label", "")  # several ledgers open: the one this screen shows
        if label:
            text.append(f"{safe_line(label)} ", style="bold")
        text.append(safe_line(self.title))
        mode = []
        if app.read_only:
            mode.append("read-only")
        mode.append("live" if app.live else "snapshot")
        back = app.reconnected_at
        if back is not None and time.monotonic() - back < RECONNECTED_SHOWN_S:
            mode.append("reconnected")
        text.append("  ·  " + " · ".join(mode), style="dim")
        count = app.open_alerts
        if count:  # alerts not seen yet (console/alerts.py)
            text.append("  ")
            waiting = app.waiting_alerts  # held back while a dialog is open
            more = f", {waiting} waiting" if waiting else ""
            text.append(f" {MARKS['alert']} {count} new alert{'s' if count != 1 else ''}{more} ", style="bold reverse")
        error = app.unavailable
        if error:
            self.set_class(True, "-unavailable")
            text = Text()
            word = "UNREACHABLE" if "unreachable" in error or error.startswith("cannot reach") else "UNAVAILABLE"
            text.append(f" {MARKS['signal']} {word} ", style="bold reverse")
            text.append(" " + safe_line(error))
        else:
            self.set_class(False, "-unavailable")
        self.update(text)


class InfoLine(Static):
    """A one-line, markup-free line of text under a list (selection details, filters)."""

    DEFAULT_CSS = """
    InfoLine { height: 1; width: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__("", markup=False, **kwargs)
        self._shown: object = None
        self._missed = False
        self._deferred: VisualType = ""

    def update(self, content: VisualType = "", *, layout: bool = False) -> None:
        """Its size never depends on the text, so no layout pass (a whole-screen reflow per
        change, otherwise); the same text again is not repainted at all."""
        if covered(self):  # drawn when its screen is back on top (console/widgets/covered.py)
            self._deferred = _kept(content)
            self._missed = True
            return
        self._missed = False
        if content == self._shown:
            return
        self._shown = _kept(content)
        super().update(content, layout=layout)

    def catch_up(self) -> None:
        """Its screen is on top again: show the last text it was given meanwhile."""
        if self._missed:
            self.update(self._deferred)


def _kept(content: VisualType) -> VisualType:
    """What an InfoLine keeps of a text it was given: a copy of a Rich Text (the caller may change
    it afterwards), anything else as is."""
    return content.copy() if isinstance(content, Text) else content
