"""Keys typed in bursts into the shipped ``warden console`` on a real pty: nothing typed is lost or misplaced.

Over SSH an operator's keys arrive in bursts: an action key and the reason after it in one read,
a reason, Tab and the task id in the next. Each case writes its keys to the pty exactly so (one
write, a few writes back to back, or one write per key — never waiting in between), then reads
what the dialog's fields show on the emulated screen (pyte), and the last of each test applies
and reads the ledger. The abort cases run while an agent process keeps writing to the same
ledger, so the console is busy applying changes as the keys arrive.

Synchronised on the screen and the ledger only; the pauses in the agent only pace its writes.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import pyte
import pytest

from tests.support.console_app import build_ledger
from store import Ledger
from tests.support import busy_agent
from tests.support.console_terminal import Terminal, console_argv, shows

pytestmark = pytest.mark.slow

TAB, SHIFT_TAB, ENTER, BACKSPACE, CTRL_S, ESCAPE = b"\t", b"\x1b[Z", b"\r", b"\x7f", b"\x13", b"\x1b"
WAIT_S = 60.0


# ---------------------------------------------------------------------- how a burst is written
def one_write(keys: bytes) -> list[bytes]:
    return [keys]


def two_writes(keys: bytes) -> list[bytes]:
    return [keys[:2], keys[2:]]  # the action key and the first character, then the rest


def per_key(keys: bytes) -> list[bytes]:
    out, i = [], 0
    while i < len(keys):  # one write per key (an escape sequence is one key)
        n = 3 if keys[i:i + 3] == SHIFT_TAB else 1
        out.append(keys[i:i + n])
        i += n
    return out


def random_chunks(seed: int) -> Callable[[bytes], list[bytes]]:
    def split(keys: bytes) -> list[bytes]:
        rng, out, i = random.Random(seed), [], 0
        while i < len(keys):
            n = rng.randint(1, 7)
            if keys[i + n - 1:i + n + 2] == SHIFT_TAB or keys[i + n - 2:i + n + 1] == SHIFT_TAB:
                n += 2  # never split an escape sequence (a terminal never does within one key)
            out.append(keys[i:i + n])
            i += n
        return out
    return split


def write_burst(term: Terminal, keys: bytes, style: Callable[[bytes], list[bytes]]) -> None:
    for chunk in style(keys):
        term.press(chunk)  # back to back: nothing waits for the console in between


# ---------------------------------------------------------------------- reading the screen
def field(screen: pyte.Screen, label: str) -> str | None:
    """The text of a dialog's field (``reason``, ``confirm``) as drawn; None when not on screen."""
    for line in screen.display:
        inner = line.strip().strip("│").strip()
        if inner.startswith(label + " "):
            return inner[len(label):].strip()
    return None


def planned(screen: pyte.Screen) -> bool:
    return not any("computing the plan" in line for line in screen.display)


def dialog_shows(title: str, **fields: str) -> Callable[[pyte.Screen], bool]:
    def pred(screen: pyte.Screen) -> bool:
        return shows(title)(screen) and planned(screen) and all(field(screen, k) == v for k, v in fields.items())
    return pred


def no_dialog(screen: pyte.Screen) -> bool:
    return field(screen, "reason") is None


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return build_ledger(tmp_path / "ledger.db")


@pytest.fixture
def console(ledger_path: Path) -> Iterator[Terminal]:
    term = Terminal(console_argv(str(ledger_path)), cols=100, rows=30)
    try:
        term.wait_for(shows("idle-002"), WAIT_S, "the task list")
        yield term
    finally:
        if not no_dialog(term.screen):  # a failed case left its dialog open: q would be typed into it
            term.press(ESCAPE)
            term.wait(term.when(no_dialog), 10)
        term.close()


