"""A virtualised row list on Textual's Line API: only the rows on screen are ever rendered.

Not a DataTable: a DataTable keeps every cell of every row as renderables and re-measures on
update (183 ms per cell update at 100k rows, measured); here a row is built from its data only
when it is painted, cached as one Strip, and an update invalidates exactly that row's line.

The list is fed by a *source* (any object with ``row_count()`` and ``row_cells(i)``); cells are
``(text, style_name)`` pairs whose text is already safe (see ``console/text.py``): it is drawn
as plain segments, never parsed as markup. Columns give way by priority when the terminal is
narrow: priority 0 columns always stay (narrowed down to their ``shrink`` width when even they do
not fit); the higher the number, the earlier a column goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Iterable, Protocol, Sequence

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .covered import covered

Cell = tuple[str, str]  # (safe text, style name: one of STYLE_NAMES or "")

STYLE_NAMES = (
    "pending", "running", "blocked", "parked", "succeeded", "failed", "abandoned",
    "active", "completed", "aborted", "warn", "alarm", "dim", "key", "ok",
)


@dataclass(frozen=True)
class Column:
    name: str
    width: int
    priority: int = 0  # 0: always shown; larger numbers give way first
    flex: bool = False  # takes the space left over (at least ``width``)
    align: str = "left"
    shrink: int = 0  # may narrow down to this many cells when the columns that always stay do not fit
    room: int = 0  # grows to this many cells on a wide terminal (when the flex column keeps ROOM_SPARE more)


ROOM_SPARE = 40  # a column grows to its ``room`` only when the flex column still gets this much more


def _shrink(columns: Sequence[Column], widths: list[tuple[int, int]], over: int) -> list[tuple[int, int]]:
    """Take ``over`` cells from the columns that may shrink, the flex column first, then left to
    right, each down to its ``shrink`` width."""
    order = sorted(range(len(widths)), key=lambda n: (not columns[widths[n][0]].flex, n))
    out = list(widths)
    for n in order:
        if over <= 0:
            break
        i, w = out[n]
        floor = columns[i].shrink
        if floor and w > floor:
            take = min(over, w - floor)
            out[n] = (i, w - take)
            over -= take
    return out


#: how many rows each way from the cursor a refilter looks at for one still shown (:meth:`RowList.refilter`)
NEIGHBOURS = 500


class RowSource(Protocol):
    def row_count(self) -> int: ...

    def row_cells(self, index: int) -> Sequence[Cell]: ...


def layout(columns: Sequence[Column], width: int, gap: int = 1) -> list[tuple[int, int]]:
    """[(column index, width)] that fit ``width``: columns are taken by priority (0 first), each
    only if it still fits, so the highest numbers give way first; the flex column takes the rest."""
    order = sorted(range(len(columns)), key=lambda i: (columns[i].priority, i))
    keep: list[int] = []
    used = 0
    for i in order:
        need = columns[i].width + (gap if keep else 0)
        if columns[i].priority == 0 or used + need <= width:
            keep.append(i)
            used += need
    keep.sort()
    widths = [(i, columns[i].width) for i in keep]
    spare = width - used
    if spare < 0:  # even the columns that always stay are too wide: narrow those that may be
        widths = _shrink(columns, widths, -spare)
    growth = sum(max(0, columns[i].room - w) for i, w in widths)
    if growth and spare >= growth + ROOM_SPARE:  # wide: long keys and kinds whole, the rest to flex
        widths = [(i, max(w, columns[i].room)) for i, w in widths]
        spare -= growth
    flex = [n for n, (i, _) in enumerate(widths) if columns[i].flex]
    if spare > 0:
        n = flex[0] if flex else len(widths) - 1
        if widths:
            i, w = widths[n]
            widths[n] = (i, w + spare)
    return widths


class RowList(ScrollView, can_focus=True):
    """Rows from a source, a header line, a cursor. Renders only what is on screen."""

    COMPONENT_CLASSES = {"rowlist--header", "rowlist--cursor", "rowlist--cursor-blurred"} | {
        f"rowlist--{n}" for n in STYLE_NAMES
    }

    DEFAULT_CSS = """
    RowList { height: 1fr; }
    RowList > .rowlist--header { text-style: bold; }
    RowList > .rowlist--cursor { text-style: reverse; }
    RowList > .rowlist--cursor-blurred { text-style: underline; }
    """

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First", show=False),
        Binding("end", "jump(-1)", "Last", show=False),
    ]

    cursor: reactive[int] = reactive(0, always_update=True, init=False, repaint=False)  # watch_cursor repaints its two rows

    class Highlighted(Message):
        def __init__(self, row_list: "RowList", index: int) -> None:
            super().__init__()
            self.row_list = row_list
            self.index = index

        @property
        def control(self) -> "RowList":
            return self.row_list

    class Selected(Highlighted):
        pass

    def __init__(self, source: RowSource, columns: Sequence[Column], *, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.source = source
        self.columns = list(columns)
        # Lines are cached by the row's key: its index, or what ``source.row_key(index)`` says
        # when the source has one (the task list: a task's line survives rows moving around it).
        self._row_key: Callable[[int], Hashable] | None = getattr(source, "row_key", None)
        self._cache: dict[Hashable, Strip] = {}
        self._cells: dict[Hashable, list[Cell]] = {}  # the cells each cached line was built from
        self._layout: list[tuple[int, int]] = []
        self._layout_width = -1
        self._styles: dict[str, Style] = {}
        self._count = 0
        self._missed = False  # something changed while a full screen covered this one
        self._near: list[Hashable] = []  # the rows around the cursor at the last refilter, nearest first

    # ------------------------------------------------------------------ data changes
    def reset(self) -> None:
        """The source changed shape: re-measure and repaint what is on screen."""
        self._cache.clear()
        self._cells.clear()
        self._count = self.source.row_count()
        self.virtual_size = Size(self.size.width, self._count + 1)
        if self._count and self.cursor >= self._count:
            self.cursor = self._count - 1
        self._draw()

    def refilter(self, change: Callable[[], None], key_at: Callable[[int], Hashable] | None = None,
                 find: Callable[[Hashable], int | None] | None = None) -> None:
        """Filter or re-sort the source (``change``) and keep the cursor on the row it was on when
        that row is still shown; when it is not, on the nearest row after it that still is (before
        it when none after is, within ``NEIGHBOURS`` rows each way): the row that took its place.
        ``key_at`` names the row at a position and ``find`` says where a row is shown now (None: it
        is not) — the source's ``row_key`` and ``position_of_key`` unless given; a source without
        them keeps the cursor's index."""
        key_at = key_at or self._row_key
        find = find or getattr(self.source, "position_of_key", None)
        if key_at is None or find is None:
            change()
            self.reset()
            return
        if self._count:
            at = min(self.cursor, self._count - 1)
            after = [key_at(p) for p in range(at, min(self._count, at + NEIGHBOURS))]
            before = [key_at(p) for p in range(at - 1, max(-1, at - NEIGHBOURS), -1)]
            self._near = [*after, *before]
        # else: nothing was shown (a filter that matched nothing): the rows around the cursor before
        change()
        self.reset()
        for key in self._near:
            pos = find(key)
            if pos is not None:
                self.cursor = pos
                return

    def _draw(self, *regions: Region) -> None:
        """Refresh these regions (all of it: none), unless a full screen covers this one
        (console/widgets/covered.py): then once it is back (:meth:`catch_up`)."""
        if covered(self):
            self._missed = True
        else:
            self.refresh(*regions)

    def catch_up(self) -> None:
        """The screen is on top again: draw what changed meanwhile."""
        if self._missed:
            self._missed = False
            self.refresh()

    def grow(self) -> None:
        """Rows were appended (a graph streaming in): nothing on screen changed but the count."""
        count = self.source.row_count()
        if count == self._count:
            return
        old, self._count = self._count, count
        size = Size(self.size.width, self._count + 1)
        if self.show_vertical_scrollbar and size.width == self.virtual_size.width:
            # Only the scrollbar's thumb moves: the new extent without a layout of the screen (the
            # reactive's assignment reflows the whole screen and repaints the whole list — 13 kB and
            # 5–20 ms of the UI thread each page of a 100k-node graph while it streams in); what
            # ScrollView does when its size changes, for the scrollbar alone.
            self.set_reactive(RowList.virtual_size, size)
            self._scroll_update(size)
        else:
            self.virtual_size = size
        top = int(self.scroll_y)
        if old < top + self.size.height:  # some of the new rows are on screen
            self._draw()

    def rows_changed(self, indices: Sequence[int]) -> None:
        """These rows' data changed: drop their cached lines, repaint those on screen."""
        self.forget(self._key(i) for i in indices)
        self.repaint(indices)

    def forget(self, keys: Iterable[Hashable]) -> None:
        """These rows' data changed (by ``source.row_key``), wherever they are now: their lines
        are built again when drawn (repaint their positions with :meth:`repaint`)."""
        for k in keys:
            self._cache.pop(k, None)
            self._cells.pop(k, None)

    def repaint(self, indices: Sequence[int]) -> None:
        """Draw these positions again (rows moved there; their cached lines are kept)."""
        top = int(self.scroll_y)
        height = self.size.height - 1
        width = self.size.width
        regions = []
        for i in indices:
            y = i - top + 1
            if 1 <= y <= height:
                regions.append(Region(0, y, width, 1))
        if regions:
            self._draw(*regions)  # one refresh for the lot (each call marks the widget dirty)

    def _key(self, index: int) -> Hashable:
        return self._row_key(index) if self._row_key is not None else index

    def visible_range(self) -> range:
        top = int(self.scroll_y)
        return range(top, min(self._count, top + max(0, self.size.height - 1)))

    def refresh_visible(self) -> None:
        """Time-based figures (ages, lease countdowns, time signals): rebuild the cells of the rows
        on screen and repaint only those whose text changed — a second later, most did not."""
        visible = self.visible_range()
        on_screen = {self._key(i): i for i in visible}
        self.forget([k for k in self._cache if k not in on_screen])  # off screen: rebuilt when scrolled to
        changed = [i for k, i in on_screen.items() if k in self._cells and list(self.source.row_cells(i)) != self._cells[k]]
        if changed:
            self.rows_changed(changed)

    @property
    def row_count(self) -> int:
        return self._count

    # ------------------------------------------------------------------ cursor
    def watch_cursor(self, old: int, new: int) -> None:
        if self._count == 0:
            return
        clamped = max(0, min(new, self._count - 1))
        if clamped != new:
            self.cursor = clamped
            return
        self.rows_changed([old, new])
        self._scroll_cursor_into_view()
        self.post_message(self.Highlighted(self, new))

    def _scroll_cursor_into_view(self) -> None:
        top = int(self.scroll_y)
        height = max(1, self.size.height - 1)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)

    def action_cursor(self, step: int) -> None:
        if self._count:
            self.cursor = max(0, min(self._count - 1, self.cursor + step))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(1, self.size.height - 2))

    def action_jump(self, where: int) -> None:
        if self._count:
            self.cursor = 0 if where == 0 else self._count - 1

    def action_select(self) -> None:
        if self._count:
            self.post_message(self.Selected(self, self.cursor))

    # ------------------------------------------------------------------ rendering
    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._cache.clear()
        self._cells.clear()

    def on_resize(self) -> None:
        self._cache.clear()
        self._cells.clear()
        self.virtual_size = Size(self.size.width, self._count + 1)
        self._scroll_cursor_into_view()

    def on_focus(self) -> None:
        self.rows_changed([self.cursor])

    def on_blur(self) -> None:
        self.rows_changed([self.cursor])

    def _style(self, name: str) -> Style:
        st = self._styles.get(name)
        if st is None:
            st = self.get_component_rich_style(f"rowlist--{name}", partial=True) if name else Style()
            self._styles[name] = st
        return st

    def _current_layout(self, width: int) -> list[tuple[int, int]]:
        if width != self._layout_width:
            self._layout = layout(self.columns, width)
            self._layout_width = width
        return self._layout

    def _build(self, cells: Sequence[Cell], width: int, base: Style) -> Strip:
        segs: list[Segment] = []
        first = True
        for ci, w in self._current_layout(width):
            if not first:
                segs.append(Segment(" ", base))
            first = False
            text, style = cells[ci] if ci < len(cells) else ("", "")
            col = self.columns[ci]
            if cell_len(text) > w:
                text = set_cell_size(text, max(0, w - 1)) + "…" if w > 1 else set_cell_size(text, w)
            elif col.align == "right":
                text = " " * (w - cell_len(text)) + text
            else:
                text = set_cell_size(text, w)
            segs.append(Segment(text, base + self._style(style) if style else base))
        return Strip(segs).adjust_cell_length(width, base)

    def header_strip(self, width: int) -> Strip:
        base = self.rich_style
        return self._build([(c.name, "") for c in self.columns], width, base + self._style_header())

    def _style_header(self) -> Style:
        st = self._styles.get("\0header")
        if st is None:
            st = self._styles["\0header"] = self.get_component_rich_style("rowlist--header", partial=True)
        return st

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            return self.header_strip(width)
        index = int(self.scroll_y) + y - 1
        base = self._styles.get("\0base")  # the widget's own style: the same for every line
        if base is None:  # (recomputed after a style change: notify_style_update clears _styles)
            base = self._styles["\0base"] = self.rich_style
        if index >= self._count or index < 0:
            return Strip.blank(width, base)
        key = self._key(index)
        strip = self._cache.get(key)
        if strip is None:
            cells = list(self.source.row_cells(index))
            strip = self._build(cells, width, base)
            if len(self._cache) > 4 * max(50, self.size.height):
                self._cache.clear()
                self._cells.clear()
            self._cache[key] = strip
            self._cells[key] = cells
        if index == self.cursor:
            name = "rowlist--cursor" if self.has_focus else "rowlist--cursor-blurred"
            cursor = self._styles.get(name)
            if cursor is None:  # (cleared with the others after a style change)
                cursor = self._styles[name] = self.get_component_rich_style(name, partial=True)
            strip = strip.apply_style(cursor)
        return strip
