"""The console's keys that open screens and dialogs: a mixin of :class:`console.app.WardenApp`
(kept apart so the app module stays small). Plain methods only: Textual's ``@on``/``@work``
handlers stay on the app class itself. Opening a screen is pushing it: the screen subscribes to
what it shows (console/hub.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, cast

from store.views import GraphRow

from .dialogs import open_action
from .glyphs import READ_ONLY_NOTICE
from .screens import EventLogScreen, HandoffInboxScreen, HelpScreen, NodeDetailScreen, RunsScreen, TaskGraphScreen
from .screens.advice import AdviceDialog
from .screens.base import WardenScreen
from .screens.mind import MemoryInboxScreen, MindScreen
from .screens.report import TaskReportScreen
from .text import safe_line

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

    from .alerts import AlertDesk
    from .host import ConsoleHost

    _AppBase = App[int]  # a mixin of the app: type-checked as one (Textual's screen, push_screen, notify)
else:
    _AppBase = object


class Navigation(_AppBase):
    """Needs from the app: Textual's ``screen``, ``screen_stack``, ``push_screen``, ``notify``; the
    console's ``read_only`` and ``alerts``."""

    read_only: bool
    alerts: "AlertDesk"

    def _push_once(self, kind: type, factory: Callable[[], Screen[object]]) -> None:
        if isinstance(self.screen, kind):
            return
        self.push_screen(factory())

    def alerts_here(self) -> "AlertDesk":
        """The alerts of the ledger the screen on top shows (the app's one ledger's)."""
        return self.alerts

    def open_graph(self, task_id: str) -> None:
        """The task's graph (the screen loads it and follows it: console/screens/graph.py)."""
        self.alerts_here().seen(task_id)
        self.push_screen(TaskGraphScreen(task_id))

    def open_node(self, task_id: str, key: str) -> None:
        """One node's detail (the screen watches it: console/screens/node.py)."""
        self.alerts_here().seen(task_id, key)
        self.push_screen(NodeDetailScreen(task_id, key))

    def shown_node(self, task_id: str, key: str) -> GraphRow | None:
        """The node as a screen shows it now (the one nearest the top that shows it), without a
        read: what the action dialogs open with."""
        for s in reversed(self.screen_stack):
            if isinstance(s, WardenScreen):
                n = s.shown_node(task_id, key)
                if n is not None:
                    return n
        return None

    def action_help(self) -> None:
        self._push_once(HelpScreen, HelpScreen)

    def action_events(self) -> None:
        self._push_once(EventLogScreen, EventLogScreen)

    def action_handoffs(self) -> None:
        self.alerts_here().seen_handoffs()
        self._push_once(HandoffInboxScreen, HandoffInboxScreen)

    def action_alerts_seen(self) -> None:
        n = self.alerts.open_count
        self.alerts.seen_all()
        for side in getattr(self, "sides", ()):  # several ledgers: every one's
            n += side.alerts.open_count
            side.alerts.seen_all()
        self.notify(safe_line(f"{n} alert{'' if n == 1 else 's'} marked seen"), timeout=3, markup=False)

    def action_runs(self) -> None:
        self._push_once(RunsScreen, RunsScreen)

    def _push_for_task(self, kind: type, name: str) -> None:
        """Open ``kind(task)`` on the selected task of the screen on top (once), or say there is none."""
        screen = self.screen
        if isinstance(screen, kind):
            return
        task = screen.selected_task() if isinstance(screen, WardenScreen) else None
        if not task:
            self.notify(safe_line(f"{name}: select a task first"), severity="warning", markup=False)
            return
        self.push_screen(kind(task))

    def action_report(self) -> None:
        """o: the selected task's report (what it leaves behind; console/screens/report.py)."""
        self._push_for_task(TaskReportScreen, "report")

    def action_mind(self) -> None:
        """m: the selected task's mind (console/screens/mind.py): requirements, conclusions,
        rejected paths, plan history."""
        self._push_for_task(MindScreen, "mind")

    def action_memories(self) -> None:
        """M: the memory inbox — memories agents proposed, to confirm or reject."""
        self._push_once(MemoryInboxScreen, MemoryInboxScreen)

    def action_operator(self, action: str) -> None:
        """p/u/n/r/a/c/R on the selection of the screen on top."""
        if self.read_only:
            self.notify(READ_ONLY_NOTICE, severity="warning")
            return
        screen = self.screen
        task = screen.selected_task() if isinstance(screen, WardenScreen) else None
        node = screen.selected_node() if isinstance(screen, WardenScreen) else None
        self.open_action(action, task, node)

    def open_action(self, action: str, task_id: str | None, node_key: str | None) -> None:
        """The recovery advice (console/screens/advice.py) or an action dialog (console/dialogs/)."""
        if action != "recover":
            open_action(cast("ConsoleHost", self), action, task_id, node_key)  # the app is a ConsoleHost
        elif self.read_only:
            self.notify(READ_ONLY_NOTICE, severity="warning")
        elif not task_id or not node_key:
            self.notify("recovery advice: select a node (in the task graph or node detail)", severity="warning")
        else:
            self.push_screen(AdviceDialog(task_id, node_key))
