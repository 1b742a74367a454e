"""Type-ahead: keys typed right after an action key, before its dialog is ready, are the
operator's and go to the dialog — in order, none lost, none acting on the screen underneath.

Why they stray: the app hands each key to the widget focused *when the app reads it*, and an
action key acts only when it has bubbled back up to the app. After `r` on the graph, the keys
typed in the same burst have all been handed to the graph's list, and bubbled to its screen, before
the `r` opens its dialog; then they reach the app's bindings with a modal on top, and were dropped
(or, worse, acted on). :class:`TypeAheadApp` (the app's ``on_key``, before its bindings) sends a
key that came up through a screen which is no longer on top to that modal's ``type_ahead``
instead; ``WardenScreen.on_key`` marks the keys it passes up (:func:`mark`). Between the dialog's
push and its reason input taking focus, keys are handed to the dialog screen itself: its own
``on_key`` gives them to ``type_ahead`` too.

The same ordering is why ``ctrl+s`` (a priority binding, run the moment the app reads it) could
apply a reason missing its last characters: they were still queued for the input.
:func:`after_pending_keys` runs the apply only after every key read before it has landed.
"""

from __future__ import annotations

from typing import Any, Callable

from textual import events


_THROUGH = "warden_screen"  # the attribute naming the console screen a key came up through


def mark(screen: Any, event: events.Key) -> None:
    """``screen`` (a console screen) passes ``event`` up to the app: say so on the event."""
    setattr(event, _THROUGH, screen)


def redirect_key(screen: Any, event: events.Key) -> bool:
    """``screen`` got a key but is no longer on top: give it to the modal on top (if it takes
    type-ahead) and stop it there. Returns whether it was redirected."""
    try:
        top = screen.app.screen
    except Exception:  # noqa: BLE001 - no screen (the app is closing)
        return False
    take = getattr(top, "type_ahead", None)
    if top is screen or take is None:
        return False
    event.stop()
    event.prevent_default()
    take(event)
    return True


class TypeAheadApp:
    """The app's side (a mixin of ``WardenApp``): a key that bubbled up through a screen that is
    no longer on top goes to the modal on top, before the app's bindings see it."""

    def on_key(self, event: events.Key) -> None:
        through = getattr(event, _THROUGH, None)
        if through is not None:
            redirect_key(through, event)


def after_pending_keys(dialog: Any, callback: Callable[[], Any]) -> None:
    """Run ``callback`` once every key the app read before now has been handled: the keys on
    their way through the screen underneath (its focused widget, then the screen) and those
    queued for the dialog's focused input. Each hop is a ``call_later`` on that widget, which
    runs after the messages already in its queue."""
    hops: list[Any] = []
    stack = list(dialog.app.screen_stack)
    if dialog in stack and stack.index(dialog) > 0:
        below = stack[stack.index(dialog) - 1]
        if below.focused is not None:
            hops.append(below.focused)
        hops.append(below)
    if dialog.focused is not None:
        hops.append(dialog.focused)

    def step(k: int) -> None:
        while k < len(hops):
            if hops[k].call_later(step, k + 1):
                return
            k += 1  # that widget is gone: nothing is queued there
        callback()

    step(0)


__all__ = ["TypeAheadApp", "after_pending_keys", "mark", "redirect_key"]
