"""Waiting for a person: :meth:`store.Ledger.wait_for_resolution`.

The wait sleeps on the ledger's wake-ups (:class:`store.storage.watch.Wakeups`: LISTEN/NOTIFY on
PostgreSQL, inotify/watchfiles on the SQLite file, and the slow fallback poll), and re-reads the
handoff after each one. It looks once the notification source is in place, so a resolution that
commits while the wait is being set up is not missed. Nothing spins: between wake-ups the thread
is asleep in the event loop.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable, Literal, TypeVar

from store.clock import iso
from store.errors import Refused
from store.jsontypes import JsonObject
from store.views import HandoffView
from store.storage.watch import FALLBACK_POLL_S, Wakeups
from store.ledger import queries
from store.storage.core import LedgerCore

_T = TypeVar("_T")


def resolution(h: HandoffView) -> JsonObject:
    """A handoff's outcome as agents see it (also ``Claim.inputs["resolution"]``): ``handoff``,
    ``status`` (resolved | withdrawn | expired), ``kind``, ``question``, ``option``, ``answer``,
    ``by``, ``at`` (ISO-8601 UTC) and ``at_ts`` (epoch seconds)."""
    return {
        "handoff": h.id, "status": h.status, "kind": h.kind, "question": h.question,
        "option": h.resolution_option, "answer": h.resolution_answer, "by": h.resolved_by,
        "at": iso(h.resolved_at), "at_ts": h.resolved_at,
    }


def wait_for_resolution(core: LedgerCore, handoff_id: str, timeout: float | None,
                        fallback_poll_s: float = FALLBACK_POLL_S) -> JsonObject | None:
    """The handoff's :func:`resolution` once it is no longer open; None when ``timeout`` seconds
    pass first (None: wait for as long as it takes). Unknown id: NotFound."""
    if timeout is not None and timeout < 0:
        raise Refused("timeout must not be negative")
    h = queries.handoff(core, handoff_id)
    if h.status != "open":
        return resolution(h)
    if timeout == 0:
        return None
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise Refused("wait_for_resolution blocks: call it from a thread (asyncio.to_thread) in async code")
    return wait_until(core, lambda: _settled(core, handoff_id), timeout, fallback_poll_s)


def _settled(core: LedgerCore, handoff_id: str) -> JsonObject | None:
    h = queries.handoff(core, handoff_id)
    return None if h.status == "open" else resolution(h)


def wait_until(core: LedgerCore, check: Callable[[], _T | None], timeout: float | None,
               fallback_poll_s: float = FALLBACK_POLL_S) -> _T | None:
    """Block until ``check()`` (a read of the ledger) returns something other than None and
    return it; None when ``timeout`` seconds pass first (None: no limit). ``check`` runs at once,
    then after every change notification — never in a busy loop (the LangGraph adapter's
    ``Supervisor.wait`` uses it to wait for an operator)."""
    if timeout is not None and timeout < 0:
        raise Refused("timeout must not be negative")
    got = check()
    if got is not None or timeout == 0:
        return got
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise Refused("waiting blocks: call it from a thread (asyncio.to_thread) in async code")
    if not core.target:
        raise Refused("this ledger was not opened from a target (Ledger.open): it cannot wait")
    # its LISTEN connection is named as the ledger's own (warden-mcp, warden-hook…), not warden-agent
    wake = Wakeups(core.target, fallback_poll_s=fallback_poll_s,
                   application_name=str(getattr(core.db, "application_name", None) or "warden-agent"))
    return asyncio.run(_wait(wake, check, timeout))


async def _wait(wake: Wakeups, check: Callable[[], _T | None], timeout: float | None) -> _T | None:
    deadline = None if timeout is None else time.monotonic() + timeout
    watching = asyncio.Event()
    it = wake.wakeups(on_watching=watching.set)
    nxt: asyncio.Future[str] = asyncio.ensure_future(it.__anext__())
    try:
        # Until the source is in place a change could go unnoticed: wait for it (or a wake-up).
        ready = asyncio.ensure_future(watching.wait())
        first: set[asyncio.Future[str] | asyncio.Future[Literal[True]]] = {ready, nxt}
        await asyncio.wait(first, timeout=_left(deadline), return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        while True:
            got = check()
            if got is not None:
                return got
            left = _left(deadline)
            if left is not None and left <= 0:
                return None
            done, _ = await asyncio.wait({nxt}, timeout=left)
            if nxt in done:
                nxt.result()
                nxt = asyncio.ensure_future(it.__anext__())
    finally:
        nxt.cancel()
        try:
            await it.aclose()
        except (RuntimeError, asyncio.CancelledError):
            pass


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())
