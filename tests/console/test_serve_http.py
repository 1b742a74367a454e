"""`warden serve` over HTTP and its websocket, against a real server process: who gets in, what
each session runs (read from /proc), and what a session shows when its console ends."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual_serve", reason="warden serve needs the serve extra: pip install 'warden[serve]'")
aiohttp = pytest.importorskip("aiohttp")

from tests.support.serve import Served, cmdline, environ, serving  # noqa: E402
from tests.support.waiting import Deadline  # noqa: E402

pytestmark = pytest.mark.slow

ASSETS = ["/static/js/textual.js", "/static/css/xterm.css", "/static/fonts/RobotoMono-VariableFont_wght.ttf",
          "/assets/page.js", "/assets/page.css", "/assets/fonts.css",
          "/assets/fonts/noto-emoji-fallback.woff2", "/assets/fonts/dejavu-sans-mono-fallback.woff2",
          "/assets/fonts/noto-symbols2-fallback.woff2"]
PATHS = ["/", "/ws", "/?fontsize=20", "/nope", "/static/images/background.png", *ASSETS]


def wrong_tokens(token: str) -> list[str]:
    """Near misses of every kind: prefix, extension, one character changed, case, padding, empty."""
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    return [token[:-1], token + "x", flipped, token.swapcase(), "x" + token, token[: len(token) // 2], "x" * 43,
            "%00" + token, token.encode().hex()]


async def get(served: Served, path: str, *, cookie: str | None = None, headers: dict[str, str] | None = None,
              follow: bool = False) -> tuple[int, dict[str, str], bytes]:
    hdrs = dict(headers or {})
    if cookie is not None:
        hdrs["Cookie"] = f"{served.cookie}={cookie}"
    async with aiohttp.ClientSession() as http:
        async with http.get(served.origin + path, headers=hdrs, allow_redirects=follow) as resp:
            return resp.status, dict(resp.headers), await resp.read()


async def ws_status(served: Served, *, cookie: str | None = None, headers: dict[str, str] | None = None) -> int:
    hdrs = dict(headers or {})
    if cookie is not None:
        hdrs["Cookie"] = f"{served.cookie}={cookie}"
    async with aiohttp.ClientSession() as http:
        try:
            async with http.ws_connect(served.ws_url + "?width=80&height=24", headers=hdrs) as ws:
                await ws.close()
                return 101
        except aiohttp.WSServerHandshakeError as e:
            return e.status


async def session_output(served: Served, *, keys: str = "", cookie: str | None = None,
                         when: bytes = b"report-001", timeout: float = 60.0) -> tuple[str, list[str]]:
    """Open a session, type ``keys`` once the app draws, and collect everything the browser would be
    sent until the server closes the websocket (``keys`` go once ``when`` was drawn). Returns (terminal bytes as text, text messages)."""
    received = bytearray()
    texts: list[str] = []
    hdrs = {"Cookie": f"{served.cookie}={cookie or served.token}"}
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(served.ws_url + "?width=100&height=30", headers=hdrs) as ws:
            sent = not keys
            deadline = Deadline(timeout)
            while True:
                msg = await asyncio.wait_for(ws.receive(), max(0.1, deadline.left()))
                if msg.type == aiohttp.WSMsgType.BINARY:
                    received.extend(msg.data)
                    if not sent and when in received:
                        await ws.send_str(json.dumps(["stdin", keys]))
                        sent = True
                elif msg.type == aiohttp.WSMsgType.TEXT:
                    texts.append(msg.data)
                else:
                    break
    return received.decode("utf-8", "replace"), texts


async def until_closed(ws: Any) -> None:
    while (await ws.receive()).type not in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED,
                                            aiohttp.WSMsgType.CLOSING):
        pass


# ---------------------------------------------------------------------- who gets in
async def test_every_path_refuses_without_or_with_a_wrong_token(ledger_path: Path) -> None:
    with serving(ledger_path) as served:
        for path in PATHS:
            status, headers, body = await get(served, path)
            assert status == 401, (path, status)
            assert b"token" in body and served.token.encode() not in body
            assert "Content-Security-Policy" in headers
            for bad in wrong_tokens(served.token):
                assert (await get(served, path, cookie=bad))[0] == 403, (path, bad)
                assert (await get(served, path, headers={"Authorization": f"Bearer {bad}"}))[0] == 403
        sep = "&" if "?" in PATHS[2] else "?"
        assert (await get(served, f"/?fontsize=20{sep}token={served.token[:-1]}"))[0] == 403
        assert await ws_status(served) == 401
        for bad in wrong_tokens(served.token)[:4]:
            assert await ws_status(served, cookie=bad) == 403
        assert served.sessions() == []  # no console was started for anyone refused


async def test_token_in_url_becomes_a_cookie(ledger_path: Path) -> None:
    with serving(ledger_path) as served:
        status, headers, body = await get(served, f"/?token={served.token}&fontsize=18")
        assert status == 200 and b'id="terminal"' in body
        assert served.token.encode() not in body  # the page does not echo it (page.js drops it from the URL)
        cookie = headers["Set-Cookie"]
        assert cookie.startswith(f"{served.cookie}={served.token};")
        for attr in ("HttpOnly", "SameSite=Strict", "Path=/"):
            assert attr in cookie
        assert "Secure" not in cookie
        _, headers, _ = await get(served, f"/?token={served.token}", headers={"X-Forwarded-Proto": "https"})
        assert "Secure" in headers["Set-Cookie"]
        _, headers, _ = await get(served, "/", cookie=served.token)
        assert "Set-Cookie" not in headers  # only a token in the URL is turned into a cookie
        status, headers, body = await get(served, "/?fontsize=18", cookie=served.token)
        assert status == 200 and headers["Cache-Control"] == "no-store"
        assert b'data-font-size="18"' in body and served.token.encode() not in body
        assert "connect-src 'self'" in headers["Content-Security-Policy"]
        for path in ASSETS:
            status, _, data = await get(served, path, cookie=served.token)
            assert status == 200 and data, path
            status, _, _ = await get(served, path, headers={"Authorization": f"Bearer {served.token}"})
            assert status == 200, path
        # textual-serve's other files (its background image, a directory listing) are not served
        assert (await get(served, "/static/images/background.png", cookie=served.token))[0] == 404
        assert (await get(served, "/assets/", cookie=served.token))[0] in (403, 404)
        assert (await get(served, "/assets/../server.py", cookie=served.token))[0] in (403, 404)


async def test_page_is_self_contained(ledger_path: Path) -> None:
    """The page and its CSS name no other host: every script, stylesheet and font is ours."""
    with serving(ledger_path) as served:
        _, _, page = await get(served, "/", cookie=served.token)
        _, _, fonts = await get(served, "/assets/fonts.css", cookie=served.token)
        _, _, css = await get(served, "/assets/page.css", cookie=served.token)
        for text in (page, fonts, css):
            assert not re.search(rb"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I)
        for url in re.findall(rb'(?:src|href)="([^"]+)"', page) + re.findall(rb'url\("([^"]+)"\)', fonts):
            if url.startswith(b"data:"):
                continue
            assert url.startswith(b"/"), url
            assert (await get(served, url.decode(), cookie=served.token))[0] == 200, url


async def test_websocket_from_another_site_is_refused(ledger_path: Path) -> None:
    with serving(ledger_path) as served:
        host = served.origin.split("//", 1)[1]
        for origin in ("http://evil.example", f"http://{host}.evil.example", "null", f"https://evil.example:{served.port}"):
            assert await ws_status(served, cookie=served.token, headers={"Origin": origin}) == 403, origin
        assert await ws_status(served, cookie=served.token, headers={"Origin": served.origin}) == 101


# ---------------------------------------------------------------------- what a session runs
async def test_session_is_read_only_and_acts_as_the_token_not_the_server_user(ledger_path: Path) -> None:
    with serving(ledger_path, "--operator", "alice") as served:
        out, _ = await session_output(served, keys="q")
        assert "The console ended (exit status 0)." in out
        (number, name, pid, mode), = served.sessions()
        assert (name, mode) == ("alice", "read-only")
    # the process is gone now; its command line was logged: check the one the next test reads live


async def test_session_command_line_and_environment(ledger_path: Path) -> None:
    for args, operator, read_only in ((["--operator", "alice"], "alice", True),
                                      (["--allow-actions", "--operator", "bob.ops@team"], "bob.ops@team", False),
                                      ([], None, True)):
        env = {"WARDEN_SERVE_TOKEN": "t" * 20 + "-secret"} if not args else {}
        with serving(ledger_path, *args, env=env, token="t" * 20 + "-secret" if env else None) as served:
            hdrs = {"Cookie": f"{served.cookie}={served.token}"}
            async with aiohttp.ClientSession() as http:
                async with http.ws_connect(served.ws_url, headers=hdrs) as ws:
                    m = served.wait_line(r"session 1 started for (\S+) \(pid (\d+)")
                    pid = int(m[2])
                    # the shell textual-serve starts execs the console: wait for that (same pid)
                    deadline = Deadline(30)
                    while "console" not in (argv := cmdline(pid))[1:3] and not deadline.expired():
                        await asyncio.sleep(0.02)
                    child_env = environ(pid)
                    await ws.send_str(json.dumps(["stdin", "q"]))
                    await until_closed(ws)
        assert argv[1:4] == ["-m", "console", "console"]
        assert argv[argv.index("--ledger") + 1] == str(ledger_path)
        assert ("--read-only" in argv) is read_only
        got = argv[argv.index("--operator") + 1]
        if operator is None:  # a name tied to the token, never the server's user
            assert re.fullmatch(r"web-[0-9a-f]{8}", got) and m[1] == got
        else:
            assert got == operator == m[1]
        assert os.environ.get("USER", "root") not in got
        assert "WARDEN_SERVE_TOKEN" not in child_env  # the secret stays with the server
        assert child_env["TEXTUAL_DRIVER"].endswith("WebDriver")
        # no cell both dim and inverse (xterm.js draws it as a solid block: "—" on the selected row)
        assert child_env["TEXTUAL_FILTERS"] == "dim"
        assert child_env["WARDEN_SERVED"] == "1"  # its read-only notice names --allow-actions


async def test_named_tokens_each_act_as_their_name(ledger_path: Path, tmp_path: Path) -> None:
    book = {"alice": "a" * 24, "bob": "b-" * 12, "carol@ops": "C0ffee" * 4}
    path = tmp_path / "tokens"
    path.write_text("# who may look\n\n" + "".join(f"{n}   {t}\n" for n, t in book.items()))
    with serving(ledger_path, "--tokens", str(path), "--allow-actions", token="") as served:
        assert "token=…" in "".join(served.lines) and not any(t in "".join(served.lines) for t in book.values())
        for name, token in book.items():
            await session_output(served, keys="q", cookie=token)
        assert [s[1] for s in served.sessions()] == list(book)
        assert (await get(served, "/", cookie="a" * 23))[0] == 403


async def test_session_end_shows_what_the_console_printed(ledger_path: Path, tmp_path: Path) -> None:
    """A console that cannot start says why; the page shows that line, made safe, not a bare end."""
    ledger = tmp_path / "other" / "ledger.db"
    ledger.parent.mkdir()
    ledger.write_bytes(ledger_path.read_bytes())
    with serving(ledger) as served:
        # the ledger turns into garbage after the server checked it (\x1b is agent-like bytes)
        ledger.write_bytes(b"not a database \x1b]0;pwned\x07" * 100)
        for suffix in ("-wal", "-shm"):
            Path(str(ledger) + suffix).unlink(missing_ok=True)
        out, _ = await session_output(served, keys="q", when=b"cannot open the ledger")
        ended = out[out.index("The console ended"):]
        assert re.search(r"The console ended \(exit status [1-9]\d*\)\.", ended)
        assert "It printed:" in ended and "warden:" in ended
        assert "\x1b]0;pwned" not in ended and "\x07" not in ended  # escapes arrive as text
        served.wait_line(r"session 1 ended \(console exit status [1-9]")


async def test_session_limit(ledger_path: Path) -> None:
    with serving(ledger_path, "--max-sessions", "1") as served:
        hdrs = {"Cookie": f"{served.cookie}={served.token}"}
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(served.ws_url, headers=hdrs) as ws:
                served.wait_line(r"session 1 started")
                assert await ws_status(served, cookie=served.token) == 503
                await ws.send_str(json.dumps(["stdin", "q"]))
                await until_closed(ws)
        served.wait_line(r"session 1 ended")
        out, _ = await session_output(served, keys="q")
        assert "The console ended (exit status 0)." in out


async def test_stopping_the_server_ends_open_sessions(ledger_path: Path) -> None:
    with serving(ledger_path) as served:
        hdrs = {"Cookie": f"{served.cookie}={served.token}"}
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(served.ws_url, headers=hdrs) as ws:
                pid = int(served.wait_line(r"session 1 started for \S+ \(pid (\d+)")[1])
                got = bytearray()
                while b"report-001" not in got:
                    got.extend((await ws.receive()).data or b"")
                served.proc.terminate()
                while (msg := await ws.receive()).type == aiohttp.WSMsgType.BINARY:
                    got.extend(msg.data)
                assert served.proc.wait(30) == 0
        assert b"The console ended (exit status 0).\r\nThe server stopped" in got
        deadline = Deadline(10)
        while Path(f"/proc/{pid}").exists() and _alive(pid):
            assert not deadline.expired(), "the session's console outlived the server"
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


MALFORMED = ['not json', '{"a": 1}', '["stdin", 123]', '["stdin"]', '[]', '[' * 100_000]


async def test_a_malformed_message_ends_only_that_session(ledger_path: Path) -> None:
    """Each malformed message, in a session of its own on one server, ends that session; the
    server goes on serving the next one (one server for all: starting one per message cost ~8 s
    each and proved nothing more)."""
    with serving(ledger_path) as served:
        hdrs = {"Cookie": f"{served.cookie}={served.token}"}
        for n, message in enumerate(MALFORMED, 1):
            async with aiohttp.ClientSession() as http:
                async with http.ws_connect(served.ws_url, headers=hdrs) as ws:
                    served.wait_line(rf"session {n} started")
                    await ws.send_str(message)
                    await until_closed(ws)
            served.wait_line(rf"session {n} ended")
        out, _ = await session_output(served, keys="q")  # the server still serves
        assert "The console ended (exit status 0)." in out
        assert "Traceback" not in "".join(served.lines)


def test_a_taken_port_is_one_line_and_exit_1(ledger_path: Path) -> None:
    import subprocess
    import sys

    with serving(ledger_path) as served:
        proc = subprocess.run([sys.executable, "-m", "console", "serve", "--ledger", str(ledger_path),
                               "--port", str(served.port)], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.returncode == 1, proc
    assert proc.stderr.strip().splitlines() == [f"warden serve: cannot listen on 127.0.0.1:{served.port}: "
                                                "address already in use"], proc.stderr
    assert "http://" not in proc.stdout
