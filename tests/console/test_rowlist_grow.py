"""Rows appended to a list (a big graph streaming in) move its scrollbar only: no layout of the
screen (which repainted the whole list each page), and the list scrolls to every row that came."""

from __future__ import annotations

from textual.app import App, ComposeResult

from console.model import GRAPH_COLUMNS
from console.widgets.rowlist import RowList


class Source:
    def __init__(self, count: int) -> None:
        self.count = count

    def row_count(self) -> int:
        return self.count

    def row_cells(self, index: int):
        return [(f"n{index:06d}", "")] + [("", "")] * (len(GRAPH_COLUMNS) - 1)


class Harness(App):
    def __init__(self, source: Source) -> None:
        super().__init__()
        self.source = source

    def compose(self) -> ComposeResult:
        yield RowList(self.source, GRAPH_COLUMNS, id="rows")


async def test_appended_rows_move_the_scrollbar_without_a_layout(monkeypatch):
    source = Source(300)
    app = Harness(source)
    async with app.run_test(size=(100, 30)) as pilot:
        lst = app.query_one(RowList)
        lst.reset()
        await pilot.pause()
        layouts: list[bool] = []
        real = RowList.refresh

        def refresh(self, *regions, **kwargs):
            if kwargs.get("layout"):
                layouts.append(True)
            return real(self, *regions, **kwargs)

        monkeypatch.setattr(RowList, "refresh", refresh)
        for count in (2300, 4300, 5000):  # the pages after the first
            source.count = count
            lst.grow()
            await pilot.pause()
            assert lst.vertical_scrollbar.window_virtual_size == count + 1
            assert lst.max_scroll_y >= count + 1 - lst.size.height
        assert layouts == []
        await pilot.press("end")  # the last row that came is reachable and shown
        await pilot.pause()
        assert lst.cursor == 4999
        assert 4999 in lst.visible_range()
