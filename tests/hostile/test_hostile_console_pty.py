"""Hostile agent text in every console surface, driven in a real terminal (a pty), as an operator
would: the console does not crash, no control sequence the agent wrote reaches the terminal (OSC
52/8/0, CSI, DCS, C1, bidi), and markup shows literally — ``[/]`` included, which once crashed the
resolve screen.

Surfaces: task title; node key, title and kind; worker; observation (10,000 lines); note; error;
handoff question, options (ids, labels, consequences), recommendation and context; effect key and
compensation; artifact name; a ledger from elsewhere whose task id, node key and status are
hostile; run directory names and their files; the ledger path in the error screen.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import sqlite3
import struct
import sys
import termios
import time
from pathlib import Path

import pytest

from store import Ledger, ManualClock, NodeSpec
from tests.support.waiting import Deadline
from tests.support.asks import ask

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000.0

# Sequences an agent may write; none may reach the terminal raw. Textual never sends these.
RAW = {
    "OSC 52 clipboard": b"\x1b]52;",
    "OSC 8 link": b"\x1b]8;",
    "OSC 0 title": b"\x1b]0;pwn",
    "CSI device report": b"\x1b[6n",
    "CSI window report": b"\x1b[21t",
    "DCS": b"\x1bP",
    "RIS reset": b"\x1bc",
}
C1_OR_BIDI = re.compile(rb"\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")
EVIL = ("\x1b]52;c;cHduZWQ=\x07\x1b]8;;https://evil.example\x07L\x1b]8;;\x07\x1b[6n\x1b[21t\x1bPq#0\x1b\\"
        "\x1bc\x9b31m\u202eRTL\u2066")


def tagged(tag: str) -> str:
    """Hostile text with a visible tag (to find it on screen) and markup that must stay literal."""
    return f"{tag} [bold red]{tag}[/] {EVIL} [link=https://evil.example]{tag}[/link] [/]"


def build(tmp: Path) -> Path:
    path = tmp / "ledger.db"
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock) as led:
        led.create_task("evil", title=tagged("TTITLE"), constraints=[tagged("CONSTR")])
        for key in ("fetch", "broken", "ask", "later"):
            led.add_node("evil", key, title=tagged("NTITLE"), kind="tool\x1b[6n[b]K")
        c = led.claim("evil", worker="W\x1b]52;c;QQ==\x07[/]orker", lease_s=10**6)  # fetch
        clock.advance(5)
        led.heartbeat(c, units_done=1, units_total=3, observation="\n".join(
            tagged(f"OBS{i}") if i % 1000 == 0 else f"line {i} \x1b[6n" for i in range(10_000)))
        led.note(c, tagged("NOTE"))
        led.intend_effect(c, "fx:\x1b]52;c;QQ==\x07[/]EFFECT", compensation=tagged("COMP"))
        led.confirm_effect(c, "fx:\x1b]52;c;QQ==\x07[/]EFFECT", external_id=tagged("EXT"))
        led.commit(c, output={"o": tagged("OUT")}, artifact=(tagged("ART"), b"data"))
        c = led.claim("evil", worker="w2", lease_s=10**6)  # broken
        led.fail(c, error=tagged("ERROR"), failure_class="spec", retryable=False)
        c = led.claim("evil", worker="w3", lease_s=10**6)  # ask
        ask(led, c, kind="confirm", question=tagged("QUESTION") + "\nsecond line\x1b[6n",
                          options=[{"id": "[/]", "label": "[bold red]OPT[/]", "consequence": tagged("CONSEQ")},
                                   {"id": "x\x1b[6n[b]", "label": tagged("LABEL2")}],
                          recommendation="[/]", context={"done": tagged("CTXDONE"), "why": tagged("WHY")})
        # the task's mind: requirement, conclusion, source, reason, plan reason, memory
        led.create_task("mindful", title=tagged("MTITLE"), workflow="wf",
                        requirements=[{"id": "r1", "text": tagged("REQ")}])
        led.add_node("mindful", "m1", serves=["r1"])
        c = led.claim("mindful", worker="w4", lease_s=10**6, key="m1")
        led.conclude(c, tagged("CONCL"), source="src \x1b]52;c;QQ==\x07[/]SRC")
        led.conclude(c, "tried", kind="rejected", reason=tagged("RREASON"), source="tests")
        led.propose_memory(c, tagged("MEMO"), source="tests")
        led.commit(c, output={})
        led.replan("mindful", add=[NodeSpec("m2")], trigger="pattern", reason=tagged("PLANWHY"), actor="w4")
    # A ledger from elsewhere: ids and a status no Warden would write, straight into the tables.
    con = sqlite3.connect(path)
    con.execute("INSERT INTO task (task_id, title, workflow, workflow_version, status, inputs, constraints, "
                "preconditions, soft_ratio, tokens_used, max_claims, max_repairs, repair_count, claim_count, "
                "paused_s, revision, created_at, updated_at) VALUES (?, ?, '', '', ?, '{}', '[]', '{}', 0.7, 0, 5, "
                "3, 0, 0, 0, 1, ?, ?)", ("T\x1b]52;c;QQ==\x07[/]X", "tampered " + tagged("TAMPER"), "weird\x1b[6n", T0, T0))
    con.execute("INSERT INTO node (task_id, key, position, kind, title, status, preconditions, always_admit, "
                "retryable, rejections, version, attempt, tokens_used, wall_used_s, claim_count) VALUES "
                "(?, ?, 1, 'k', 'n', ?, '{}', 0, 1, '[]', 1, 0, 0, 0, 0)",
                ("T\x1b]52;c;QQ==\x07[/]X", "K\x1b]52;c;QQ==\x07[/]EY", "odd\x9b2J"))
    con.commit()
    con.close()
    return path


def runs(tmp: Path) -> Path:
    """Run directories with hostile names and contents."""
    root = tmp / "runs"
    for name in ("run-\x1b]52;c;QQ==\x07[b]", "plain-run"):  # (a name cannot hold "/")
        d = root / name
        (d / "artifact").mkdir(parents=True)
        (d / "state.json").write_text(json.dumps({
            "run_id": name, "task_id": "evil\x1b[6n", "node_key": "[/]", "status": "interrupted\x1b]0;pwn\x07",
            "steps": [{"name": tagged("STEP"), "status": "running"}], "updated_at": "\u202e2027",
        }))
        (d / "context.json").write_text(json.dumps({"inputs": {tagged("INPUT"): "0" * 64}}))
        (d / "artifact" / "manifest.json").write_text(json.dumps({"files": {tagged("FILE"): {"sha256": "0",
                                                                                               "bytes": 1}}}))
    return root


class Terminal:
    """The console in a pty, 120×40, exactly as an operator starts it.

    Each step waits for what it expects on screen, with a safety net of ``STEP_S`` idle seconds
    stretched by the machine's load (tests/support/waiting.py) — no budget for the whole test, which
    a loaded machine can exceed while every step is healthy. A key is sent once: the console takes
    keys typed ahead (console/typeahead.py), and a key sent again while the first is still on its way
    (a loaded machine) would act twice — an escape more leaves one screen more.
    """

    STEP_S = 60.0

    def __init__(self, cwd: Path, *argv: str) -> None:
        self.out = bytearray()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover - the child
            os.chdir(cwd)
            env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40", PYTHONPATH=str(ROOT))
            env.pop("NO_COLOR", None)
            os.execve(sys.executable, [sys.executable, "-m", "console", *argv], env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.status: int | None = None
        self.started = time.monotonic()
        self.steps: list[str] = []  # what was sent and seen, when (said when a wait fails)

    def _log(self, what: str) -> None:
        self.steps.append(f"{time.monotonic() - self.started:7.2f}s {what} (at byte {len(self.out)})")

    def screen(self) -> str:
        """The screen as a terminal would show it now (the output so far through pyte)."""
        import pyte

        screen = pyte.Screen(120, 40)
        pyte.ByteStream(screen).feed(bytes(self.out))
        return "\n".join(line.rstrip() for line in screen.display)

    def pump(self, pred, *, what: str = "") -> None:
        deadline = Deadline(self.STEP_S)
        while not pred():
            if deadline.expired():
                raise AssertionError(f"timed out waiting for {what} ({deadline.waited():.0f} s); the steps:\n"
                                     + "\n".join(self.steps) + "\nthe screen:\n" + self.screen()
                                     + f"\nthe last bytes: {bytes(self.out[-600:])!r}")
            if self.status is None:
                done, st = os.waitpid(self.pid, os.WNOHANG)
                if done:
                    self.status = os.waitstatus_to_exitcode(st)
                    assert pred(), f"the console exited ({self.status}) before {what}: {bytes(self.out[-800:])!r}"
                    return
            r, _, _ = select.select([self.fd], [], [], 0.3)
            if r:
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except OSError:
                    chunk = b""
                if chunk:
                    self.out.extend(chunk)
        self._log(f"saw {what}")

    def write(self, data: bytes) -> None:
        self._log(f"sent {data!r}")
        os.write(self.fd, data)

    def wait_for(self, text: bytes, what: str = "") -> None:
        self.pump(lambda: text in self.out, what=what or repr(text))

    def key(self, k: bytes, then: bytes, what: str = "") -> None:
        mark = len(self.out)
        self.write(k)
        self.pump(lambda: then in self.out[mark:], what=what or f"{k!r} → {then!r}")

    def back_to(self, screen: bytes) -> None:
        """escape, until the status bar names ``screen`` — its whole title, so the node detail's
        "task evil › fetch" is not taken for the graph's "task evil". Only then is the next key
        sent: one that follows an escape within Textual's escape delay (0.1 s) makes it alt+key."""
        mark = len(self.out)
        pattern = re.compile(rb" warden .{0,60}?" + re.escape(screen) + rb"(?:\x1b\[[0-9;]*m)*  \xc2\xb7", re.S)
        self.write(b"\x1b")
        self.pump(lambda: pattern.search(self.out, mark) is not None, what=f"back to {screen!r}")

    def leave_filter(self) -> None:
        """escape out of the list's filter input, until the list's own footer is back (the input's
        says only "esc Leave filter"): the screen stays the same, so its title says nothing. (Call
        it once the input's footer was seen: while the input opens, the screen is laid out again
        with the list's footer still in it, which would pass for this.)"""
        mark = len(self.out)
        self.write(b"\x1b")
        self.pump(lambda: b"Sort" in self.out[mark:], what="the filter left")

    def press(self, k: bytes) -> None:
        """One key, and whatever it repainted (a scroll)."""
        mark = len(self.out)
        self.write(k)
        self.pump(lambda: len(self.out) > mark, what=f"a repaint after {k!r}")

    def quit(self) -> int:
        self.write(b"q")
        self.pump(lambda: self.status is not None, what="exit")
        os.close(self.fd)
        return int(self.status or 0)

    def kill(self) -> None:
        try:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def assert_clean(out: bytes) -> None:
    for what, seq in RAW.items():
        assert seq not in out, f"{what} reached the terminal"
    m = C1_OR_BIDI.search(out)
    assert m is None, f"a raw C1/bidi character reached the terminal: {out[max(0, m.start() - 40):m.end() + 40]!r}"
    assert b"Traceback" not in out and b"MarkupError" not in out