@pytest.fixture
def busy_agent_writing(ledger_path: Path, tmp_path: Path) -> Iterator[Callable[[], int]]:
    """An agent process writing to the ledger all along; returns the ledger's last event id."""
    stop = tmp_path / "stop-busy"
    proc = subprocess.Popen(busy_agent.command(str(ledger_path), "busy-1", str(stop)), stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"

    def last_event() -> int:
        with Ledger.open(ledger_path, create=False) as ledger:
            return ledger.last_event_id()

    try:
        yield last_event
    finally:
        stop.touch()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def open_graph_on_outline(term: Terminal) -> None:
    term.press(ENTER)  # report-001, the first task
    term.wait_for(shows("outline", "llm_call"), WAIT_S, "the graph")
    term.press(b"j")  # collect → outline
    term.wait_for(shows("outline", "deps:"), WAIT_S, "outline selected")


# ---------------------------------------------------------------------- item 6: `r` and the reason
REWIND_CASES = [
    (one_write, "the outline misses the Q3 risks"),
    (one_write, "jk loop: he quit ever"),  # j/k move the list, e/h open screens, q quits: none may act
    (two_writes, "Mixed CASE, digits 42 & punctuation?!"),
    (per_key, "slowly? no: one write a key"),
    (random_chunks(1), "chunks of 1-7 keys, seed one"),
    (random_chunks(2), "/filter-like text p u n a c r"),
]


def test_r_and_the_reason_in_one_burst_reach_the_dialog_in_order(console: Terminal, ledger_path: Path) -> None:
    term = console
    open_graph_on_outline(term)
    for style, reason in REWIND_CASES:
        write_burst(term, b"r" + reason.encode(), style)
        term.wait_for(dialog_shows("Rewind node outline", reason=reason), WAIT_S,
                      f"the rewind dialog with the reason {reason!r} ({style.__name__})")
        term.press(ESCAPE)
        term.wait_for(lambda s: no_dialog(s) and shows("outline", "deps:")(s), WAIT_S,
                      "the graph again, outline still selected")
    # Backspace typed ahead edits the reason; ctrl+s in the same burst applies once the plan is in.
    write_burst(term, b"r" + b"the outlinx" + BACKSPACE + b"e is thin" + CTRL_S, one_write)
    term.wait_for(lambda s: shows("applied (action")(s) or shows("cannot apply yet")(s), WAIT_S,
                  "the apply, or why not yet")
    if not shows("applied (action")(term.screen):  # ctrl+s came before the plan: it said so; again
        term.wait_for(dialog_shows("Rewind node outline", reason="the outline is thin"), WAIT_S, "the plan")
        term.press(CTRL_S)
        term.wait_for(shows("applied (action"), WAIT_S, "the apply")
    with Ledger.open(ledger_path, create=False) as ledger:
        assert ledger.node("report-001", "outline").rejections[-1] == "the outline is thin"
        assert [a.action for a in ledger.actions("report-001")].count("rewind") == 1


# ---------------------------------------------------------------------- item 7: Tab while an agent writes
ABORT_CASES = [
    # (keys after the dialog's key, how they are written, whether `a` is in the same burst)
    (b"stop it now" + TAB + b"report-001", one_write, True),
    (b"stop it now" + TAB + b"report-001", one_write, False),
    (b"typed fast" + TAB + b"report-001", per_key, False),
    (b"enter moves on" + ENTER + b"report-001", one_write, True),
    (b"chunked" + TAB + b"report-001", random_chunks(3), True),
    (b"back" + TAB + b"report-001" + SHIFT_TAB + b" again", random_chunks(4), False),
]


def expected(keys: bytes) -> tuple[str, str]:
    """(reason, confirm) as the keys put them: Tab/enter go to the next field, shift+Tab back."""
    fields, at = ["", ""], 0
    i = 0
    while i < len(keys):
        if keys[i:i + 3] == SHIFT_TAB:
            at, i = 0, i + 3
            continue
        ch = keys[i:i + 1]
        if ch in (TAB, ENTER):
            at = 1
        else:
            fields[at] += ch.decode()
        i += 1
    return fields[0], fields[1]


def test_reason_tab_task_id_typed_fast_while_an_agent_writes(console: Terminal, busy_agent_writing: Callable[[], int],
                                                             ledger_path: Path) -> None:
    term = console
    term.wait_for(shows("busy-1"), WAIT_S, "the agent's task on the list")
    start = busy_agent_writing()
    for keys, style, with_key in ABORT_CASES:
        reason, confirm = expected(keys)
        if not with_key:
            term.press(b"a")
            term.wait_for(dialog_shows("Abort task report-001"), WAIT_S, "the abort dialog, planned")
        write_burst(term, (b"a" if with_key else b"") + keys, style)
        term.wait_for(dialog_shows("Abort task report-001", reason=reason, confirm=confirm), WAIT_S,
                      f"reason {reason!r} and confirm {confirm!r} ({style.__name__}, `a` in the burst: {with_key})")
        term.press(ESCAPE)
        term.wait_for(no_dialog, WAIT_S, "the task list again")
    # And applied: the reason and the id each where they were typed, the task aborted.
    write_burst(term, b"a" + b"abandon: the sources are gone" + TAB + b"report-001", per_key)
    term.wait_for(dialog_shows("Abort task report-001", reason="abandon: the sources are gone", confirm="report-001"),
                  WAIT_S, "the filled abort dialog")
    term.press(CTRL_S)
    term.wait_for(shows("applied (action"), WAIT_S, "the apply")
    assert busy_agent_writing() > start + 30, "the agent kept writing while the keys were typed"
    with Ledger.open(ledger_path, create=False) as ledger:
        assert ledger.task("report-001").status == "aborted"
        (abort,) = [a for a in ledger.actions("report-001") if a.action == "abort"]
        assert abort.reason == "abandon: the sources are gone"


if __name__ == "__main__":  # pragma: no cover - python tests/console/test_keys_pty.py runs it alone
    sys.exit(pytest.main([os.path.abspath(__file__), "-q"]))
