"""Run the second blind corpus through the stall harness: ``python -m tests.support.blind2.runner --trials 20 --seed 11``.

The same runner, table and options as ``tests.support.blind.runner``, on ``HEALTHY2`` / ``LOOPS2``.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # run as a script: put the repository on sys.path
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from typing import Any  # noqa: E402

from tests.support.blind.runner import BlindReport, Corpus, main as blind_main, run_blind  # noqa: E402
from tests.support.blind2 import HEALTHY2, LOOPS2  # noqa: E402

CORPUS: Corpus = (HEALTHY2, LOOPS2)


def run_blind2(path: str, *, trials: int, seed: int, **kw: Any) -> BlindReport:
    """``run_blind`` on this corpus (``forms``, ``only`` as there)."""
    return run_blind(path, trials=trials, seed=seed, corpus=CORPUS, **kw)


def main(argv: list[str] | None = None) -> int:
    return blind_main(argv, corpus=CORPUS)


if __name__ == "__main__":
    sys.exit(main())
