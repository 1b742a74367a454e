"""Agent text made safe for the console: the names the console imports, from ``store/text.py``.

There is one sanitiser (``store.text``; its docstring states the rules). The console renders
its result as ``rich.text.Text`` / ``Content`` (or with ``markup=False``), never inside a markup
string, so markup in agent text stays literal. Textual parses a plain ``str`` as markup in
several places — ``Button`` labels (``Button("[/]")`` raises ``MarkupError``), ``notify`` unless
``markup=False``, option prompts, the command palette's entries and help — so those get
:func:`literal`: a ``Content`` of the escaped text, which Textual never parses.
"""

from __future__ import annotations

from textual.content import Content

from store.text import safe, safe_line


def literal(value: object, *, limit: int | None = None, multi_line: bool = False) -> Content:
    """``value`` as literal ``Content`` (never parsed as markup), control characters escaped."""
    return Content(safe(value, limit=limit) if multi_line else safe_line(value, limit=limit))


__all__ = ["literal", "safe", "safe_line"]
