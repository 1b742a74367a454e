"""Public import path of the estimates (``store.estimates.estimate_task``): agents and outside checks import it from here; the
module itself is :mod:`store.estimation.estimates`."""

from store.estimation.estimates import *  # noqa: F401,F403
