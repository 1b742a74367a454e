"""The handoffs page of `warden serve`: answer a handoff from a phone (not the terminal in a page).

Two ways in:

* ``/m/`` behind the server's token (the same token, cookie and checks as the console): every open
  handoff of the ledger, each answerable as the token's operator;
* ``/m/h/ID#k=LINK`` from a notification: one handoff, through a **single-use, expiring link bound to
  it** (``warden notify`` mints it; its state is the notifier's state file, ``store/notify/state.py``).
  The link's token travels in the URL's fragment, which browsers never send: the page's script
  reads it, drops it from the address bar and sends it in a header (``X-Warden-Link``), so it is in
  no server log, no ``Referer`` and no link preview. Answering another handoff with it is refused,
  answering twice is refused, an expired link says so.

An answer is the console's resolve action (``ledger.plan_resolve`` then ``ledger.apply``): planned
now, checked against the task revision the page showed (the task moved meanwhile: planned again and
applied when it keeps the answer's promise, the result says what differed; the handoff answered
meanwhile: refused, saying by whom). The audit row names who and from where:
``NAME (phone page from ADDR)`` for a token, ``ROUTE link (phone page from ADDR)`` for a link. A
read-only server shows the handoffs and answers none (403).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from pathlib import Path
from typing import Callable

from aiohttp import web

from store import Ledger
from store.clock import iso
from store.errors import NotFound, Refused, StaleRevision, WardenError
from store.jsontypes import JsonObject
from store.adapters.permission_rules import rules_for
from store.notify.state import State, StateError
from store.text import safe, safe_line
from store.views import HandoffView

from .auth import Credential

LINK_HEADER = "X-Warden-Link"
PAGE = Path(__file__).parent / "static" / "handoffs.html"
MAX_ANSWER = 4000


def handoff_json(h: HandoffView, revision: int | None, rules: list[JsonObject]) -> JsonObject:
    """A handoff as the page shows it: every agent-written string made safe (the page sets it as text)."""
    ctx = h.context or {}
    perm: JsonObject | None = None
    if h.kind == "permission":
        perm = {"tool": safe_line(ctx.get("tool"), limit=200), "input": safe(ctx.get("input"), limit=20000),
                "diff": safe(ctx.get("diff"), limit=60000) if ctx.get("diff") else None,
                "file": safe_line(ctx.get("file"), limit=500) if ctx.get("file") else None}
    context = {safe_line(k, limit=80): safe(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False), limit=4000)
               for k, v in ctx.items() if k not in ("diff", "input", "suggestions", "rules")}
    return {
        "id": h.id, "task_id": safe_line(h.task_id), "node": safe_line(h.node), "kind": h.kind,
        "question": safe(h.question, limit=20000), "context": context,
        "options": [{"id": safe_line(o.get("id"), limit=80), "label": safe_line(o.get("label") or o.get("id"), limit=300),
                     "consequence": safe(o.get("consequence"), limit=1000) if o.get("consequence") else None}
                    for o in h.options],
        "recommendation": safe_line(h.recommendation, limit=80) if h.recommendation else None,
        "status": h.status, "opened_at": iso(h.opened_at), "opened_by": safe_line(h.opened_by, limit=200),
        "resolved_by": safe_line(h.resolved_by, limit=200) if h.resolved_by else None,
        "resolution_option": safe_line(h.resolution_option, limit=80) if h.resolution_option else None,
        "revision": revision, "permission": perm, "rules": rules,
    }


class HandoffDesk:
    """What the page's routes need: the ledger (opened on first use), the notifier's links."""

    def __init__(self, ledger: str, state_path: Path | None, *, allow_actions: bool, clock: Callable[[], float]) -> None:
        self.target = ledger
        self.state_path = state_path
        self.allow_actions = allow_actions
        self.clock = clock
        self._ledger: Ledger | None = None
        self._state: State | None = None
        self._lock = threading.Lock()

    def ledger(self) -> Ledger:
        with self._lock:
            if self._ledger is None:
                self._ledger = Ledger.open(self.target, create=False, read_only=not self.allow_actions,
                                           application_name="warden-serve")
            return self._ledger

    def state(self) -> State | None:
        with self._lock:
            if self._state is None and self.state_path is not None and self.state_path.is_file():
                try:
                    self._state = State(self.state_path, create=False)
                except StateError:
                    return None
            return self._state

    def close(self) -> None:
        with self._lock:
            for thing in (self._ledger, self._state):
                if thing is not None:
                    thing.close()
            self._ledger = self._state = None

    # ------------------------------------------------------------------ reads
    def one(self, hid: str) -> JsonObject:
        led = self.ledger()
        h = led.handoff(hid)
        return handoff_json(h, led.task(h.task_id).revision, rules_for(led, h.task_id))

    def listing(self) -> JsonObject:
        led = self.ledger()
        shown = led.handoffs(status="open")
        revisions = {t: led.task(t).revision for t in {h.task_id for h in shown}}
        rules = {t: rules_for(led, t) for t in revisions}
        return {"handoffs": [handoff_json(h, revisions[h.task_id], rules[h.task_id]) for h in shown],
                "read_only": not self.allow_actions}

    # ------------------------------------------------------------------ answering
    def answer(self, hid: str, body: JsonObject, operator: str) -> tuple[int, JsonObject]:
        """Resolve through the console's action; (HTTP status, what the page shows)."""
        if not self.allow_actions:
            return 403, {"error": "this server is read-only: it shows handoffs and answers none "
                                  "(warden serve --allow-actions)"}
        option, answer, seen = body.get("option"), body.get("answer"), body.get("revision")
        if option is not None and not isinstance(option, str) or answer is not None and not isinstance(answer, str):
            return 400, {"error": "option and answer are text"}
        if isinstance(answer, str) and len(answer) > MAX_ANSWER:
            return 400, {"error": f"the answer is longer than {MAX_ANSWER} characters"}
        led = self.ledger()
        try:
            plan = led.plan_resolve(hid, option=option or None, answer=answer or None)
            if isinstance(seen, int) and not isinstance(seen, bool) and seen != plan.revision:
                plan = dataclasses.replace(plan, revision=seen)  # checked against what the page showed
            done = led.apply(plan, operator=operator)
        except NotFound as e:
            return 404, {"error": safe_line(str(e))}
        except StaleRevision as e:
            return 409, {"error": safe_line(str(e)), "stale": True}
        except Refused as e:
            closed = led.handoff(hid).status != "open"
            return 409 if closed else 400, {"error": safe_line(str(e)), "stale": closed}
        except WardenError as e:
            return 503, {"error": safe_line(str(e))}
        notes = list(done.differed.notes) if done.differed else []
        return 200, {"answered": hid, "option": option or None, "by": operator, "differed": notes,
                     "handoff": self.one(hid)}

    def answer_by_link(self, hid: str, token: str, body: JsonObject, where: str) -> tuple[int, JsonObject]:
        """A link's one answer: spent before the ledger is asked (two taps race: one wins), given
        back when the ledger refused the answer's form (no option chosen), kept when it was applied
        or the handoff was answered meanwhile."""
        state = self.state()
        if state is None:
            return 403, {"error": "this link is not known here (no notifier state beside this ledger)"}
        now = self.clock()
        check = state.check_link(token, hid, now)
        if not check.ok or check.row is None:
            return 403, {"error": check.why}
        operator = f"{check.row.route} link (phone page from {where})"
        spent = state.spend_link(token, hid, now, operator)
        if not spent.ok:
            return 403, {"error": spent.why}
        status, doc = self.answer(hid, body, operator)
        if status == 400 or status == 503 or (status == 403 and "read-only" in str(doc.get("error"))):
            state.unspend_link(token, now)
        return status, doc

    def link_view(self, hid: str, token: str) -> tuple[int, JsonObject]:
        state = self.state()
        if state is None:
            return 403, {"error": "this link is not known here (no notifier state beside this ledger)"}
        check = state.check_link(token, hid, self.clock())
        if check.row is None or check.handoff_id != hid:
            return 403, {"error": check.why}
        doc = self.one(hid)
        doc["can_answer"] = check.ok and self.allow_actions
        doc["link"] = None if check.ok else check.why
        doc["read_only"] = not self.allow_actions
        return 200, doc


