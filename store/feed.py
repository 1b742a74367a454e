"""Public import path of the change feed (``store.feed.Feed``): agents and outside checks import it from here; the
module itself is :mod:`store.reading.feed`."""

from store.reading.feed import *  # noqa: F401,F403
