"""``warden demo``: simulated agents on a throw-away ledger, and the console.

- ``runner``: :func:`run_demo` and the supervised worker processes (:class:`WorkerPool`);
- ``world``: the simulated world (timings, roster, modules, seeded faults);
- ``agent``: :class:`DemoAgent`, one simulated agent on the store's public agent API;
- ``simulation``: the agents in-process on a ManualClock (deterministic, no real time);
- ``layout``: the demo's ledger and run directories on disk (:func:`create_demo`,
  :func:`build_demo_ledger`);
- ``worker``: one agent as a process, ``python -m console.demo.worker``.

The agents are agent processes, not console code: they import the store's public API and this
package only (never Textual, never the rest of the console).
"""

from .agent import DemoAgent, SimulatedCrash
from .layout import DemoPaths, build_demo_ledger, create_demo, create_tasks, ledger_is_quiet, make_runs
from .runner import WorkerPool, run_demo
from .simulation import Simulation
from .world import CRASH_EXIT, HISTORY_TASKS, LIVE_TASKS, LOOP_CAP, ROSTER, maint_simulation

__all__ = [
    "CRASH_EXIT", "DemoAgent", "DemoPaths", "HISTORY_TASKS", "LIVE_TASKS", "LOOP_CAP", "ROSTER", "SimulatedCrash",
    "Simulation", "WorkerPool", "build_demo_ledger", "create_demo", "create_tasks", "ledger_is_quiet", "make_runs",
    "maint_simulation", "run_demo",
]
