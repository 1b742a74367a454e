"""Public import path of the signals (``store.signals.signals_for_task``): agents and outside checks import it from here; the
module itself is :mod:`store.reading.signals`."""

from store.reading.signals import *  # noqa: F401,F403
