"""The key hints at the bottom of every screen, chosen by the terminal's width.

Textual's ``Footer`` lays its keys side by side and cuts the last one it has no room for mid-word
("g R▏" at 80 columns). :class:`KeyFooter` is that footer, choosing what to show before it is
drawn: the footer's usual style (two spaces between hints, readable without colour) with every
hint, or without the app's last hints (runs, handoffs, events, quit: the last named first) until
the rest fit; when even the screen's own hints do not fit that way, the compact style (one space
between) without the last hints, whichever they are. ``?`` (help: every key) is always kept, and
every key works whether its hint is shown or not.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.widgets import Footer

#: what a key's hint takes besides its key and its description: Textual's footer style (padding
#: around the key, after the description), its compact style (one space between, one after)
KEY_EXTRA = {False: 3, True: 2}
#: the command palette's key at the right end (its border, key, description and padding)
PALETTE_EXTRA = {False: 6, True: 4}
#: the hints always shown
KEPT_ACTIONS = frozenset({"app.help", "help"})


def _width(key: str, description: str, compact: bool) -> int:
    return cell_len(key) + cell_len(description) + KEY_EXTRA[compact]


class KeyFooter(Footer):
    """A footer whose hints fit its width (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._for_width = -1
        self.shown_actions: set[str] | None = None  # the hints chosen at the last compose (tests)

    def _available(self) -> int:
        return self.size.width or self.app.size.width

    def _choose(self, width: int) -> tuple[bool, set[str]]:
        """(compact or not, the actions whose hints are shown) for ``width`` columns."""
        app = self.app
        hints: list[tuple[str, bool, int, int]] = []  # (action, the app's, width: usual style, compact)
        seen: set[str] = set()
        for node, binding, _enabled, _tooltip in self.screen.active_bindings.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            key = app.get_key_display(binding)
            hints.append((binding.action, node is app, _width(key, binding.description, False),
                          _width(key, binding.description, True)))
        palette: Binding | None = None
        if self.show_command_palette and app.ENABLE_COMMAND_PALETTE:
            found = self.screen.active_bindings.get(app.COMMAND_PALETTE_BINDING)
            palette = found[1] if found is not None else None

        def fit(compact: bool, droppable: list[str]) -> set[str] | None:
            room = width
            if palette is not None:
                room -= cell_len(app.get_key_display(palette)) + cell_len(palette.description) + PALETTE_EXTRA[compact]
            kept: dict[str, int] = {h[0]: (h[3] if compact else h[2]) for h in hints}
            for action in droppable:
                if sum(kept.values()) <= room:
                    break
                del kept[action]
            return set(kept) if sum(kept.values()) <= room else None

        last_first = [h[0] for h in reversed(hints) if h[0] not in KEPT_ACTIONS]
        usual = fit(False, [a for a in last_first if any(h[0] == a and h[1] for h in hints)])
        if usual is not None:
            return False, usual
        return True, fit(True, last_first) or {h[0] for h in hints if h[0] in KEPT_ACTIONS}

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        width = self._available()
        self._for_width = width
        compact, shown = self._choose(width)
        self.set_reactive(Footer.compact, compact)
        self.set_class(compact, "-compact")
        self.shown_actions = shown
        for widget in super().compose():
            action = getattr(widget, "action", None)  # a key's hint (FooterKey)
            if action is not None and "-command-palette" not in widget.classes and action not in shown:
                continue
            yield widget

    def on_resize(self, event: Resize) -> None:
        if self._bindings_ready and event.size.width != self._for_width:
            self.call_after_refresh(self.recompose)


__all__ = ["KeyFooter"]
