"""The handoffs page of `warden serve` on a phone: Chromium at 390×844 with touch, driven by playwright.

A notification's link opens one handoff (single-use, expiring, bound to it); the server's token
lists them all; answers go through the resolve action, audited with who and from where; a stale
answer and a reused link are refused saying why; a read-only server shows and does not answer.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("textual_serve", reason="warden serve needs the serve extra: pip install 'warden[serve]'")

from tests.console.test_serve_browser import _need_browser  # noqa: E402
from tests.support.browser import chromium  # noqa: E402
from tests.support.serve import Served, serving  # noqa: E402

from store import Ledger  # noqa: E402
from store.notify.state import State, default_path  # noqa: E402
from tests.support.asks import ask

pytestmark = pytest.mark.slow

TOKEN = "phone-token-0123456789abcdef"
DIFF = "--- a/app/parser.py\n+++ b/app/parser.py\n@@ -1,2 +1,2 @@\n def parse(x):\n-    return x\n+    return x.strip()"
RULE = {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}], "behavior": "allow",
        "destination": "session"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(_need_browser()) as b:
        yield b


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[tuple[str, Ledger, dict[str, str]]]:
    path = str(tmp_path / "ledger.db")
    led = Ledger.open(path, create=True)
    led.create_task("prod-deploy")
    for key in ("migrate", "edit", "tests"):
        led.add_node("prod-deploy", key, kind="step")
    ids = {"confirm": ask(led, 
        led.claim("prod-deploy", "claude-1", lease_s=3600), kind="confirm",
        question="Run the migration on prod now?\nIt locks the orders table for ~40 s.",
        options=[{"id": "run", "label": "Run it now", "consequence": "orders wait ~40 s"},
                 {"id": "wait", "label": "Wait for 02:00", "consequence": "the deploy ends tonight"}],
        recommendation="wait", context={"table": "orders", "note": "<b>not markup</b>"})}
    ids["edit"] = ask(led, 
        led.claim("prod-deploy", "claude-2", lease_s=3600), kind="permission",
        question="Allow Claude Code to use Edit?", context={"tool": "Edit", "input": "{...}", "diff": DIFF,
                                                            "file": "app/parser.py", "session": "9b2e4c1a"},
        options=[{"id": "allow", "label": "Allow Edit"}, {"id": "deny", "label": "Deny"}])
    ids["bash"] = ask(led, 
        led.claim("prod-deploy", "claude-3", lease_s=3600), kind="permission",
        question="Allow Claude Code to use Bash?", context={
            "tool": "Bash", "input": "npm test -- parser", "session": "9b2e4c1a",
            "rules": [{"option": "always-1", "rule": RULE, "text": "allow Bash(npm test:*) — this session"}]},
        options=[{"id": "allow", "label": "Allow Bash"}, {"id": "deny", "label": "Deny"},
                 {"id": "always-1", "label": "Always: allow Bash(npm test:*) — this session"}])
    yield path, led, ids
    led.close()


def phone(browser: Any) -> Any:
    return browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True,
                               device_scale_factor=2)


def mint(path: str, hid: str, ttl: float = 3600.0, route: str = "oncall") -> str:
    state = State(default_path(path, None))
    try:
        return state.mint(hid, route, time.time(), ttl)
    finally:
        state.close()


def post(served: Served, url: str, body: dict, headers: dict[str, str]) -> tuple[int, dict]:
    req = urllib.request.Request(served.origin + url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, {"error": raw.decode()}


def test_a_link_answers_its_handoff_once_from_a_phone(browser, desk, tmp_path) -> None:
    path, led, ids = desk
    link = mint(path, ids["bash"])
    with serving(path, "--token", TOKEN, "--allow-actions", token=TOKEN) as served:
        ctx = phone(browser)
        try:
            page = ctx.new_page()
            page.goto(f"{served.origin}/m/h/{ids['bash']}#k={link}")
            page.wait_for_selector(".card")
            assert page.url == f"{served.origin}/m/h/{ids['bash']}"  # the link left the address bar
            card = page.locator(".card")
            assert "prod-deploy · tests" in card.inner_text() and "npm test -- parser" in card.inner_text()
            assert page.locator(".option").count() == 3
            box = page.locator(".option").first.bounding_box()
            assert box["height"] >= 44 and box["width"] >= 300  # a thumb's target at 390 px
            assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the phone
            page.screenshot(path=str(tmp_path / "link.png"), full_page=True)
            page.locator(".option", has_text="Always: allow Bash(npm test:*)").tap()
            page.locator("textarea").fill("fine for this session")
            page.locator(".send").tap()
            page.wait_for_selector(".result.ok")
            text = page.locator(".result").inner_text()
            assert "✔ Answered (always-1) — recorded as oncall link (phone page from 127.0.0.1)" in text
            # used: a reload, or a second tap elsewhere, cannot answer again
            status, doc = post(served, f"/m/api/link/{ids['bash']}/answer", {"option": "deny"},
                               {"X-Warden-Link": link})
            assert status == 403 and "this link was already used" in doc["error"] and "oncall link" in doc["error"]
            # the rule granted shows on the task's other permission request, with who and the session
            page.goto(f"{served.origin}/m/?token={TOKEN}")
            page.wait_for_selector(f".card[data-handoff='{ids['edit']}'] ul.rules")
            rules = page.locator(f".card[data-handoff='{ids['edit']}'] ul.rules li").all_inner_texts()
            assert rules == ["allow Bash(npm test:*) — this session · by oncall link (phone page from 127.0.0.1) "
                             "· session 9b2e4c1a"]
            assert page.locator(f".card[data-handoff='{ids['confirm']}'] ul.rules").count() == 0  # not a permission
        finally:
            ctx.close()
    h = led.handoff(ids["bash"])
    assert (h.status, h.resolution_option, h.resolution_answer) == ("resolved", "always-1", "fine for this session")
    [action] = [a for a in led.actions() if a.action == "resolve"]
    assert action.operator == "oncall link (phone page from 127.0.0.1)" and action.result == "applied"


def test_a_link_refuses_another_handoff_and_says_when_it_expired(browser, desk) -> None:
    path, led, ids = desk
    bound = mint(path, ids["edit"])
    old = mint(path, ids["confirm"], ttl=60.0)
    state = State(default_path(path, None))
    state.db.execute_sql("UPDATE link SET expires_at = made_at - 1 WHERE handoff_id = ?", [ids["confirm"]])
    state.close()
    with serving(path, "--token", TOKEN, "--allow-actions", token=TOKEN) as served:
        status, doc = post(served, f"/m/api/link/{ids['confirm']}/answer", {"option": "run"},
                           {"X-Warden-Link": bound})
        assert status == 403 and doc["error"] == (f"this link answers handoff {ids['edit']} only, "
                                                  f"not handoff {ids['confirm']}")
        status, doc = post(served, f"/m/api/link/{ids['confirm']}/answer", {"option": "run"}, {"X-Warden-Link": old})
        assert status == 403 and doc["error"].startswith("this link expired at ")
        status, doc = post(served, f"/m/api/link/{ids['confirm']}/answer", {"option": "run"},
                           {"X-Warden-Link": "not-a-link-at-all-0000000000"})
        assert status == 403 and "not known here" in doc["error"]
        ctx = phone(browser)
        try:
            page = ctx.new_page()
            page.goto(f"{served.origin}/m/h/{ids['confirm']}#k={old}")
            page.wait_for_selector(".card")
            assert page.locator("#banner").inner_text().startswith("this link expired at ")
            assert page.locator("form").count() == 0  # shown, not answerable
        finally:
            ctx.close()
    assert led.handoff(ids["confirm"]).status == "open" and led.handoff(ids["edit"]).status == "open"


def test_the_token_lists_them_all_and_a_stale_answer_says_who_answered(browser, desk, tmp_path) -> None:
    path, led, ids = desk
    with serving(path, "--token", TOKEN, "--allow-actions", "--operator", "alice", token=TOKEN) as served:
        ctx = phone(browser)
        try:
            page = ctx.new_page()
            page.goto(f"{served.origin}/m/?token={TOKEN}")
            page.wait_for_selector(".card")
            assert page.url == f"{served.origin}/m/"  # the token left the address bar (a cookie keeps it)
            assert page.locator(".card").count() == 3 and page.locator("#count").inner_text() == "3 open"
            confirm = page.locator(f".card[data-handoff='{ids['confirm']}']")
            assert "★ recommended" in confirm.locator(".option.recommended").inner_text()
            confirm.locator("summary").tap()
            assert "<b>not markup</b>" in confirm.inner_text()  # agent text shown literally
            edit = page.locator(f".card[data-handoff='{ids['edit']}']")
            assert edit.locator(".diff .del").inner_text().strip() == "-    return x"
            assert edit.locator(".diff .add").inner_text().strip() == "+    return x.strip()"
            page.screenshot(path=str(tmp_path / "list.png"), full_page=True)
            # meanwhile, someone answers the confirm in the console
            led.apply(led.plan_resolve(ids["confirm"], option="wait"), operator="bob@console")
            confirm.locator(".option", has_text="Run it now").tap()
            confirm.locator(".send").tap()
            page.wait_for_selector(".result.bad")
            text = confirm.locator(".result").inner_text()
            assert f"handoff {ids['confirm']} was already resolved by bob@console" in text and "(option wait)" in text
            assert confirm.locator(".send").is_disabled()
            confirm.screenshot(path=str(tmp_path / "stale.png"))
            # the edit, answered from the list as the token's operator
            edit.locator(".option", has_text="Deny").tap()
            edit.locator(".send").tap()
            page.wait_for_selector(f".card[data-handoff='{ids['edit']}'] .result.ok")
            assert "recorded as alice (phone page from 127.0.0.1)" in edit.locator(".result").inner_text()
            page.locator("#refresh").tap()
            page.locator(".card").nth(1).wait_for(state="detached")
            assert page.locator(".card").count() == 1 and page.locator("#count").inner_text() == "1 open"
        finally:
            ctx.close()
    assert led.handoff(ids["confirm"]).resolved_by == "bob@console"
    assert led.handoff(ids["edit"]).resolved_by == "alice (phone page from 127.0.0.1)"


def test_a_read_only_server_shows_and_does_not_answer(browser, desk) -> None:
    path, led, ids = desk
    link = mint(path, ids["bash"])
    with serving(path, "--token", TOKEN, token=TOKEN) as served:
        ctx = phone(browser)
        try:
            page = ctx.new_page()
            page.goto(f"{served.origin}/m/?token={TOKEN}")
            page.wait_for_selector(".card")
            assert "Read-only server" in page.locator("#banner").inner_text()
            assert page.locator("form").count() == 0 and page.locator(".card").count() == 3
        finally:
            ctx.close()
        status, doc = post(served, f"/m/api/handoffs/{ids['edit']}/answer", {"option": "allow"},
                           {"Authorization": f"Bearer {TOKEN}"})
        assert status == 403 and "read-only" in doc["error"]
        status, doc = post(served, f"/m/api/link/{ids['bash']}/answer", {"option": "allow"}, {"X-Warden-Link": link})
        assert status == 403 and "read-only" in doc["error"]
    assert all(led.handoff(h).status == "open" for h in ids.values())
    state = State(default_path(path, None))
    assert state.check_link(link, ids["bash"], time.time()).ok  # a refused answer did not spend the link
    state.close()


def test_the_list_needs_the_token_and_a_link_opens_nothing_else(desk) -> None:
    path, led, ids = desk
    link = mint(path, ids["bash"])
    with serving(path, "--token", TOKEN, "--allow-actions", token=TOKEN) as served:
        for url in ("/m/", "/m/api/handoffs", f"/m/api/handoffs/{ids['bash']}"):
            req = urllib.request.Request(served.origin + url, headers={"X-Warden-Link": link})
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=30)
            assert e.value.code == 401
        status, doc = post(served, f"/m/api/handoffs/{ids['bash']}/answer", {"option": "allow"},
                           {"X-Warden-Link": link})
        assert status == 401
    assert led.handoff(ids["bash"]).status == "open"
