"""The console's screens."""

from .error import LedgerErrorScreen
from .events import EventLogScreen
from .graph import TaskGraphScreen
from .help import HelpScreen
from .lists import HandoffInboxScreen, RunsScreen
from .mind import MemoryInboxScreen, MindScreen
from .node import NodeDetailScreen
from .report import TaskReportScreen
from .tasks import TaskListScreen

__all__ = [
    "EventLogScreen", "HandoffInboxScreen", "HelpScreen", "LedgerErrorScreen", "MemoryInboxScreen", "MindScreen",
    "NodeDetailScreen",
    "RunsScreen", "TaskGraphScreen", "TaskListScreen", "TaskReportScreen",
]
