"""The console seen through tmux: how long the screen stands still while commits go on.

    python tests/bench/bench_tmux.py --ledger /tmp/master100k.db      # a ledger bench_console.py built
    python tests/bench/bench_tmux.py --nodes 100000 --events 1000000  # build one first (~15 s)
    python tests/bench/bench_tmux.py --ledger L --burn 2              # on a loaded machine: 2 busy loops

The shipped ``warden console`` (``python -m console console``) runs in a tmux session of
``--cols``×``--rows`` (a private tmux server, killed at the end) on a copy of the ledger, with the big
task's graph open and complete. A writer claims ``rate × seconds`` nodes, waits 2 s, then commits
one every 1 / ``--rate`` s (10/s: every 100 ms) for ``--seconds``. Meanwhile this process reads the
screen with ``capture-pane`` (through one tmux control-mode client) in a loop (each read stamped when it returned; the longest time
between two reads is reported: it must stay ≤ 12 ms for the gaps to mean anything) and follows the
graph's done count on its summary line. Reported: the longest time the count stood still while the
commits went on (the gap between two successive changes seen), how many gaps were over 300 ms,
how much of each of the five longest was the console's (``gaps_top5_console_ms``: from the moment
the writer had finished a commit the screen did not show yet to the screen showing it — the rest of
a gap the writer had not committed anything new, on a loaded machine its fsync or its turn on a
core) and the longest such hold of any gap (``console_held_max_ms``), commit → screen p50/p95/max (the commit returned → the first read showing its count), the reads'
interval, and the load average before and after. With ``--open-during``, ``loading`` is the same
for the commits made while the graph streamed in (from the screen showing its first rows,
``graph_shown_s`` after the first commit, to the screen showing it whole, ``graph_whole_s``):
commit → screen p50/p95/max and the console's longest hold. ``--burn N`` runs N busy loops (at the same
priority as the console) throughout, so that the figure is taken on a machine whose cores are
loaded; they are stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

NICE = -10  # the reader's and the tmux server's priority, where allowed (root)
DONE_RE = re.compile(r"\b(\d+)/\d+\b")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def done_count(lines: list[str], task: str) -> int | None:
    """The done count on the graph's summary line (``big  active  123/100000 …``)."""
    for line in lines[:4]:
        m = DONE_RE.search(line)
        if m and task in line:
            return int(m.group(1))
    return None


