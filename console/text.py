"""Agent text made safe for the console: the names the console imports, from ``store/text.py``.

There is one sanitiser (``store.text``; its docstring states the rules). The console renders
its result as ``rich.text.Text`` / ``Content`` (or with ``markup=False``), never inside a markup
string, so markup in agent text stays literal.
"""

from __future__ import annotations

from store.text import safe, safe_line

__all__ = ["safe", "safe_line"]
