from .figures import gauge, sparkline
from .marks import MarkList, Tick
from .rowlist import Column, RowList
from .statusbar import InfoLine, StatusBar

__all__ = ["Column", "InfoLine", "MarkList", "RowList", "StatusBar", "Tick", "gauge", "sparkline"]
