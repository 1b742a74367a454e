"""What a heartbeat recorded, whichever way the ledger keeps it: the observation's text and — once
heartbeats carry them apart (``heartbeat(action=, result=)``) — its action and result.
The agent integrations (``warden hook``, ``warden run``) send action/result; tests read them through here so they hold either way."""

from __future__ import annotations

from typing import Any, Iterable


def said(observation: Any) -> str:
    parts = [getattr(observation, name, None) for name in ("text", "action", "result")]
    return "\n".join(str(p) for p in parts if p)


def all_said(observations: Iterable[Any]) -> str:
    return "\n".join(said(o) for o in observations)
