"""Run every blind family × form × trial through the stall harness and count, per family, what it raised.

* a **healthy** family: the share of trials with any stall alarm (``tests.support.stalls.STALL_ALARMS``);
* a **loop** family: the share caught within ``Script.within`` loop observations, and the share with
  an alarm before the loop started.

Each trial draws from its own ``random.Random`` seeded by (seed, family, form, trial), so a family's
traces do not depend on which other families run. ``python -m tests.support.blind.runner --trials 40``
prints the table.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field

from store import Ledger, ManualClock

from ..stalls import Outcome, run_script
from .trace import HEALTHY, LOOPS, Family

FORMS = ("action", "plain")


@dataclass
class FamilyFigures:
    name: str
    loop: bool
    form: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def trials(self) -> int:
        return len(self.outcomes)

    @property
    def alarmed(self) -> int:
        """Healthy: trials with any stall alarm. Loops: trials with an alarm before the loop."""
        return sum(1 for o in self.outcomes if o.early_alarms)

    @property
    def caught(self) -> int:
        """Loops: trials alarmed within their deadline (``within`` loop observations)."""
        return sum(1 for o in self.outcomes if o.caught())

    @property
    def firsts(self) -> list[int]:
        return sorted(o.first_alarm for o in self.outcomes if o.first_alarm is not None)

    def share(self, k: int) -> float:
        return k / self.trials if self.trials else 0.0

    def row(self) -> str:
        kinds = ",".join(sorted(set().union(*(o.kinds for o in self.outcomes)))) or "-"
        if not self.loop:
            return f"| {self.name} | {self.form} | {self.trials} | {self.share(self.alarmed):.0%} | | | {kinds} |"
        f = self.firsts
        med = f[len(f) // 2] if f else "-"
        return (f"| {self.name} | {self.form} | {self.trials} | {self.share(self.alarmed):.0%} | "
                f"{self.share(self.caught):.0%} | {med} | {kinds} |")


@dataclass
class BlindReport:
    figures: list[FamilyFigures]
    seconds: float  # wall clock
    cpu_seconds: float = 0.0  # this process's CPU time (the figure to compare on a loaded machine)

    @property
    def trials(self) -> int:
        return sum(f.trials for f in self.figures)

    def per_trial_ms(self, cpu: bool = False) -> float:
        return 1000 * (self.cpu_seconds if cpu else self.seconds) / max(1, self.trials)

    def table(self) -> str:
        head = ("| family | form | trials | alarmed (healthy) / before the loop | caught within deadline | "
                "median first alarm (loop obs) | kinds |\n|---|---|---|---|---|---|---|")
        return "\n".join([head] + [f.row() for f in self.figures])


Corpus = tuple[dict[str, Family], dict[str, Family]]  # (healthy families, loop families)


def families(only: tuple[str, ...] = (), corpus: Corpus | None = None) -> list[tuple[str, bool, Family]]:
    healthy, loops = corpus or (HEALTHY, LOOPS)
    fams = [(n, False, f) for n, f in healthy.items()] + [(n, True, f) for n, f in loops.items()]
    return [x for x in fams if not only or x[0] in only]


def run_blind(path: str, *, trials: int, seed: int, forms: tuple[str, ...] = FORMS,
              only: tuple[str, ...] = (), corpus: Corpus | None = None) -> BlindReport:
    """``trials`` of every family (``only``: these names) in each of ``forms`` on a fresh ledger at ``path``.

    ``corpus``: another corpus's (healthy, loop) registries; this one's by default."""
    if os.path.exists(path):
        raise FileExistsError(path)
    bad = set(forms) - set(FORMS)
    if bad:
        raise ValueError(f"unknown forms {sorted(bad)}: use {FORMS}")
    clock = ManualClock()
    figures: list[FamilyFigures] = []
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    with Ledger.open(path, clock=clock) as ledger:
        ledger.db.execute_sql("PRAGMA synchronous=OFF")  # a throw-away ledger
        for name, loop, make in families(only, corpus):
            for form in forms:
                fig = FamilyFigures(name, loop, form)
                for i in range(trials):
                    script = make(random.Random(f"{seed}:{name}:{form}:{i}"), form == "action")
                    fig.outcomes.append(run_script(ledger, clock, f"b{n:05d}", name, script))
                    n += 1
                    clock.advance(3600)
                figures.append(fig)
    return BlindReport(figures, time.perf_counter() - t0, time.process_time() - c0)


def main(argv: list[str] | None = None, corpus: Corpus | None = None) -> int:
    ap = argparse.ArgumentParser(description="run the blind corpus through the stall signals")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--forms", default=",".join(FORMS))
    ap.add_argument("--only", default="", help="comma-separated family names")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        rep = run_blind(os.path.join(d, "blind.db"), trials=a.trials, seed=a.seed, forms=tuple(a.forms.split(",")),
                        only=tuple(x for x in a.only.split(",") if x), corpus=corpus)
    print(rep.table())
    print(f"\n{rep.trials} trials in {rep.seconds:.1f} s wall, {rep.cpu_seconds:.1f} s CPU "
          f"({rep.per_trial_ms():.0f} ms wall, {rep.per_trial_ms(cpu=True):.0f} ms CPU per trial)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
