"""A corpus of agent traces written blind (see README.md): families of healthy work and of loops.

``HEALTHY`` and ``LOOPS`` map a family's name to a ``Family``: ``(random.Random, actions: bool) -> Script``,
a fresh trace per call. ``run_blind`` (``tests.support.blind.runner``) runs them through the harness.
"""

from . import assist, browsing, ci, coding, coding_loops, data, ops, research  # noqa: F401  (each registers its families)
from .trace import HEALTHY, LOOPS, Family

__all__ = ["HEALTHY", "LOOPS", "Family"]
