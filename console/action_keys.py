"""The operator's action keys, in the order the help screen and the command palette list them:
every registered action that has a key (``store/actions/registry.py``; its params class says the
key, the binding's label, the help line and the palette entry), and the recovery advice (R) — a
screen of the console, not an action of the store — after abort, where it has always been listed.

The app's key bindings (``console/app.py``), the palette (``console/commands.py``) and the help
(``console/screens/help.py``) are built from :data:`ACTION_KEYS`, so a registered action's key
shows in all three or in none.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.actions import REGISTRY


@dataclass(frozen=True)
class ActionKey:
    action: str  # what the app's ``action_operator`` opens: an action's name, or "recover"
    key: str
    label: str  # the binding's label
    help: str  # the help screen's line
    palette: str  # the command palette's entry
    palette_help: str


RECOVER = ActionKey("recover", "R", "Recovery advice", "recovery advice for the selected node", "Recovery advice",
                    "for the selected node (R)")
_FOLLOWED_BY = {"abort": RECOVER}  # console keys listed after an action's


def _action_keys() -> tuple[ActionKey, ...]:
    out: list[ActionKey] = []
    for r in REGISTRY:
        k = r.key
        if k is not None:
            out.append(ActionKey(r.name, k.key, k.label, k.help, k.palette or r.params.title,
                                 k.palette_help or f"{k.help} ({k.key})"))
        if r.name in _FOLLOWED_BY:
            out.append(_FOLLOWED_BY[r.name])
    return tuple(out)


ACTION_KEYS: tuple[ActionKey, ...] = _action_keys()

__all__ = ["ACTION_KEYS", "RECOVER", "ActionKey"]
