"""An operator's confirmations on a busy task: the share applied on the first try.

    python tests/bench/bench_control.py                          # both backends, the default loads
    python tests/bench/bench_control.py --backend sqlite --rounds 5 --loads 3x10

Per backend and per load (``AxR``: A agent processes, tests/support/step_agent.py, each writing
R steps a second — claim, 1 to 3 heartbeats, commit — through the store's agent API), rounds of:

1. a fresh task of 600 nodes in 100 chains of 6 (each chain's nodes name a precondition
   ``part``), which the agents start on (the bench waits until they are all at work on it and
   some nodes finished);
2. the operator plans the action, as the console's dialog does (``Ledger.plan``): park (with
   ``now`` every other round), abort, narrow (``--exclude`` a running, a pending and a finished
   node, or ``--set part=[…]`` dropping a part in progress, in turn), rewind (a finished node
   with work below it, or a running one, in turn);
3. a person reads it: 2 to 10 s (uniform, ``--read``);
4. ``ledger.apply``; refused as stale, the fresh plan is read again and applied again, up to
   ``--tries`` times in all (the dialog's loop);
5. what the result says is checked against what the ledger then holds: each node the result
   changed carries its version + 1 and the status the result gave it (or a later version: an
   agent moved it since), a parked task had nothing claimed after the park, an aborted one has
   nothing unfinished, every node a narrow put out of scope is abandoned, a rewound node carries
   the reason among its rejections;
6. the task is aborted (cleanup; not counted), so the agents move to the next round's task.

Then the one-shot CLI under the same agents: ``python -m console park|abort|narrow|rewind … --yes
--json`` on a fresh busy task, ``--cli-rounds`` times each, its exit status and result checked the
same way. Reported per backend, load and action: confirmations, applied on the first try, applied
within ``--tries``, refusals (by reason), results that did not match the ledger, applies whose
result said something differed, the apply's time (p50/p95). ``/proc/loadavg`` before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from store import Ledger, NodeSpec, StaleRevision  # noqa: E402
from store.actions import Plan  # noqa: E402
from tests.support import step_agent  # noqa: E402

ACTIONS = ("park", "abort", "narrow", "rewind")
CHAINS, LENGTH, PARTS = 100, 6, 10
OPERATOR = "bench-operator"
UNFINISHED = ("pending", "running", "blocked", "parked", "failed")


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def wait_until(cond, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_control: timed out waiting until {what}")
        time.sleep(0.05)


# ---------------------------------------------------------------------- the ledger and its agents
class Backend:
    """A fresh ledger on one backend (PostgreSQL: a database of its own on ``--pg-url``, dropped after)."""

    def __init__(self, kind: str, work: Path, pg_url: str) -> None:
        self.kind, self.dbname, self.admin_url = kind, None, pg_url
        if kind == "sqlite":
            self.target = str(work / f"control-{uuid.uuid4().hex[:6]}.db")
        else:
            import psycopg

            if not pg_url:
                raise SystemExit("bench_control: PostgreSQL needs --pg-url (or WARDEN_TEST_PG_URL)")
            self.dbname = "warden_control_" + uuid.uuid4().hex[:10]
            with psycopg.connect(pg_url, autocommit=True) as c:
                c.execute(f'CREATE DATABASE "{self.dbname}"')
            self.target = f"{pg_url.split('?', 1)[0].rsplit('/', 1)[0]}/{self.dbname}"
        Ledger.open(self.target).close()

    def drop(self) -> None:
        if self.dbname:
            import psycopg

            with psycopg.connect(self.admin_url, autocommit=True) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')


class Agents:
    """``count`` agent processes at ``rate`` steps a second, on whatever task is active."""

    def __init__(self, target: str, count: int, rate: float, work: Path, seed: int) -> None:
        self.stop = work / f"stop-{uuid.uuid4().hex[:6]}"
        self.procs = [subprocess.Popen(step_agent.command(target, f"agent-{i}", str(self.stop), rate=rate,
                                                          seed=seed + i),
                                       stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
                      for i in range(count)]
        for p in self.procs:
            assert p.stdout is not None and p.stdout.readline().strip() == b"ready"

    def close(self) -> list[dict]:
        self.stop.touch()
        out = []
        for p in self.procs:
            try:
                stdout, _ = p.communicate(timeout=60)
                out.append(json.loads(stdout.decode().strip().splitlines()[-1]))
            except (subprocess.TimeoutExpired, ValueError, IndexError):
                p.kill()
                p.wait()
        return out


def busy_task(led: Ledger, task: str, agents: int) -> None:
    """A fresh task the agents are all at work on, with some nodes finished."""
    led.create_task(task, title="agents at work", preconditions={"part": list(range(PARTS))})
    specs = []
    for c in range(CHAINS):
        for j in range(LENGTH):
            specs.append(NodeSpec(f"c{c:03d}-{j}", "step", (f"c{c:03d}-{j - 1}",) if j else (),
                                  preconditions={"part": c % PARTS}))
    led.add_nodes(task, specs)

    def at_work() -> bool:
        counts = Counter(n.status for n in led.graph(task).nodes)
        return counts["running"] >= agents and counts["succeeded"] >= 3
    wait_until(at_work, f"the agents at work on {task}")


# ---------------------------------------------------------------------- the operator's plans
def plan_for(led: Ledger, action: str, task: str, i: int, rng: random.Random) -> Plan:
    """The action's plan, as the dialog computes it (``Ledger.plan``), on the task as it is now."""
    nodes = led.graph(task).nodes
    by = {s: [n for n in nodes if n.status == s] for s in ("running", "pending", "succeeded")}
    reason = f"bench round {i}"
    if action == "park":
        return led.plan("park", {"task_id": task, "reason": reason, "now": i % 2 == 1})
    if action == "abort":
        return led.plan("abort", {"task_id": task, "reason": reason})
    if action == "narrow":
        if i % 2:
            part = int(rng.choice(by["running"]).key[1:4]) % PARTS
            return led.plan("narrow", {"task_id": task, "reason": reason,
                                       "set": {"part": [p for p in range(PARTS) if p != part]}})
        pick = [rng.choice(by[s]).key for s in ("running", "pending", "succeeded")]
        return led.plan("narrow", {"task_id": task, "reason": reason, "exclude": pick})
    with_work_below = [n for n in by["succeeded"] if not n.key.endswith(f"-{LENGTH - 1}")]
    target = rng.choice(by["running"] if i % 2 or not with_work_below else with_work_below)
    return led.plan("rewind", {"task_id": task, "node": target.key, "reason": reason})


