"""Every LISTEN a feed in this process established, counted on the test side (the feed keeps no
counter): ``listens(monkeypatch)`` wraps psycopg's ``AsyncConnection.execute`` — what
``store.storage.watch`` sends LISTEN through — and returns the list it appends each LISTEN to once
the server has accepted it."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest


def listens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    done: list[str] = []
    real = psycopg.AsyncConnection.execute

    async def execute(self: psycopg.AsyncConnection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        cur = await real(self, query, *args, **kwargs)
        if isinstance(query, str) and query.lstrip().upper().startswith("LISTEN "):
            done.append(query)
        return cur

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", execute)
    return done
