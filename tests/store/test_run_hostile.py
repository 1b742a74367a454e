"""``warden run`` under hostile children: floods, binary, escapes, forks, closed pipes, ignored
signals, huge command lines, long lines, commands that cannot start. Each case runs the real CLI
and asserts an answer within a bound, one escaped line of its own on stderr, a bounded peak
memory, nothing of the command left running, and nothing changed outside its node.

Bounds are generous where the machine's load is the only variable (a Python start on a loaded
machine takes seconds), tight where the point is the bound (the flood's end).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from store import Ledger
from store.storage.models import dumps
from tests.store.test_run_command import ROOT, node, wait_for
from tests.support.waiting import stretch

START_S = 30.0  # a warden run's own start and end on a loaded machine
RSS_CAP_KB = 160 * 1024  # warden run's peak resident memory (about 60-70 MB at rest)
FLOOD_S = 6


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _left(task: str) -> list[int]:
    """Processes still carrying the task in their environment (the command's, anywhere)."""
    needle = f"WARDEN_TASK={task}".encode()
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            env = Path(f"/proc/{e}/environ").read_bytes()
            st = Path(f"/proc/{e}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env.split(b"\0") and st not in ("Z", "X"):
            out.append(int(e))
    return out


class Hostile:
    """The real ``warden run`` around a hostile command; output to /dev/null, stderr kept."""

    def __init__(self, tmp_path: Path, argv: list[str], *extra: str, task: str | None = None) -> None:
        self.cwd = tmp_path / "w"
        self.cwd.mkdir(exist_ok=True)
        self.ledger = str(tmp_path / "l.db")
        self.task = task or f"h{os.getpid()}{time.monotonic_ns() % 10**9}"
        with Ledger.open(self.ledger) as led:
            led.create_task("sentinel", title="untouched", exist_ok=True)
            self.sentinel = led.task("sentinel")
        self.err = open(self.cwd / "run.err", "wb")
        cmd = [sys.executable, "-m", "console", "run", "--ledger", self.ledger, "--runs", str(self.cwd / "runs"),
               "--task", self.task, "--lease", "3", "--grace", "1", *extra, "--", *argv]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, cwd=self.cwd, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                     stdout=subprocess.DEVNULL, stderr=self.err, stdin=subprocess.DEVNULL)
        self.peak = 0
        self._watch = threading.Thread(target=self._sample, daemon=True)
        self._watch.start()

    def _sample(self) -> None:
        while self.proc.poll() is None:
            self.peak = max(self.peak, _rss_kb(self.proc.pid))
            time.sleep(0.05)  # a sampling period, not a synchronisation

    def wait(self, bound_s: float) -> int:
        try:
            code = self.proc.wait(bound_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"warden run did not answer within {bound_s:.0f}s")
        finally:
            self.err.close()
        self.took = time.monotonic() - self.started
        self._watch.join(5)
        return code

    @property
    def stderr(self) -> str:
        return (self.cwd / "run.err").read_text(errors="replace")

    def check(self) -> None:
        """The promises every case keeps."""
        own = [line for line in self.stderr.splitlines() if line.startswith("warden run")]
        assert own, self.stderr
        assert all(ch.isprintable() for line in own for ch in line), own  # escaped, one line each
        assert self.peak < RSS_CAP_KB, f"peak {self.peak} kB"
        wait_for(lambda: not _left(self.task), 15, "nothing of the command left")
        with Ledger.open(self.ledger) as led:
            assert led.task("sentinel") == self.sentinel  # nothing outside the node changed


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


PY = sys.executable


# ---------------------------------------------------------------------- the corpus
CASES = {
    # name: (argv, expected exit code, bound in seconds beyond START_S)
    "flood of lines": (["timeout", str(FLOOD_S), "yes", "a line of output printed as fast as it can be"], 124, FLOOD_S),
    "flood without a newline": (sh("head -c 300000000 /dev/zero"), 0, 20),
    "binary": (sh("head -c 20000000 /dev/urandom"), 0, 20),
    "escapes": ([PY, "-c", "import sys\nfor i in range(2000):\n"
                 "    sys.stdout.write('\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred\\x1b[0m \\u202e bidi \\x00 nul "
                 "\\r over \\x9b1m c1 \\ud800\\n'.encode('utf-8', 'surrogatepass').decode('utf-8', 'replace'))\n"
                 "sys.stdout.flush()"], 0, 10),
    "invalid utf-8": ([PY, "-c", "import sys; sys.stdout.buffer.write(b'\\xff\\xfe\\xc3(\\xe2\\x28\\xa1\\n' * 5000)"], 0, 10),
    "many forks in other sessions": (sh("for i in $(seq 1 40); do setsid sleep 300 & done; "
                                        "for i in $(seq 1 20); do (sleep 300 &) ; done; echo forked"), 0, 15),
    "stdout and stderr closed": (sh("exec >&- 2>&-; sleep 1; exit 0"), 0, 10),
    "writes into a closed pipe": (sh("exec 1>&-; echo lost; echo also lost >&2; exit 0"), 0, 10),
    "reads stdin": (sh("cat; echo read to the end"), 0, 10),
    "killed by a signal": (sh("kill -SEGV $$"), 128 + 11, 10),
    "exit 255": (sh("exit 255"), 255, 10),
    "huge command line": (["true", *["a" * 1000] * 1500], 0, 10),
    "long lines": ([PY, "-c", "for i in range(40): print(('é\\u202e\\x1b[1m' * 1000)[:3000])"], 0, 10),
    "not executable": (["/etc/hostname"], 126, 5),
    "a directory": (["/tmp"], 126, 5),
    "not found": (["surely-no-such-command-here"], 127, 5),
    "a grandchild keeps stdout open": (sh("setsid sleep 300 & echo done"), 0, 10),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_child(tmp_path, name):
    argv, code, bound = CASES[name]
    h = Hostile(tmp_path, argv)
    assert h.wait(START_S + bound + 30) == code, h.stderr
    h.check()
    if code == 0:
        n = node(h.ledger, task=h.task)
        assert n.status == "succeeded", h.stderr
        assert len(dumps(n.output).encode()) < 64 * 1024  # as the ledger measures it
    if name == "huge command line":
        cmd = node(h.ledger, task=h.task).output["command"]
        assert len(json.dumps(cmd)) < 4000 and cmd[0] == "true"
        assert cmd[-1] == f"[{1501 - len(cmd) + 1} more arguments, {(1501 - len(cmd) + 1) * 1000} characters, left out]"
    if name == "long lines":
        assert all(len(line) <= 1001 for line in node(h.ledger, task=h.task).output["last_lines"])
    if name in ("not executable", "a directory", "not found"):
        assert h.stderr.strip().count("\n") == 0  # one line
    if name == "escapes":
        with Ledger.open(h.ledger) as led:
            text = "".join(o.text for o in led.observations(h.task, "main", limit=1000))
        assert "\x1b" not in text and " over \x9b1m c1" in text  # as a terminal shows it (\r rewrites)


def test_a_flood_ends_with_its_command_and_keeps_memory_flat(tmp_path):
    """15 seconds of output as fast as it comes: warden run ends soon after its command, its
    memory flat (lines past the queue's bound are counted and dropped, never queued)."""
    flood_s = 15
    h = Hostile(tmp_path, ["timeout", str(flood_s), "yes", "x" * 60])
    assert h.wait(flood_s + START_S + 60) == 124
    assert h.took < flood_s + START_S, h.took
    h.check()
    print(f"\n{flood_s}s flood: warden run took {h.took:.1f}s, peak RSS {h.peak / 1024:.0f} MB", file=sys.stderr)
    with Ledger.open(h.ledger) as led:
        text = "\n".join(o.text for o in led.observations(h.task, "main", limit=10_000))
    assert "lines left out]" in text  # counted, not silently lost


def test_ignored_signals_are_ended_by_sigkill_after_the_grace(tmp_path):
    script = "trap '' TERM INT HUP; (trap '' TERM INT HUP; setsid sh -c \"trap '' TERM; sleep 300\") & " \
             "echo $$ > pid; while :; do sleep 0.05; done"
    h = Hostile(tmp_path, sh(script))
    wait_for(lambda: (h.cwd / "pid").exists() and node(h.ledger, task=h.task).status == "running", START_S, "running")
    t0 = time.monotonic()
    h.proc.send_signal(signal.SIGINT)
    assert h.wait(START_S) == 130
    assert time.monotonic() - t0 < stretch(1 + 15)  # the grace (1 s), then SIGKILL
    h.check()
