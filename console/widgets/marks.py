"""Check marks that read without colour (NO_COLOR, monochrome terminals): ``[X]`` on, ``[ ]`` off.

Textual's own toggles draw ``▐X▌`` in both states and tell them apart by colour only.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widgets import Checkbox, OptionList, SelectionList
from textual.widgets.option_list import OptionDoesNotExist

MARK_ON = "[X]"
MARK_OFF = "[ ]"


class Tick(Checkbox):
    """A checkbox whose mark is a character, not only a colour: [X] on, [ ] off."""

    BUTTON_LEFT = "["
    BUTTON_RIGHT = "]"

    @property
    def BUTTON_INNER(self) -> str:  # type: ignore[override]  # noqa: N802 - Textual's name
        return "X" if self.value else " "


class MarkList(SelectionList):
    """A selection list whose mark is a character, not only a colour: [X] marked, [ ] not.

    Each line is the option's prompt as :class:`OptionList` draws it, after a three-cell mark
    built here from the public selection state (``selected``, ``highlighted``) and the list's
    ``selection-list--button*`` component styles — the same cells and styles as
    :class:`SelectionList`'s own button, with a character that says the state.
    """

    def render_line(self, y: int) -> Strip:
        line = OptionList.render_line(self, y)  # the prompt; the mark is drawn here, not patched in
        index = self.scroll_offset.y + y
        try:
            option = self.get_option_at_index(index)
        except OptionDoesNotExist:
            return line
        marked = option.value in self.selected
        component = "selection-list--button" + ("-selected" if marked else "")
        if self.highlighted == index:
            component += "-highlighted"
        underlying = next(iter(line)).style if line.cell_length else None
        underlying = underlying or self.rich_style
        button = self.get_component_rich_style(component)
        side = Style.from_color(button.bgcolor, underlying.bgcolor)
        meta = Style(meta={"option": index})  # a click on the mark toggles this option
        mark = MARK_ON if marked else MARK_OFF
        return Strip([
            Segment(mark[0], side + meta),
            Segment(mark[1], button + meta),
            Segment(mark[2], side + meta),
            Segment(" ", underlying),
            *line,
        ])


__all__ = ["MARK_OFF", "MARK_ON", "MarkList", "Tick"]
