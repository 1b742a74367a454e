"""Type-ahead: keys typed right after a key that opens a dialog or a field — in the same burst, as
they arrive over SSH — go to that dialog or field, in order, none lost, none acting on the screen
underneath.

Why they stray: the app hands each key to the widget focused *when it reads the key*, and a key
bound on a screen acts only once it has bubbled back up to the app. After `r` on the graph, the
keys of the same burst have all been handed to the graph's list before the `r` opens its dialog;
after the dialog is pushed, the keys read while it mounts reach it before its reason input has
focus; a Tab (a screen binding) moves the focus only once it has come back up from the input, while
the keys typed after it are already queued for that input.

So a screen that opens takes the keys (:class:`TypeAhead`): a modal from the moment it is on top,
a list screen while its `/` filter opens. Meanwhile every key the app reads is the taker's
(:class:`TypeAheadApp` ``on_event``, before any binding, ``ctrl+s`` and Tab too), and so is every
key still on its way up through the screen underneath (``WardenScreen.on_key`` redirects it, or
marks it for the app to redirect). Once the focus the screen set has landed and the keys in flight
have arrived, the taken keys are applied in the order the terminal sent them: a character into the
focused input at once; any other key replayed through the app exactly as if typed then, the next
key waiting until it has been handled (it may have moved the focus, opened a dialog — which then
takes the keys left — or closed this one). Then keys flow as usual again.

The same ordering is why ``ctrl+s`` (a priority binding, run the moment the app reads it) could
apply a reason missing its last characters: :func:`after_pending_keys` runs the apply only after
every key read before it has landed.
"""

from __future__ import annotations

import bisect
import itertools
from typing import TYPE_CHECKING, Callable, Generic, Protocol, Sequence, TypeVar, runtime_checkable

from textual import events
from textual.app import App
from textual.message_pump import MessagePump
from textual.widgets import Input

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.widget import Widget

_THROUGH = "warden_screen"  # the attribute naming the console screen a key came up through
_REPLAYED = "warden_replayed"  # a taken key the app handles now, as if typed now
_READ = "warden_read"  # the order in which the app read a key from the terminal
_reads = itertools.count(1)


@runtime_checkable
class TakesKeys(Protocol):
    """A screen that may take the keys typed ahead (console screens and modals)."""

    @property
    def typeahead(self) -> "KeyTaker": ...


class KeyTaker(Protocol):
    """What one screen's type-ahead asks of another's (a :class:`TypeAhead` of any screen)."""

    keys: list[tuple[int, events.Key]]
    taking: bool

    def take(self, event: events.Key) -> None: ...
    def _apply(self) -> None: ...


_R = TypeVar("_R")  # the screen's result type


def taker_of(screen: object) -> "KeyTaker | None":
    """``screen``'s type-ahead while it is taking keys."""
    if isinstance(screen, TakesKeys) and screen.typeahead.taking:
        return screen.typeahead
    return None


def mark(screen: object, event: events.Key) -> None:
    """``screen`` (a console screen) passes ``event`` up to the app: say so on the event."""
    setattr(event, _THROUGH, screen)


def redirect_key(screen: "Screen[_R]", event: events.Key) -> bool:
    """``screen`` got a key on its way up. If a screen is taking keys now (``screen`` itself, or a
    modal on top of it), the key is that screen's: taken, and stopped here. Returns whether it was."""
    if getattr(event, _REPLAYED, False):
        return False  # a taken key being replayed: it goes where it goes
    try:
        top = screen.app.screen
    except Exception:  # noqa: BLE001 - no screen (the app is closing)
        return False
    taker = taker_of(top) or (taker_of(screen) if top is screen else None)
    if taker is None:
        return False
    taker.take(event)
    return True


