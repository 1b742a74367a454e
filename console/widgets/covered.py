"""Drawing on a screen nobody can see waits until the screen is shown again.

Textual counts the screen right under the top one among its "background screens" whatever the top
screen's opacity, and a region refreshed on a background screen repaints the *whole* top screen.
So the task list under an open graph, its rows and summary moving with every commit, turned every
commit into a full-screen redraw of the graph (a probe: 31 of 31 updates full, for changes of a
line or two). The live widgets (:class:`~console.widgets.RowList`, the one-line bars) ask
:func:`covered` before they draw: under a full screen (not a dialog, which shows what is under it)
they note that they missed something, and draw once when their screen is back on top
(``WardenScreen.on_screen_resume`` calls their ``catch_up``). Their data keeps flowing meanwhile:
only the drawing waits.
"""

from __future__ import annotations

from textual.dom import DOMNode
from textual.screen import ModalScreen


def covered(widget: DOMNode) -> bool:
    """A full screen (not a dialog) is above ``widget``'s screen: nothing it draws can be seen."""
    try:
        stack = widget.app.screen_stack
        screen = widget.screen
    except Exception:  # not mounted yet, or the app is closing: draw as usual
        return False
    for i in range(len(stack) - 1, -1, -1):
        above = stack[i]
        if above is screen:
            return False
        if not isinstance(above, ModalScreen):
            return True
    return False  # not on the stack


__all__ = ["covered"]
