"""The one-line header every screen shows: ledger, mode, live/snapshot, and the unavailable banner."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.visual import VisualType
from textual.widgets import Static

from ..glyphs import MARKS
from ..host import host_of
from ..text import safe_line


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { height: 1; width: 1fr; }
    """

    def __init__(self, title: str = "", **kwargs: Any) -> None:
        super().__init__("", markup=False, **kwargs)
        self.title = safe_line(title)

    def on_mount(self) -> None:
        hub = host_of(self).hub
        hub.subscribe(self, hub.status_changed, lambda _: self.update_from_app())
        self.update_from_app()

    def on_unmount(self) -> None:
        host_of(self).hub.forget(self)

    def update_from_app(self) -> None:
        app = host_of(self)
        text = Text()
        text.append(" warden ", style="bold reverse")
        text.append(" ")
        text.append(safe_line(self.title))
        mode = []
        if app.read_only:
            mode.append("read-only")
        mode.append("live" if app.live else "snapshot")
        text.append("  ·  " + " · ".join(mode), style="dim")
        count = app.open_alerts
        if count:  # alerts not seen yet (console/alerts.py)
            text.append("  ")
            text.append(f" {MARKS['alert']} {count} new alert{'s' if count != 1 else ''} ", style="bold reverse")
        error = app.unavailable
        if error:
            self.set_class(True, "-unavailable")
            text = Text()
            text.append(" ⚠ UNAVAILABLE ", style="bold reverse")
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

    def update(self, content: VisualType = "", *, layout: bool = False) -> None:
        """Its size never depends on the text, so no layout pass (a whole-screen reflow per
        change, otherwise); the same text again is not repainted at all."""
        if content == self._shown:
            return
        self._shown = content.copy() if hasattr(content, "copy") else content
        super().update(content, layout=layout)
