"""A second corpus of agent traces written blind (see README.md): other domains, other habits.

``HEALTHY2`` and ``LOOPS2`` map a family's name to a ``Family``: ``(random.Random, actions: bool) -> Script``,
a fresh trace per call. ``python -m tests.support.blind2.runner`` runs them through the stall harness.
"""

from . import apps, data, ops, people  # noqa: F401  (each registers its families)
from .base import HEALTHY2, LOOPS2

__all__ = ["HEALTHY2", "LOOPS2"]