def assert_clean_with_markup_shown(out: bytes) -> None:
    assert_clean(out)
    assert b"[bold red]" in out and b"[/]" in out  # markup shown as the characters it is


def open_graph(t: Terminal, title: bytes, seen: bytes) -> None:
    """From the task list: filter on ``title``, leave the filter input, open the first task's graph."""
    t.wait_for(title, "the task list")
    t.key(b"/", b"Leave filter", "the filter input's footer")
    t.write(title)
    t.leave_filter()
    t.key(b"\r", seen, "the graph")


@pytest.fixture
def world(tmp_path: Path) -> Path:
    build(tmp_path)
    runs(tmp_path)
    return tmp_path


@pytest.mark.slow
def test_task_graph_node_and_event_log(world: Path) -> None:
    t = Terminal(world, "console", "--ledger", "ledger.db", "--runs", "runs")
    try:
        open_graph(t, b"TTITLE", b"NTITLE")
        t.key(b"x", b"estimate", "the task's estimate explained")
        t.key(b"\r", b"Lease", "the node detail of fetch")
        t.wait_for(b"Signals", "the node's signals")
        t.wait_for(b"OBS0")
        for _ in range(90):  # down to the effects and the artifacts, one repaint per key
            if b"COMP" in t.out and b"ART" in t.out:
                break
            t.press(b"j")
        for seen in (b"COMP", b"ART"):
            t.wait_for(seen)
        t.back_to(b"task evil")
        t.key(b"j", b"broken", "the failed node")
        t.key(b"\r", b"ERROR", "the error text")
        t.back_to(b"task evil")
        t.back_to(b"tasks")
        t.key(b"e", b"event log")
        t.wait_for(b"NOTE", "the note in the event log")
        t.wait_for(b"\\x07[/]orker", "the worker's name, escaped")
        t.back_to(b"tasks")
        assert t.quit() == 0
    finally:
        t.kill()
    assert_clean_with_markup_shown(bytes(t.out))