def mismatches(led: Ledger, done: Plan) -> list[str]:
    """Where what the result says and what the ledger holds right after disagree."""
    task = done.task_id
    g = {n.key: n for n in led.graph(task).nodes}
    out = []
    for k, (_a, b) in done.changes.items():
        v0 = done.versions.get(k)
        n = g.get(k)
        if v0 is None or n is None:
            out.append(f"{k}: changed without a version in the result")
        elif n.version == v0 + 1 and n.status != b:
            out.append(f"{k}: the result says {b}, the ledger holds {n.status}")
        elif n.version <= v0:
            out.append(f"{k}: the result changed it but its version did not move")
    status = led.task(task).status
    if done.action == "park":
        events = led.events(0, task_id=task, limit=100_000)
        at = next((e.id for e in events if e.kind == "operator.park" and e.payload.get("action_id") == done.action_id),
                  None)
        if status != "parked":
            out.append(f"task {status} after a park")
        if at is None or any(e.kind == "node.claimed" and e.id > at for e in events):
            out.append("a node was claimed after the park")
    elif done.action == "abort":
        left = [k for k, n in g.items() if n.status in UNFINISHED and n.kind != "compensation"]
        if status != "aborted" or left:
            out.append(f"task {status}, {len(left)} unfinished node(s) after an abort")
    elif done.action == "narrow":
        for k in done.params.to_json()["out_of_scope"]:
            if g[k].status != "abandoned":
                out.append(f"{k}: out of scope, {g[k].status}")
    elif done.action == "rewind":
        target = g[done.target]
        if done.reason not in target.rejections:
            out.append(f"{done.target}: the rewind's reason is not among its rejections")
    return out


def cleanup(led: Ledger, task: str) -> None:
    """The round's task out of the agents' way (not measured)."""
    for _ in range(10):
        if led.task(task).status == "aborted":
            return
        try:
            led.apply(led.plan_abort(task, reason="bench: next round"), operator="bench-cleanup")
        except StaleRevision:
            continue


