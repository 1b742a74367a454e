"""Mark an effect compensated by hand: the operator undid it outside Warden (``warden compensated``).

The dialog lists the task's confirmed effects (the selected node's first); arrows pick one, the
preview shows the plan (its compensation node, if any and not finished, is abandoned), the reason
says what was done. Same pattern as every action dialog (console/dialogs/base.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from rich.text import Text
from textual import on, work
from textual.message import Message
from textual.widget import Widget
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from store.actions import CompensatedParams
from store.errors import WardenError

from ..text import safe_line
from .base import ActionDialog
from .registry import dialog_for

if TYPE_CHECKING:
    from store.actions import Plan
    from store.views import EffectView


class EffectsLoaded(Message):
    def __init__(self, effects: Sequence[EffectView], error: str | None = None) -> None:
        super().__init__()
        self.effects, self.error = effects, error


@dialog_for(CompensatedParams)
class CompensatedDialog(ActionDialog):

    def __init__(self, task_id: str, node: str | None = None, *, reason: str = "",
                 effect_key: str | None = None) -> None:
        super().__init__(task_id, node, reason=reason)
        self.effects: list[EffectView] = []
        self.listing = True  # not `loading`: that is every Textual widget's own (a full-screen spinner on a screen)
        self.wanted = effect_key

    def target_label(self) -> str:
        return f"an effect of task {safe_line(self.task_id)} (undone by hand)"

    def compose_options(self) -> Iterable[Widget]:
        yield OptionList(id="effects", compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self._load_effects()

    @work(thread=True, exclusive=True, exit_on_error=False, group="effects")
    def _load_effects(self) -> None:
        try:
            found = self.host.feed.read(lambda ledger: ledger.effects(self.task_id))
        except WardenError as e:
            self.post_message(EffectsLoaded([], error=str(e)))
        else:
            self.post_message(EffectsLoaded([e for e in found if e.status == "confirmed"]))

    @on(EffectsLoaded)
    def _effects_loaded(self, msg: EffectsLoaded) -> None:
        msg.stop()
        self.listing = False
        mine = [e for e in msg.effects if e.node == self.node]
        self.effects = mine + [e for e in msg.effects if e.node != self.node]
        ol = self.query_one("#effects", OptionList)
        ol.clear_options()
        for e in self.effects:
            ol.add_option(Option(effect_prompt(e)))
        if self.effects:
            keys = [e.effect_key for e in self.effects]
            ol.highlighted = keys.index(self.wanted) if self.wanted in keys else 0
        elif msg.error:
            self.say(Text("cannot list the effects: " + safe_line(msg.error, limit=200), style="bold"))
        self.replan()

    @on(OptionList.OptionHighlighted, "#effects")
    def _picked(self) -> None:
        if not self.listing:
            self.replan()

    def selected_effect(self) -> str | None:
        ol = self.query_one("#effects", OptionList)
        i = ol.highlighted
        return self.effects[i].effect_key if i is not None and 0 <= i < len(self.effects) else None

    def plan_args(self) -> dict[str, object] | None:
        key = None if self.listing else self.selected_effect()
        return None if key is None else {"effect_key": key}

    def waiting_text(self) -> str:
        if self.listing:
            return "listing the task's confirmed effects…"
        return "no confirmed effect to mark: nothing was done outside that needs undoing"

    def apply_label(self, plan: "Plan | None") -> str:
        return "Mark compensated"


def effect_prompt(e: EffectView) -> Text:
    """An effect as a literal option prompt (agent text: never markup, escaped)."""
    prompt = Text(safe_line(e.effect_key, limit=60), style="bold")
    prompt.append(f"  ({safe_line(e.node, limit=30)})", style="dim")
    if e.compensation:
        prompt.append("  undo: " + safe_line(e.compensation, limit=60), style="dim")
    return prompt


__all__ = ["CompensatedDialog", "effect_prompt"]

