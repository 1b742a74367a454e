"""What a checkpoint question carries: the four parts a person decides from.

An agent that stops to ask a person (``request_human`` of kind confirm, direction, exception or
acceptance; ``warden mcp``'s ask_human; the hooks' questions) hands over, in the handoff:

* its **context**: ``context["done"]`` — what was done so far — and ``context["stuck"]`` —
  where it is stuck, or what it is about to do that needs a person; both non-empty text;
* each option's **consequence** (what happens if the person picks it), non-empty;
* a **recommendation** (one of the options) with ``context["why"]``, or, when it has none,
  ``context["no_recommendation"]`` saying why not (a free-text question, a matter of taste).

A question missing a part is refused in one line naming it, before anything is written. Kinds
opened by Warden itself on its own evidence (an operator's escalation, an alignment check) and a
permission request (built by the hooks from the tool call) are not agent checkpoints of this
shape; the hooks build the four parts for theirs all the same."""

from __future__ import annotations

from typing import Sequence

from store.errors import Refused
from store.jsontypes import JsonMapping

CHECKPOINT_KINDS = ("confirm", "direction", "exception", "acceptance")
PARTS = ("done", "stuck", "why", "no_recommendation")


def _text(ctx: JsonMapping, key: str) -> bool:
    v = ctx.get(key)
    return isinstance(v, str) and bool(v.strip())


def check(kind: str, options: Sequence[JsonMapping], recommendation: str | None,
          context: JsonMapping | None) -> None:
    """Refuse (one line naming the missing part) a checkpoint question that is not whole."""
    if kind not in CHECKPOINT_KINDS:
        return
    ctx = context or {}
    if not _text(ctx, "done"):
        raise Refused(f"a {kind} question needs context['done']: what was done so far (non-empty text)")
    if not _text(ctx, "stuck"):
        raise Refused(f"a {kind} question needs context['stuck']: where the agent is stuck (non-empty text)")
    for o in options:
        c = o.get("consequence")
        if not (isinstance(c, str) and c.strip()):
            raise Refused(f"option {str(o.get('id'))!r} needs a consequence: what happens if the person picks it")
    if recommendation is not None:
        if not _text(ctx, "why"):
            raise Refused(f"the recommendation {recommendation!r} needs context['why']: why it is recommended")
    elif not _text(ctx, "no_recommendation"):
        raise Refused(f"a {kind} question needs a recommendation (one of the options, with context['why']) "
                      "or context['no_recommendation']: why there is none")


__all__ = ["CHECKPOINT_KINDS", "PARTS", "check"]