class TypeAhead(Generic[_R]):
    """The keys a screen takes while it opens (see the module's docstring)."""

    def __init__(self, screen: "Screen[_R]", *, taking: bool = False) -> None:
        self.screen = screen
        self.keys: list[tuple[int, events.Key]] = []  # (the order the app read it, the key)
        self.taking = taking  # keys read now are this screen's, applied once it is ready
        self._waits = 0

    def start(self, in_flight: "Widget | None" = None) -> None:
        """Take the keys until the focus set now has landed and every key on its way up from
        ``in_flight`` (the widget focused before, or its screen) has arrived; then apply them."""
        self.taking = True
        _after(way_up(in_flight) if in_flight is not None else [self.screen.app], self._ready)

    def take(self, event: events.Key) -> None:
        """A key typed ahead: kept, in order, until the screen is ready (at once when it is)."""
        event.stop()
        event.prevent_default()
        # In the order the app read them: a key still on its way up through the screen underneath
        # arrives after keys read later, which the app handed to this screen directly.
        bisect.insort(self.keys, (getattr(event, _READ, 0), events.Key(event.key, event.character)),
                      key=lambda k: k[0])
        if not self.taking:
            self.taking = True
            self._apply()

    def _ready(self) -> None:
        if self.screen.focused is None and self._waits < 3 and self.screen.is_attached:
            self._waits += 1  # the focus it asked for is still on its way: one more turn of the app
            _after([self.screen.app], self._ready)
            return
        self._apply()

    def _apply(self) -> None:
        """The kept keys in order; stop at one replayed through the app until it is handled."""
        app = self.screen.app
        while self.keys:
            if app.screen is not self.screen:  # a key opened a dialog or a screen, or closed this one
                self._hand_over(app.screen)
                return
            _, event = self.keys.pop(0)
            if self._into_input(event):
                continue
            replay = events.Key(event.key, event.character)
            setattr(replay, _REPLAYED, True)
            app.post_message(replay)
            # Its way: the app reads it, hands it to the focused widget, up through each of its
            # containers to the screen and the app's bindings; what a binding posts (a Submitted,
            # a Pressed) takes the same way once more.
            way = way_up(self.screen.focused or self.screen)
            _after([app, *way, *way], self._apply)
            return
        self.taking = False

    def _hand_over(self, top: object) -> None:
        """The keys left are the screen now on top's (typed before any it took itself)."""
        keys, self.keys = self.keys, []
        self.taking = False
        if not isinstance(top, TakesKeys):
            return
        other = top.typeahead
        other.keys = sorted(keys + other.keys, key=lambda k: k[0])
        if not other.taking:
            other.taking = True
            other._apply()

    def _into_input(self, event: events.Key) -> bool:
        """A character for the focused input, typed into it now (what the input does with it)."""
        inp = self.screen.focused
        if not isinstance(inp, Input) or not event.is_printable or not event.character:
            return False
        selection = inp.selection
        if selection.is_empty:
            inp.insert_text_at_cursor(event.character)
        else:
            inp.replace(event.character, *selection)
        return True


def way_up(widget: "Widget") -> list[MessagePump]:
    """Where a key handed to ``widget`` goes until it is handled: the widget, each container up
    to its screen, the app (each has its own queue)."""
    return list(widget.ancestors_with_self)


def _after(hops: Sequence[MessagePump], callback: Callable[[], object]) -> None:
    """Run ``callback`` once each of ``hops`` in turn has handled what is queued for it now (a
    ``call_later`` on each runs after the messages already in its queue)."""

    def step(k: int) -> None:
        while k < len(hops):
            if hops[k].call_later(step, k + 1):
                return
            k += 1  # that one is gone: nothing is queued there
        callback()

    step(0)


class TypeAheadApp(App[int]):
    """The app's side (a base of ``WardenApp``): while a screen takes keys, every key read is its;
    a key that came up through a screen after a modal opened on top of it is the modal's."""

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded and not getattr(event, _REPLAYED, False):
            setattr(event, _READ, next(_reads))
            taker = taker_of(self.screen)
            if taker is not None:
                taker.take(event)
                return
        await super().on_event(event)

    def on_key(self, event: events.Key) -> None:
        through = getattr(event, _THROUGH, None)
        if through is not None:
            redirect_key(through, event)

    def taking_keys(self) -> bool:
        """A screen is still applying keys typed ahead (tests and screenshots wait for it)."""
        return any(taker_of(s) is not None for s in self.screen_stack)


def after_pending_keys(dialog: "Screen[_R]", callback: Callable[[], object]) -> None:
    """Run ``callback`` once every key the app read before now has been handled: the keys on
    their way through the screen underneath (its focused widget, then the screen) and those
    queued for the dialog's focused input, and what their bindings posted; then the keys the
    dialog took meanwhile, applied. Each hop is a ``call_later`` on that widget, which runs after
    the messages already in its queue."""
    hops: list[MessagePump] = []
    stack = list(dialog.app.screen_stack)
    if dialog in stack and stack.index(dialog) > 0:
        below = stack[stack.index(dialog) - 1]
        hops += way_up(below.focused or below)
    way = way_up(dialog.focused or dialog)
    hops += way + way  # a key's way up to the app's bindings, then what a binding posts (a Selected)

    rounds = itertools.count()

    def when_taken() -> None:
        # a key on that way may have moved the focus and made the dialog take the keys typed after
        # it (enter on an option, then the answer): they are applied first, the callback after
        taker = taker_of(dialog)
        if taker is not None and dialog.is_attached and next(rounds) < 100:
            _after(way_up(dialog.focused or dialog), when_taken)
            return
        callback()

    _after(hops, when_taken)


__all__ = ["KeyTaker", "TakesKeys", "TypeAhead", "TypeAheadApp", "after_pending_keys", "mark", "redirect_key", "taker_of"]