# ---------------------------------------------------------------------- one load
def dialog_rounds(led: Ledger, a: argparse.Namespace, agents: int, tag: str, rng: random.Random) -> dict:
    out: dict[str, dict] = {}
    for action in ACTIONS:
        tries_used, refusals, wrong, differed, apply_s = [], Counter(), [], 0, []
        for i in range(a.rounds):
            task = f"{tag}-{action}-{i}"
            busy_task(led, task, agents)
            plan = plan_for(led, action, task, i, rng)
            done = None
            for attempt in range(1, a.tries + 1):
                time.sleep(rng.uniform(*a.read))  # a person reads the preview
                t = time.perf_counter()
                try:
                    done = led.apply(plan, operator=OPERATOR)
                    apply_s.append(time.perf_counter() - t)
                    tries_used.append(attempt)
                    break
                except StaleRevision as e:
                    refusals[str(e).split(" at ")[0][:90]] += 1
                    plan = _again(led, plan)  # the dialog shows the fresh plan of the same choices
            if done is None:
                tries_used.append(0)
            else:
                differed += bool(done.differed)
                wrong += [f"{task}: {m}" for m in mismatches(led, done)]
            cleanup(led, task)
        out[action] = {"confirmations": a.rounds, "first_try": tries_used.count(1),
                       "applied": sum(1 for t in tries_used if t), "tries": tries_used,
                       "refused": dict(refusals), "mismatches": wrong, "differed": differed,
                       "apply_p50_ms": round(statistics.median(apply_s) * 1000, 1) if apply_s else None,
                       "apply_p95_ms": round(pct(apply_s, 95) * 1000, 1) if apply_s else None}
    return out


def _again(led: Ledger, plan: Plan) -> Plan:
    """The same action planned again with the same choices (what the dialog does after a refusal)."""
    p = plan.params.to_json()
    args: dict[str, object] = {"task_id": plan.task_id, "reason": plan.reason}
    if plan.action == "park":
        args["now"] = p["now"]
    elif plan.action == "narrow":
        args.update({k: p[k] for k in ("set", "exclude") if p[k]})
    elif plan.action == "rewind":
        args["node"] = plan.target
    return led.plan(plan.action, args)


def cli_rounds(led: Ledger, target: str, a: argparse.Namespace, agents: int, tag: str, rng: random.Random) -> dict:
    out: dict[str, dict] = {}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for action in ACTIONS:
        ok, wrong, failures, walls = 0, [], Counter(), []
        for i in range(a.cli_rounds):
            task = f"{tag}-cli-{action}-{i}"
            busy_task(led, task, agents)
            args = _cli_args(plan_for(led, action, task, i, rng))
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "console", *args, "--yes", "--json", "--ledger", target,
                                "--operator", OPERATOR], capture_output=True, text=True, env=env, cwd=ROOT)
            walls.append(time.perf_counter() - t)
            if r.returncode == 0:
                ok += 1
                applied = led.actions(task, limit=1)[0]
                result = json.loads(r.stdout)
                if applied.id != result["action_id"]:
                    wrong.append(f"{task}: the result's action is not the ledger's last")
                wrong += [f"{task}: {m}" for m in _cli_mismatches(led, task, result)]
            else:
                failures[(r.stderr.strip().splitlines() or ["?"])[-1][:90]] += 1
            cleanup(led, task)
        out[action] = {"runs": a.cli_rounds, "applied": ok, "failures": dict(failures), "mismatches": wrong,
                       "wall_p50_s": round(statistics.median(walls), 2) if walls else None}
    return out


def _cli_args(plan: Plan) -> list[str]:
    """The ``warden`` command line for the same action as ``plan`` (its arguments, not its result)."""
    p = plan.params.to_json()
    if plan.action == "park":
        return ["park", plan.task_id, "--reason", plan.reason] + (["--now"] if p["now"] else [])
    if plan.action == "abort":
        return ["abort", plan.task_id, "--reason", plan.reason]
    if plan.action == "narrow":
        if p["set"]:
            return ["narrow", plan.task_id, "--reason", plan.reason, "--set", f"part={json.dumps(p['set']['part'])}"]
        return ["narrow", plan.task_id, "--reason", plan.reason, "--exclude", *p["exclude"]]
    return ["rewind", plan.task_id, plan.target, "--reason", plan.reason]


def _cli_mismatches(led: Ledger, task: str, result: dict) -> list[str]:
    """The CLI's JSON result checked like an applied Plan (its changes against node versions)."""
    g = {n.key: n for n in led.graph(task).nodes}
    out = []
    for k, ch in result["changes"].items():
        v0, n = result["versions"].get(k), g.get(k)
        if v0 is None or n is None:
            out.append(f"{k}: changed without a version in the result")
        elif n.version == v0 + 1 and n.status != ch["to"]:
            out.append(f"{k}: the result says {ch['to']}, the ledger holds {n.status}")
        elif n.version <= v0:
            out.append(f"{k}: the result changed it but its version did not move")
    return out


