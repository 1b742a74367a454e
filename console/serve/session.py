"""One browser session: a `warden console` process behind textual-serve's app protocol.

textual-serve's ``AppService`` starts the process with Textual's web driver and relays its
packets; this subclass adds what Warden needs at the end of a session. When the console quits,
textual-serve closes the websocket at once and what the process printed afterwards (on stdout or
stderr) goes to the server's log. Here the session instead reads the process to its end and
shows the browser the exit status and those last lines, made safe (``console.text.safe``: no
control sequence from an error message reaches the browser's terminal), before it closes.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from typing import Awaitable, Callable, Sequence

from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from ..text import safe

OUTPUT_CAP = 16 * 1024  # bytes of the console's last words kept (the tail, if it said more)
PRELUDE = b"__GANGLION__\n"  # what Textual's web driver writes first
SECRET_ENV = ("WARDEN_SERVE_TOKEN",)  # never handed to a session
# xterm.js draws a cell that is both dim and inverse as a solid block (xterm.js issue 4161): every
# "—" (dim) on the selected row (reverse) was a white block. Textual's dim filter turns the dim
# attribute into a blended colour before it leaves the app, so no cell is ever both.
BROWSER_ENV = {"TEXTUAL_FILTERS": "dim"}


class SessionService(AppService):
    """A console process for one websocket."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        write_bytes: Callable[[bytes], Awaitable[None]],
        write_str: Callable[[str], Awaitable[None]],
        close: Callable[[], Awaitable[object]],
        download_manager: DownloadManager,
        env: dict[str, str] | None = None,
    ) -> None:
        # ``exec`` so the shell textual-serve starts becomes the console itself: its pid is the
        # console's, and a kill reaches it.
        async def close_remote() -> None:
            await close()

        super().__init__("exec " + shlex.join(argv), write_bytes=write_bytes, write_str=write_str,
                         close=close_remote, download_manager=download_manager)
        self.argv = tuple(argv)
        self.extra_env = dict(env or {})
        self.exit_status: int | None = None
        self.last_words = ""
        self.end_note = ""  # why the session ended, when it was not the operator's doing
        self._app_exited = False

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        env = super()._build_environment(width=width, height=height)
        for name in SECRET_ENV:
            env.pop(name, None)
        env.update(BROWSER_ENV)
        env.update(self.extra_env)
        return env

    async def on_meta(self, data: bytes) -> None:
        try:
            kind = json.loads(data).get("type")
        except (ValueError, AttributeError):
            return
        if kind == "exit":  # the app stopped; keep reading: the process may still print
            self._app_exited = True
            return
        await super().on_meta(data)

    async def run(self) -> None:
        """Relay the app's packets until it exits, then read what it printed and end the session."""
        process = self._process
        assert process is not None and process.stdout is not None and process.stderr is not None
        stdout, stderr = process.stdout, process.stderr
        errors = bytearray()

        async def drain_stderr() -> None:
            while chunk := await stderr.read(4096):
                errors.extend(chunk)
                del errors[:-OUTPUT_CAP]

        err_task = asyncio.create_task(drain_stderr())
        before = bytearray()  # anything printed before the app started (an import error, say)
        after = bytearray()
        try:
            while (line := await stdout.readline()) and line != PRELUDE:
                before.extend(line)
                del before[:-OUTPUT_CAP]
            if line == PRELUDE:
                while not self._app_exited:
                    kind = await stdout.readexactly(1)
                    size = int.from_bytes(await stdout.readexactly(4), "big")
                    payload = await stdout.readexactly(size)
                    if kind == b"D":
                        await self.on_data(payload)
                    elif kind == b"M":
                        await self.on_meta(payload)
                    elif kind == b"P":
                        await self.on_packed(payload)
            while chunk := await stdout.read(4096):
                after.extend(chunk)
                del after[:-OUTPUT_CAP]
        except (asyncio.IncompleteReadError, ConnectionResetError):
            pass
        finally:
            self.exit_status = await process.wait()
            await err_task
        printed = (bytes(before) + bytes(after) + bytes(errors)).decode("utf-8", "replace")
        self.last_words = printed[-OUTPUT_CAP:]
        await self._show_end()

    async def _show_end(self) -> None:
        text = safe(self.last_words).rstrip("\n")
        lines = [f"The console ended (exit status {self.exit_status})."]
        if self.end_note:
            lines.append(self.end_note)
        if text:
            lines += ["It printed:", ""] + text.split("\n")
        # Leave the app's screen (the web driver stays in it) and write plainly on the main one.
        shown = "\x1b[?1049l\x1b[0m\x1b[?25l\x1b[2J\x1b[H" + "\r\n".join(lines) + "\r\n"
        try:
            await self.remote_write_bytes(shown.encode("utf-8"))
        except Exception:  # the browser went away first: nothing to show, nobody to show it to
            pass
        try:
            await self.remote_close()
        except Exception:
            pass

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Ask the console to quit; kill it if it has not within ``timeout`` seconds."""
        try:
            await asyncio.wait_for(asyncio.shield(self.stop()), timeout)
        except asyncio.TimeoutError:
            if self._process is not None and self._process.returncode is None:
                try:
                    self._process.kill()
                except ProcessLookupError:
                    pass
            if self._task is not None:
                await self._task


__all__ = ["BROWSER_ENV", "OUTPUT_CAP", "SECRET_ENV", "SessionService"]