class Tmux:
    """One command in a private tmux server; ``capture()`` reads the screen."""

    def __init__(self, argv: list[str], cols: int, rows: int, env: dict[str, str]) -> None:
        self.sock = f"warden-bench-{os.getpid()}"
        self.base = ["tmux", "-L", self.sock, "-f", "/dev/null"]
        cmd = " ".join(["env"] + [f"{k}={v}" for k, v in env.items()] + [subprocess.list2cmdline([a]) for a in argv])
        subprocess.run(self.base + ["new-session", "-d", "-s", "b", "-x", str(cols), "-y", str(rows), cmd], check=True)
        # the screen is read through one control-mode client (no process started per read: on a
        # loaded machine a `tmux capture-pane` each read came 60-100 ms apart at p99); the window
        # keeps its size whatever that client's, and the client is sent no pane output
        subprocess.run(self.base + ["set-option", "-g", "window-size", "manual"], check=True)
        self.control = subprocess.Popen(self.base + ["-C", "attach-session", "-t", "b"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, bufsize=1)
        self._command("refresh-client -f no-output")
        while self._command("display-message -p ready") != ["ready"]:  # past the attach's own reply
            pass

    def server_pid(self) -> int | None:
        r = subprocess.run(self.base + ["display-message", "-p", "#{pid}"], capture_output=True, text=True)
        return int(r.stdout) if r.stdout.strip().isdigit() else None

    def _command(self, command: str) -> list[str]:
        """One command through the control client: the lines of its reply (between %begin and %end)."""
        assert self.control.stdin is not None and self.control.stdout is not None
        self.control.stdin.write(command + "\n")
        self.control.stdin.flush()
        out: list[str] | None = None
        while True:
            line = self.control.stdout.readline()
            if not line:
                raise RuntimeError("the tmux control client ended")
            line = line.rstrip("\n")
            if line.startswith("%begin"):
                out = []
            elif line.startswith(("%end", "%error")) and out is not None:
                return out
            elif out is not None:
                out.append(line)  # (outside a reply: a notification, skipped)

    def capture(self) -> list[str]:
        return self._command("capture-pane -p -t b")

    def keys(self, *keys: str) -> None:
        subprocess.run(self.base + ["send-keys", "-t", "b", *keys], check=True)

    def pane_pid(self) -> int | None:
        r = subprocess.run(self.base + ["display-message", "-p", "-t", "b", "#{pane_pid}"], capture_output=True, text=True)
        return int(r.stdout) if r.stdout.strip().isdigit() else None

    def close(self) -> None:
        subprocess.run(self.base + ["kill-server"], capture_output=True)
        self.control.kill()
        self.control.wait()


class Reader(threading.Thread):
    """Reads the screen in a loop; keeps (time read, done count) and the intervals between reads."""

    def __init__(self, tmux: Tmux, task: str) -> None:
        super().__init__(daemon=True)
        self.tmux, self.task = tmux, task
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.last: list[str] = []
        self.counts: list[tuple[float, int]] = []
        self.intervals: list[float] = []
        self.recording = False
        self.graph_shown: float | None = None  # while recording: the first read showing the graph's rows
        self.graph_whole: float | None = None  # ... and the first showing it whole (nothing "loading")

    def run(self) -> None:
        if NICE:  # the measuring side is not what is measured: it reads on time (tmux's server too)
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
            except OSError:
                pass
        prev = None
        while not self.stop.is_set():
            lines = self.tmux.capture()
            t = time.monotonic()
            with self.lock:
                self.last = lines
                if self.recording:
                    if prev is not None:
                        self.intervals.append(t - prev)
                    c = done_count(lines, self.task)
                    if c is not None:
                        self.counts.append((t, c))
                    if self.graph_shown is None and any("n000000" in line for line in lines):
                        self.graph_shown = t
                    if self.graph_shown is not None and self.graph_whole is None \
                            and not any("loading" in line for line in lines):
                        self.graph_whole = t
            prev = t

    def wait_for(self, pred, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.last and pred(self.last):
                    return
            time.sleep(0.05)
        raise RuntimeError(f"timed out waiting for {what}:\n" + "\n".join(self.last))


class Writer:
    """tests/support/commit_writer.py, spoken to line by line."""

    def __init__(self, target: str, task: str) -> None:
        from tests.support.commit_writer import command

        self.proc = subprocess.Popen(command(target, task), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, cwd=ROOT)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def send(self, cmd: str) -> float | None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        got = self.proc.stdout.readline().split()
        assert got and got[0] in ("ok", "none"), f"the writer failed: {got!r}"
        return float(got[3]) if got[0] == "ok" else None

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(30)


def burners(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def run(a: argparse.Namespace) -> dict:
    work = Path(tempfile.mkdtemp(prefix="warden-tmux-"))
    target = work / "ledger.db"
    if a.ledger:
        shutil.copyfile(a.ledger, target)
    else:
        from tests.bench.bench_console import build

        build(target, a.nodes, a.events)
    out: dict = {"cols": a.cols, "rows": a.rows, "rate": a.rate, "seconds": a.seconds, "burn": a.burn,
                 "load1_start": round(os.getloadavg()[0], 2), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    argv = [sys.executable, "-m", "console", "console", "--ledger", str(target), "--runs", str(work)]
    env = {"PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    if a.trace:  # the console's timeline (tests/bench/console_trace.py), on the clock the gaps are stamped with
        argv = [sys.executable, str(ROOT / "tests" / "bench" / "console_trace.py"), *argv[3:]]
        env["WARDEN_BENCH_TRACE"] = str(Path(a.trace).resolve())
        for knob in ("WARDEN_BENCH_GIL_PROBE", "WARDEN_BENCH_HEAP", "WARDEN_BENCH_HEAP_CENSUS"):  # console_trace.py's switches
            if os.environ.get(knob):
                env[knob] = os.environ[knob]
    tmux = Tmux(argv, a.cols, a.rows, env)
    server = tmux.server_pid()
    try:
        if server is not None:
            os.setpriority(os.PRIO_PROCESS, server, NICE)
        os.setpriority(os.PRIO_PROCESS, tmux.control.pid, NICE)
        out["reader_nice"] = NICE
    except OSError:
        out["reader_nice"] = 0
    reader = Reader(tmux, a.task)
    reader.start()
    burn: list[subprocess.Popen] = []
    writer: Writer | None = None
    try:
        t0 = time.monotonic()
        reader.wait_for(lambda s: any(a.task in line for line in s), 120, "the task list")
        out["first_frame_s"] = round(time.monotonic() - t0, 2)
        burn = burners(a.burn)
        writer = Writer(str(target), a.task)
        n = int(a.rate * a.seconds)

        def open_graph() -> None:
            tmux.keys("Enter")
            reader.wait_for(lambda s: any("n000000" in line for line in s), 120, "the graph")

        if not a.open_during:
            open_graph()
            reader.wait_for(lambda s: not any("loading" in line for line in s), 600, "the whole graph")
            out["graph_complete_s"] = round(time.monotonic() - t0, 2)
        for _ in range(n):
            writer.send("claim")
        time.sleep(a.quiet)  # quiet: the claims' own refreshes are over (pacing, not synchronisation)
        out["load1_before_commits"] = round(os.getloadavg()[0], 2)
        with reader.lock:
            base = done_count(reader.last, a.task) or 0
            reader.recording = True
        if a.open_during:  # the graph opens as the commits start: its loading and first analysis among them
            tmux.keys("Enter")
        interval, nxt = 1.0 / a.rate, time.monotonic()
        commits_t0 = nxt
        out["commits_t0"] = round(commits_t0, 3)  # (the monotonic clock: a --trace file's)
        done: list[float] = []
        for _ in range(n):
            t = writer.send("commit")
            if t is not None:
                done.append(t)
            nxt += interval
            time.sleep(max(0.0, nxt - time.monotonic()))  # pacing the commits
        end = time.monotonic()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with reader.lock:
                if reader.counts and reader.counts[-1][1] >= base + len(done):
                    break
            time.sleep(0.05)
        with reader.lock:
            reader.recording = False
            counts, intervals = list(reader.counts), list(reader.intervals)
        out["load1_end"] = round(os.getloadavg()[0], 2)
        # the times the count changed (first read showing each new value) while the commits went on
        changes: list[tuple[float, int]] = []
        for t, c in counts:
            if not changes or c != changes[-1][1]:
                changes.append((t, c))
        shown = [t for t, c in changes if c > base and t <= end + 1.0]
        gaps = [(b - x) * 1000 for x, b in zip(shown, shown[1:])]
        # when the longest began, in seconds after the first commit, and how much of each was the
        # console's: from the first commit the writer had finished in it to the screen showing one
        # (the rest the writer took to commit at all — on a loaded machine its fsync or its turn)
        count_at = dict(changes)

        def held(x: float, b: float) -> float:
            k = count_at[x] - base  # commits shown at x; done[k] is the next one
            first = done[k] if k < len(done) else b
            return max(0.0, b - max(x, first)) * 1000

        at = sorted(((b - x) * 1000, x - commits_t0, held(x, b)) for x, b in zip(shown, shown[1:]))[-5:]
        lat, lat_loading = [], []
        whole = reader.graph_whole if reader.graph_whole is not None else end
        shown_at = reader.graph_shown if reader.graph_shown is not None else commits_t0
        for k, t_done in enumerate(done):
            seen = next((t for t, c in changes if c >= base + k + 1), None)
            if seen is not None:
                lat.append((seen - t_done) * 1000)
                if shown_at <= t_done < whole:
                    lat_loading.append((seen - t_done) * 1000)
        held_loading = [held(x, b) for x, b in zip(shown, shown[1:]) if shown_at <= x < whole]
        out.update({
            "commits": len(done), "screen_changes": len(shown),
            "gap_max_ms": round(max(gaps), 1) if gaps else None,
            "gaps_over_300ms": sum(g > 300 for g in gaps),
            "gaps_top5_ms_at_s": [(round(g, 1), round(t, 1)) for g, t, _ in at],
            # of each of those, the part the console held a finished commit unshown
            "gaps_top5_console_ms": [round(h, 1) for _, _, h in at],
            "console_held_max_ms": round(max((held(x, b) for x, b in zip(shown, shown[1:])), default=0.0), 1),
            "commit_to_screen_ms": {"n": len(lat), "p50": round(pct(lat, .5), 1), "p95": round(pct(lat, .95), 1),
                                    "max": round(max(lat), 1) if lat else None},
            # while the graph was loading (--open-during: the commits from the screen showing its
            # first rows to the screen showing it whole)
            "graph_shown_s": round(shown_at - commits_t0, 2), "graph_whole_s": round(whole - commits_t0, 2),
            "loading": {"commits": len(lat_loading), "p50_ms": round(pct(lat_loading, .5), 1),
                        "p95_ms": round(pct(lat_loading, .95), 1),
                        "max_ms": round(max(lat_loading), 1) if lat_loading else None,
                        "console_held_max_ms": round(max(held_loading, default=0.0), 1)},
            "read_interval_ms": {"p50": round(pct(intervals, .5) * 1000, 1),
                                 "p99": round(pct(intervals, .99) * 1000, 1),
                                 "max": round(max(intervals) * 1000, 1) if intervals else None},
        })
    finally:
        for p in burn:
            p.kill()
            p.wait()
        if writer is not None:
            writer.close()
        reader.stop.set()
        reader.join(5)
        subprocess.run(tmux.base + ["send-keys", "-t", "b", "q"], capture_output=True)  # quit, then the server goes
        tmux.close()
        shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledger", help="a ledger bench_console.py built (copied, never changed)")
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--task", default="big")
    ap.add_argument("--rate", type=float, default=10.0, help="commits a second (default 10: every 100 ms)")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--quiet", type=float, default=2.0, help="seconds between the claims and the first commit")
    ap.add_argument("--open-during", action="store_true",
                    help="open the graph as the commits start (default: open it, wait until it is complete, then commit)")
    ap.add_argument("--cols", type=int, default=100)
    ap.add_argument("--rows", type=int, default=30)
    ap.add_argument("--burn", type=int, default=0, help="busy loops run beside the console (a loaded machine)")
    ap.add_argument("--trace", help="run the console under tests/bench/console_trace.py, its timeline to this file")
    ap.add_argument("--out", help="also write the JSON report here")
    a = ap.parse_args()
    # a TERM (a timeout, a kill of the run) ends it like ^C: the tmux server and the writer are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    result = run(a)
    text = json.dumps(result, indent=2)
    if a.out:
        Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
