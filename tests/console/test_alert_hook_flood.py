"""An ``--on-alert`` hook that floods its stderr costs the console no memory — only
the bounded tail that is shown is kept (it was buffered whole: 58 MB → 1.37 GB of RSS)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.waiting import stretch

ROOT = str(Path(__file__).resolve().parents[2])

# Runs run_hook in a fresh interpreter and reports the interpreter's peak RSS (KiB): the test's own
# process has run other tests, so its high-water mark says nothing.
PROBE = """
import json, resource, sys, time
from console.alerts import Alert, run_hook
a = Alert("handoff", "t", "n", None, "alarm", 1.8e9, "x")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.monotonic()
msg = run_hook(json.loads(sys.argv[1]), a, timeout=float(sys.argv[2]))
print(json.dumps({"msg": msg, "took": time.monotonic() - t0, "before": before,
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

MB = 1024  # ru_maxrss is in KiB on Linux


def _probe(hook: list[str], timeout: float) -> dict:
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(hook), str(timeout)], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB, /dev/zero: Linux")
def test_a_hook_flooding_stderr_then_failing_is_one_bounded_line():
    # 400 MB to stderr, then its last words and exit 5.
    flood = ("import os, sys\nblock = b'x' * (1 << 20)\nfor _ in range(400): os.write(2, block)\n"
             "os.write(2, b'\\nthe pager is down\\n'); sys.exit(5)")
    got = _probe([sys.executable, "-c", flood], 120)
    assert got["msg"] is not None and "exited 5" in got["msg"] and "the pager is down" in got["msg"], got
    assert "\n" not in got["msg"] and len(got["msg"]) < 400
    assert got["peak"] - got["before"] < 60 * MB, got  # was the whole 400 MB


def test_a_hook_flooding_stderr_forever_is_killed_in_time_with_bounded_memory():
    forever = "import os\nblock = b'y' * (1 << 20)\nwhile True: os.write(2, block)"
    got = _probe([sys.executable, "-c", forever], 3)
    assert "still running after 3s, killed" in (got["msg"] or ""), got
    assert got["took"] < 3 + stretch(5)  # the timeout, plus the work around it (stretched by the load)
    assert got["peak"] - got["before"] < 60 * MB, got


def test_a_hook_whose_child_keeps_stderr_open_does_not_hold_the_console(tmp_path):
    # The hook exits 0 at once; a child it left behind keeps the pipe open. Held, run_hook would
    # return at its timeout (120 s) at the soonest; not held, within moments — 5 s on an idle
    # machine, stretched by the load but never near the timeout.
    pidfile = tmp_path / "child.pid"
    hook = ["sh", "-c", f"sleep 600 & echo $! > {pidfile}; exit 0"]
    try:
        got = _probe(hook, 120)
    finally:
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    assert got["msg"] is None and got["took"] < min(stretch(5), 60), got
