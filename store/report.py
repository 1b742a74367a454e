"""Public import path of the CLI's JSON shapes (``store.report.graph_json``): agents and outside checks import it from here; the
module itself is :mod:`store.reading.cli_json`."""

from store.reading.cli_json import *  # noqa: F401,F403
