"""bench_fleet.py ``--capacity``: where one ledger stops (docs/deployment.md, "How far one ledger goes").

No console: agent processes (tests/support/fleet.py) writing as fast as they can — no pacing — for
``--step`` seconds at each of ``--capacity-agents`` (1 2 4 8 16 by default), on the ledger of the
fleet benchmark. Per step: the writes a second the ledger took (every agent write: claims,
heartbeats, commits, failures, handoffs; counted between 1 s after the start and 1 s before the
end), node commits a second, the time of one write call (p50/p95/max, per agent: the gaps between
its writes), claim calls (p50/p95/max), and on PostgreSQL the server's own count of committed
transactions and its backends. At the end: every table's size on disk and row count, so the
bytes a node, an event, an observation costs can be extrapolated.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.support import fleet


def _pct(v: list[float], q: float) -> float:
    if not v:
        return float("nan")
    v = sorted(v)
    return round(v[min(len(v) - 1, int(q * len(v)))], 2)


def step(target: str, n: int, seconds: float, tasks: int, work: Path, seed: int, backend) -> dict:
    outs = [work / f"cap-{n}-{i}.json" for i in range(n)]
    procs = list(zip(fleet.start([fleet.command(target, i, tasks=tasks, rate=1e9, until_wall=0, out=str(o),
                                                seed=seed + n) for i, o in enumerate(outs)], seconds), outs))
    t0 = time.monotonic()
    server0 = backend.server_stats()
    conns = 0
    while any(p.poll() is None for p, _ in procs):
        conns = max(conns, backend.connections().get("warden-agent", 0))
        time.sleep(0.5)  # sampling the server while the agents run
    server1 = backend.server_stats()
    wall = time.monotonic() - t0
    writes: list[float] = []
    commits: list[float] = []
    gaps: list[float] = []
    claim_ms: list[float] = []
    errors: dict[str, int] = {}
    for p, out in procs:
        got = json.loads(out.read_text())
        ts = [w[4] for w in got["writes"]]
        writes += ts
        commits += [w[4] for w in got["writes"] if w[0] == "committed"]
        gaps += [(b - a) * 1000 for a, b in zip(ts, ts[1:])]
        claim_ms += [s * 1000 for s in got["claim_s"]]
        for k, v in got["errors"].items():
            errors[k] = errors.get(k, 0) + v
    lo, hi = min(writes) + 1.0, max(writes) - 1.0
    span = max(hi - lo, 1e-9)
    out = {"agents": n, "writes_per_s": round(sum(1 for t in writes if lo <= t <= hi) / span, 1),
           "node_commits_per_s": round(sum(1 for t in commits if lo <= t <= hi) / span, 1),
           "write_ms": {"p50": _pct(gaps, .5), "p95": _pct(gaps, .95), "max": _pct(gaps, 1.0)},
           "claim_ms": {"p50": _pct(claim_ms, .5), "p95": _pct(claim_ms, .95), "max": _pct(claim_ms, 1.0)},
           "errors": errors, "load1": round(os.getloadavg()[0], 2)}
    if server0 and server1:
        out["server_commits_per_s"] = round((server1["xact_commit"] - server0["xact_commit"]) / wall, 1)
        out["agent_connections_max"] = conns
    return out


def capacity(a, backend, work: Path) -> dict:
    t0 = time.monotonic()
    fleet.build(backend.target, a.tasks, a.seed, (a.min_nodes, a.max_nodes))
    result: dict = {"build_s": round(time.monotonic() - t0, 1), "steps": []}
    for n in a.capacity_agents:
        result["steps"].append(step(backend.target, n, a.step, a.tasks, work, a.seed, backend))
        print(json.dumps(result["steps"][-1]), flush=True)
    result["tables"] = backend.table_sizes()
    return result


def table(r: dict) -> str:
    lines = [f"{'agents':>6}  {'writes/s':>9}  {'commits/s':>9}  {'server tx/s':>11}  {'write p50/p95/max ms':>22}"
             f"  {'claim p50/p95/max ms':>22}  load1"]
    for s in r["steps"]:
        w, c = s["write_ms"], s["claim_ms"]
        lines.append(f"{s['agents']:>6}  {s['writes_per_s']:>9}  {s['node_commits_per_s']:>9}  "
                     f"{s.get('server_commits_per_s', '—'):>11}  {w['p50']:>6} / {w['p95']:>6} / {w['max']:>6}"
                     f"  {c['p50']:>6} / {c['p95']:>6} / {c['max']:>6}  {s['load1']}")
    lines.append("tables (rows, bytes on disk, bytes a row):")
    for name, t in sorted(r.get("tables", {}).items(), key=lambda kv: -kv[1]["bytes"]):
        per = round(t["bytes"] / t["rows"]) if t["rows"] else "—"
        lines.append(f"  {name:16} {t['rows']:>10} rows  {t['bytes'] / 1e6:>9.1f} MB  {per} B/row")
    return "\n".join(lines)


__all__ = ["capacity", "table"]
