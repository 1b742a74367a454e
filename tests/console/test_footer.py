"""The key hints fit the terminal: at 80 columns no hint is cut mid-word (Textual's footer cuts the
last one it has no room for); the compact style first, then the last hints left out, `?` kept."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Footer
from tests.support.console_app import build_ledger, graph_loaded, make_app, settle, wait_for


def hints(app) -> tuple[list[tuple[str, int, int]], int, int]:
    """The footer's hints on screen ((text, first column, column after it), the palette key's first
    column, the footer's width)."""
    footer = app.screen.query_one(Footer)
    keys, palette = [], footer.region.right
    for w in footer.children:
        if w.has_class("-command-palette"):
            palette = w.region.x
        elif getattr(w, "action", None) is not None and w.region.width:
            keys.append((str(w.render()).strip(), w.region.x, w.region.right))
    return keys, palette, footer.region.right


def assert_fits(app, *words: str) -> None:
    keys, palette, right = hints(app)
    assert keys and all(end <= palette <= right for _, _, end in keys), (keys, palette)
    text = " ".join(k for k, _, _ in keys)
    for word in ("? Help", *words):
        assert word in text, (word, text)


async def test_the_hints_fit_80_columns_on_every_kind_of_screen(tmp_path: Path):
    a = str(build_ledger(tmp_path / "a.db"))
    b = str(build_ledger(tmp_path / "b.db"))
    app = make_app(a, ledger_name="a", more=[("b", b)], analysis=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: all(s.loaded for s in app.every_side()), what="both ledgers")
        await settle(pilot)
        assert_fits(app, "Open", "Ledger")
        await pilot.press("enter")
        await graph_loaded(pilot)
        await settle(pilot)
        assert_fits(app)
        await pilot.resize_terminal(160, 24)  # wide: every hint in the usual style
        await settle(pilot)
        footer = app.screen.query_one(Footer)
        await wait_for(pilot, lambda: not footer.compact, what="the usual style when there is room")
        assert_fits(app, "Runs")


async def test_one_ledger_task_list_at_80_columns(tmp_path: Path):
    app = make_app(str(build_ledger(tmp_path / "a.db")), analysis=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert_fits(app, "Open", "Filter", "Sort")
