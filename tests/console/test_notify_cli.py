"""`warden notify` as an operator runs it: --follow in a real process (kill -9 mid-send), --test, --status.

Messages go to a local HTTP sink on 127.0.0.1 through apprise's ``json://``; the notifier's lines
and the sink's requests are what the tests wait on, never sleeps.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

pytest.importorskip("apprise", reason="warden notify needs the notify extra: pip install 'warden[notify]'")

from store import Ledger  # noqa: E402
from tests.support.sink import Sink, start_sink  # noqa: E402
from tests.support.waiting import Deadline  # noqa: E402
from tests.support.asks import ask as whole_ask

ROOT = Path(__file__).resolve().parents[2]
CONFIG = 'group = "0.2s"\ngroup_max = "1s"\nretry_first = "0.2s"\n'


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "XDG_CONFIG_HOME": "/nonexistent"}


def warden(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True, text=True, env=env(),
                          cwd=ROOT, timeout=timeout)


class Follower:
    """A `warden notify --follow` process and its output lines."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "console", "notify", "--follow", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env(), cwd=ROOT)
        self.lines: list[str] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()

    def wait_line(self, pattern: str, timeout: float = 60) -> None:
        deadline = Deadline(timeout)
        with self.cond:
            while not any(re.search(pattern, x) for x in self.lines):
                left = deadline.left()
                assert left > 0 and self.proc.poll() is None, f"no line {pattern!r} in {self.lines}"
                self.cond.wait(min(left, 0.5))

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(30)


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = start_sink()
    yield s
    s.close()


@pytest.fixture
def setup(tmp_path: Path) -> tuple[str, Path, Ledger]:
    path = str(tmp_path / "ledger.db")
    ledger = Ledger.open(path, create=True)
    ledger.create_task("prod-k")
    for i in range(3):
        ledger.add_node("prod-k", f"n{i}", kind="step")
    cfg = tmp_path / "notify.toml"
    cfg.write_text(CONFIG)
    yield path, cfg, ledger
    ledger.close()


def ask(ledger: Ledger, node: int, question: str) -> str:
    c = ledger.claim("prod-k", f"w{node}", lease_s=3600)
    return whole_ask(ledger, c, kind="direction", question=question)


def test_kill_9_mid_send_then_restart_sends_nothing_twice_and_status_says_so(setup, sink) -> None:
    path, cfg, ledger = setup
    url = sink.url("json", "hook")
    args = ("--to", url, "--ledger", path, "--config", str(cfg), "--link-base", "http://127.0.0.1:8000")
    first = Follower(*args)
    try:
        first.wait_line("warden notify: following")
        sink.hold()  # the service takes the first message and does not answer
        ask(ledger, 0, "First question?")
        sink.wait_for(lambda r: len(r) == 1)
        first.stop(signal.SIGKILL)  # killed mid-send
    finally:
        first.stop(signal.SIGKILL)
    sink.release()
    status = warden("notify", "--status", "--json", "--ledger", path)
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["counts"] == {"sending": 1} and doc["following"] is False

    second = Follower(*args)
    try:
        second.wait_line("marked uncertain, not sent again")
        ask(ledger, 1, "Second question?")
        got = sink.wait_for(lambda r: len(r) == 2)
        second.wait_line("sent to json://")
        assert "First question?" in got[0].text and "Second question?" in got[1].text
        assert "First question?" not in got[1].text
        status = warden("notify", "--status", "--ledger", path)
        assert status.returncode == 0 and "1 sent" in status.stdout and "1 uncertain" in status.stdout
        assert "following: yes" in status.stdout
        assert "the notifier stopped while sending it" in status.stdout
        again = Follower(*args)  # a second notifier on the same ledger is refused
        assert again.proc.wait(60) == 1
        assert any("another notifier follows this ledger already" in x for x in again.lines)
    finally:
        second.stop()
    assert second.proc.returncode == 0
    assert len(sink.received) == 2


def test_a_service_that_fails_is_retried_and_the_status_shows_the_error(setup, sink) -> None:
    path, cfg, ledger = setup
    sink.fail(2, status=502)
    f = Follower("--to", sink.url(), "--ledger", path, "--config", str(cfg))
    try:
        f.wait_line("warden notify: following")
        ask(ledger, 0, "Retry me?")
        f.wait_line(r"could not send to json://127\.0\.0\.1:\d+/…#\w+ \(cli\), again in 0s: .*502")
        got = sink.wait_for(lambda r: len(r) == 1)
        assert "Retry me?" in got[0].text
        f.wait_line("sent to json://")
    finally:
        f.stop()
    doc = json.loads(warden("notify", "--status", "--json", "--ledger", path).stdout)
    assert doc["counts"] == {"sent": 1} and doc["deliveries"][0]["attempts"] == 3


def test_test_sends_one_sample(sink, tmp_path) -> None:
    r = warden("notify", "--test", sink.url("json", "t"), "--link-base", "https://warden.example.com:8000")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"sent a test message to json://127\.0\.0\.1:\d+/…#\w+\n", r.stdout)
    [got] = sink.wait_for(lambda x: len(x) == 1)
    assert got.title == "Warden: test message" and "https://warden.example.com:8000/m/" in got.text


@pytest.mark.parametrize("args, code, line", [
    (("--test", "nosuchservice://x"), 2, "warden notify: --test: apprise cannot use"),
    (("--follow", "--ledger", "x.db"), 2, "warden notify: nobody to tell: give --to URL"),
    (("--status", "--to", "json://127.0.0.1/x"), 2, "warden notify: --to goes with --follow"),
    (("--follow", "--to", "json://127.0.0.1/x", "--link-base", "ftp://x"), 2, "--link-base: an http(s) address"),
    (("--status", "--ledger", "/nonexistent/l.db"), 1, "no notifier state here"),
    (("--test",), 2, "expected one argument"),
])
def test_bad_input_is_one_line_and_a_non_zero_exit(args, code, line) -> None:
    r = warden("notify", *args)
    assert r.returncode == code and line in r.stderr and r.stderr.count("\n") == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr


def test_test_to_a_service_that_is_down_says_why(tmp_path) -> None:
    r = warden("notify", "--test", "json://127.0.0.1:9/hook")
    assert r.returncode == 1 and r.stderr.startswith("warden notify: could not send to json://127.0.0.1:9/…")
    assert r.stderr.count("\n") == 1


def test_the_console_runs_the_notifier_when_configured(setup, sink, tmp_path, monkeypatch) -> None:
    from console.cli.notify import in_console
    from console.glyphs import SERVED_ENV

    path, cfg, ledger = setup
    conf = tmp_path / "console.toml"
    conf.write_text(CONFIG + f'console = true\n[[route]]\nname = "desk"\nto = "{sink.url("json", "desk")}"\n')
    monkeypatch.setenv("WARDEN_NOTIFY_CONFIG", str(conf))
    monkeypatch.setenv(SERVED_ENV, "1")
    assert in_console(path) is None  # a console warden serve runs for a browser does not notify
    monkeypatch.delenv(SERVED_ENV)
    running = in_console(path)
    assert running is not None
    try:
        assert in_console(path) is None  # one notifier per ledger: a second console leaves it to the first
        ask(ledger, 0, "Asked while the console is open?")
        [got] = sink.wait_for(lambda r: len(r) == 1)
        assert got.path == "/desk" and "Asked while the console is open?" in got.text
    finally:
        running.stop()
    assert not running.thread.is_alive()
    conf.write_text(CONFIG + f'[[route]]\nname = "desk"\nto = "{sink.url("json", "desk")}"\n')
    assert in_console(path) is None  # not configured to run in the console