@pytest.mark.slow
def test_the_mind_screen_and_the_memory_inbox(world: Path) -> None:
    """Requirement text, conclusions, their sources, rejected paths' reasons, a replan's
    reason and a proposed memory — all agent-written — shown literally, nothing reaching the terminal."""
    t = Terminal(world, "console", "--ledger", "ledger.db", "--runs", "runs")
    try:
        open_graph(t, b"MTITLE", b"task mindful")
        t.key(b"m", b"mind of task mindful", "the Mind screen")
        for seen in (b"REQ", b"CONCL", b"RREASON", b"PLANWHY", b"MEMO"):
            t.wait_for(seen)
        t.press(b"3")  # the conclusions' heading
        t.key(b"j", b"SRC", "the first conclusion's source under the list")
        t.back_to(b"task mindful")
        t.back_to(b"tasks")
        t.key(b"M", b"memory inbox", "the memory inbox")
        t.wait_for(b"MEMO")
        t.back_to(b"tasks")
        assert t.quit() == 0
    finally:
        t.kill()
    assert_clean_with_markup_shown(bytes(t.out))


@pytest.mark.slow
def test_a_handoff_whose_option_is_markup_is_resolved(world: Path) -> None:
    t = Terminal(world, "console", "--ledger", "ledger.db", "--runs", "runs", "--operator", "op")
    try:
        t.wait_for(b"TTITLE")
        t.key(b"h", b"QUESTION", "the inbox")
        t.key(b"\r", b"CTXDONE", "the resolve screen")
        t.wait_for(b"[bold red]OPT[/]", "the option label, literally")
        t.key(b"\r", b"Resolve: [/]", "choosing the [/] option")
        t.key(b"\x13", b"resolved handoff", "ctrl+s and the notification")
        assert t.quit() == 0
    finally:
        t.kill()
    assert_clean(bytes(t.out))
    with Ledger.open(world / "ledger.db", read_only=True) as led:
        [h] = led.handoffs(status="resolved")
        assert h.resolution_option == "[/]" and h.resolved_by == "op"


