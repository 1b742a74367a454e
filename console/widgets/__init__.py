from .figures import gauge, sparkline
from .footer import KeyFooter
from .marks import MarkList, Tick
from .rowlist import Column, RowList
from .statusbar import InfoLine, StatusBar

__all__ = ["Column", "InfoLine", "KeyFooter", "MarkList", "RowList", "StatusBar", "Tick", "gauge", "sparkline"]