def run(a: argparse.Namespace) -> dict:
    rng = random.Random(a.seed)
    report: dict = {"loadavg_before": loadavg(), "read_s": a.read, "tries": a.tries, "results": {}}
    with tempfile.TemporaryDirectory(prefix="bench-control-") as d:
        work = Path(d)
        for kind in a.backend:
            for load in a.loads:
                count, rate = (int(x) for x in load.split("x"))
                b = Backend(kind, work, a.pg_url)
                agents = None
                try:
                    with Ledger.open(b.target, create=False) as led:
                        agents = Agents(b.target, count, rate, work, rng.randrange(1 << 20))
                        tag = f"{kind[:2]}{count}x{rate}"
                        t0 = time.monotonic()
                        res = {"dialog": dialog_rounds(led, a, count, tag, rng)}
                        if a.cli_rounds:
                            res["cli"] = cli_rounds(led, b.target, a, count, tag, rng)
                        res["agents"] = agents.close()
                        agents = None
                        res["minutes"] = round((time.monotonic() - t0) / 60, 1)
                    report["results"][f"{kind} {load}"] = res
                    print(json.dumps({f"{kind} {load}": _brief(res)}), flush=True)
                finally:
                    if agents is not None:
                        agents.close()
                    b.drop()
    report["loadavg_after"] = loadavg()
    return report


def _brief(res: dict) -> dict:
    out = {a: f"{r['first_try']}/{r['confirmations']} first try, {r['applied']} applied, "
              f"{len(r['mismatches'])} mismatches, {r['differed']} differed" for a, r in res["dialog"].items()}
    for a, r in res.get("cli", {}).items():
        out[f"cli {a}"] = f"{r['applied']}/{r['runs']} applied, {len(r['mismatches'])} mismatches"
    return out


def table(report: dict) -> str:
    lines = [f"load average before {report['loadavg_before']}, after {report['loadavg_after']}; "
             f"reading {report['read_s'][0]:g}-{report['read_s'][1]:g} s, up to {report['tries']} tries", "",
             "| backend, agents×steps/s | action | first try | applied | results ≠ ledger | said what differed "
             "| apply p50/p95 ms | CLI --yes applied |",
             "|---|---|---|---|---|---|---|---|"]
    totals: dict[str, list[int]] = {}
    for where, res in report["results"].items():
        for action, r in res["dialog"].items():
            cli = res.get("cli", {}).get(action)
            lines.append(f"| {where} | {action} | {r['first_try']}/{r['confirmations']} | {r['applied']} | "
                         f"{len(r['mismatches'])} | {r['differed']} | {r['apply_p50_ms']}/{r['apply_p95_ms']} | "
                         + (f"{cli['applied']}/{cli['runs']} |" if cli else "— |"))
            t = totals.setdefault(action, [0, 0, 0, 0])
            t[0] += r["first_try"]
            t[1] += r["confirmations"]
            t[2] += cli["applied"] if cli else 0
            t[3] += cli["runs"] if cli else 0
    lines.append("")
    for action, (first, n, cli_ok, cli_n) in totals.items():
        lines.append(f"{action}: {first}/{n} = {100 * first / max(n, 1):.1f} % on the first try"
                     + (f"; CLI {cli_ok}/{cli_n}" if cli_n else ""))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", type=lambda s: s.split(","), default=["sqlite", "postgres"])
    ap.add_argument("--loads", type=lambda s: s.split(","), default=["3x1", "3x10", "10x1", "10x10"],
                    help="agents×steps per second each, comma-separated (default 3x1,3x10,10x1,10x10)")
    ap.add_argument("--rounds", type=int, default=10, help="confirmations per action and load (default 10)")
    ap.add_argument("--cli-rounds", type=int, default=3, help="one-shot CLI runs per action and load (default 3)")
    ap.add_argument("--read", type=lambda s: tuple(float(x) for x in s.split(",")), default=(2.0, 10.0),
                    help="a person's reading time, min,max seconds (default 2,10)")
    ap.add_argument("--tries", type=int, default=10, help="ctrl+s presses before giving up (default 10)")
    ap.add_argument("--pg-url", default=os.environ.get("WARDEN_TEST_PG_URL", ""))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the whole report here")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # killed: the agents stop, the database is dropped
    report = run(a)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    print(table(report))


if __name__ == "__main__":
    main()