@pytest.mark.slow
def test_a_ledger_from_elsewhere_runs_and_the_palette(world: Path) -> None:
    t = Terminal(world, "console", "--ledger", "ledger.db", "--runs", "runs")
    try:
        t.wait_for(b"tampered")
        t.key(b"\x10", b"Search", "the command palette")
        t.write(b"Open task T\\x1b")  # only the tampered task's entry has a backslash in it
        t.wait_for(b"TAMPER", "the tampered task in the palette, its title as help")
        t.key(b"\r", b"EY", "the tampered task's graph, opened from the palette")
        t.wait_for(b"odd\\x9b2J", "its node's status, escaped")
        t.back_to(b"tasks")
        t.key(b"g", b"plain-run", "the runs screen")
        t.wait_for(b"run-\\x1b]52;c;", "the hostile run name, escaped")
        t.key(b"\r", b"check 1", "the recovery wizard")
        for _ in range(5):
            t.write(b"\r")
        t.wait_for(b"decision", "the decision")
        t.back_to(b"runs and recovery")
        assert t.quit() == 0
    finally:
        t.kill()
    assert_clean(bytes(t.out))


@pytest.mark.slow
def test_the_error_screen_shows_a_hostile_path_escaped_and_says_it_never_existed(tmp_path: Path) -> None:
    name = "no\x1b]52;c;QQ==\x07[/]such.db"
    t = Terminal(tmp_path, "console", "--ledger", name)
    try:
        t.wait_for(b"How to fix", "the error screen")
        t.wait_for(b"no\\x1b]52;c;QQ==\\x07[/]such.db", "the path, escaped")
        assert b"disappeared" not in t.out
        assert t.quit() == 4  # ledger unavailable (console/cli/errors.py), through console_app
    finally:
        t.kill()
    assert_clean(bytes(t.out))
    assert not (tmp_path / name).exists()
