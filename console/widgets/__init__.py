from .figures import gauge, sparkline
from .rowlist import Column, RowList
from .statusbar import InfoLine, StatusBar

__all__ = ["Column", "InfoLine", "RowList", "StatusBar", "gauge", "sparkline"]
