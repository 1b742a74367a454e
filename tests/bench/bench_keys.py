"""Keys on a quiet task list: what one ``j``/``k`` costs the shipped console.

    python tests/bench/bench_keys.py                # 60 tasks, 120 keys
    python tests/bench/bench_keys.py --tasks 500 --keys 300

The shipped ``warden console`` (``python -m console console --ledger …``) on a pseudo-terminal of
100×30 drawn by pyte (tests/support/console_terminal.py), on a fleet-shaped ledger that nothing
writes (tests/support/fleet.py). Reported: key → frame (the key written to the terminal → the
emulated screen showing the cursor's row moved) p50/p95/max, the console's CPU and the bytes it
writes per key, and the same per second while idle (the once-a-second refresh of ages).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from tests.support import fleet
    from tests.support.console_terminal import Terminal, console_argv, highlighted_row, shows

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=60)
    ap.add_argument("--keys", type=int, default=120)
    ap.add_argument("--every", type=float, default=0.15, help="seconds between keys")
    a = ap.parse_args()
    target = os.path.join(tempfile.mkdtemp(prefix="bench-keys-"), "ledger.db")
    fleet.build(target, a.tasks, 3)
    term = Terminal(console_argv(target), 100, 30)
    try:
        term.wait_for(shows("t0000"), 60, "the task list")
        time.sleep(3)  # the first analysis run and its repaint (pacing, not synchronisation)
        c0, b0, t0 = term.cpu_seconds(), term.bytes, time.monotonic()
        time.sleep(10)
        idle_s = time.monotonic() - t0
        idle_cpu, idle_bytes = term.cpu_seconds() - c0, term.bytes - b0
        lat: list[float] = []
        c0, b0 = term.cpu_seconds(), term.bytes
        for i in range(a.keys):
            before = term.cursor_row()
            moved = term.when(lambda s, b=before: highlighted_row(s) != b)
            pressed = term.press(b"j" if (i // 10) % 2 == 0 else b"k")
            shown = term.wait(moved, 5)
            if shown is not None:
                lat.append((shown - pressed) * 1000)
            time.sleep(a.every)  # pacing the keys
        key_cpu, key_bytes = term.cpu_seconds() - c0, term.bytes - b0
    finally:
        term.close()
    lat.sort()
    print(f"{a.tasks} tasks, {a.keys} keys every {a.every * 1000:.0f} ms")
    print(f"key → frame p50 / p95 / max: {statistics.median(lat):.1f} / {lat[int(0.95 * (len(lat) - 1))]:.1f} / "
          f"{lat[-1]:.1f} ms (n={len(lat)}, {a.keys - len(lat)} not seen)")
    print(f"per key: {1000 * key_cpu / a.keys:.1f} ms of the console's CPU (idle time included), "
          f"{key_bytes / a.keys:,.0f} bytes written")
    print(f"idle: {100 * idle_cpu / idle_s:.1f} % of a core, {idle_bytes / idle_s:,.0f} bytes/s")


if __name__ == "__main__":
    main()