def client_address(request: web.Request) -> str:
    """Where a request came from, as the audit names it (the peer; a proxy's header is shown beside it)."""
    peer = request.remote or "unknown"
    fwd = request.headers.get("X-Forwarded-For")
    return safe_line(f"{fwd.split(',')[0].strip()} via {peer}" if fwd else peer, limit=120)


def routes(desk: HandoffDesk) -> list[web.RouteDef]:
    page = PAGE.read_text(encoding="utf-8")

    async def show_page(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    async def listing(request: web.Request) -> web.Response:
        return _json(200, await asyncio.to_thread(desk.listing))

    async def one(request: web.Request) -> web.Response:
        hid = request.match_info["hid"]
        try:
            return _json(200, await asyncio.to_thread(desk.one, hid))
        except NotFound as e:
            return _json(404, {"error": safe_line(str(e))})

    async def answer(request: web.Request) -> web.Response:
        cred: Credential = request["credential"]
        body = await _body(request)
        if body is None:
            return _json(400, {"error": "send the answer as a JSON object"})
        who = f"{cred.name} (phone page from {client_address(request)})"
        status, doc = await asyncio.to_thread(desk.answer, request.match_info["hid"], body, who)
        return _json(status, doc)

    async def link_view(request: web.Request) -> web.Response:
        token = request.headers.get(LINK_HEADER, "")
        try:
            status, doc = await asyncio.to_thread(desk.link_view, request.match_info["hid"], token)
        except NotFound as e:
            return _json(404, {"error": safe_line(str(e))})
        return _json(status, doc)

    async def link_answer(request: web.Request) -> web.Response:
        token = request.headers.get(LINK_HEADER, "")
        body = await _body(request)
        if body is None:
            return _json(400, {"error": "send the answer as a JSON object"})
        status, doc = await asyncio.to_thread(desk.answer_by_link, request.match_info["hid"], token, body,
                                              client_address(request))
        return _json(status, doc)

    return [
        web.get("/m/", show_page), web.get("/m/h/{hid}", show_page),
        web.get("/m/api/handoffs", listing), web.get("/m/api/handoffs/{hid}", one),
        web.post("/m/api/handoffs/{hid}/answer", answer),
        web.get("/m/api/link/{hid}", link_view), web.post("/m/api/link/{hid}/answer", link_answer),
    ]


# Paths a link's holder reaches without the server's token (the link is checked instead).
LINK_PATHS = ("/m/h/", "/m/api/link/", "/m/assets/")


async def _body(request: web.Request) -> JsonObject | None:
    if request.content_type != "application/json":
        return None
    try:
        body = json.loads(await request.text())
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _json(status: int, doc: JsonObject) -> web.Response:
    return web.json_response(doc, status=status, dumps=lambda o: json.dumps(o, ensure_ascii=True))


__all__ = ["HandoffDesk", "routes", "LINK_PATHS", "LINK_HEADER", "handoff_json"]
