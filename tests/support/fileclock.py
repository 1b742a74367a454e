"""A clock shared by the test and its agent processes: the float in a file the test writes
(atomically), read by ``FileClock`` in each process. Nothing depends on how fast the machine is."""

from __future__ import annotations

import os
import time


class FileClockCtl:
    """The test's handle on the clock shared with the agent processes (a ledger clock too)."""

    def __init__(self, path: str, start: float) -> None:
        self.path = path
        self.now = start
        self._write()

    def _write(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write(repr(self.now))
        os.replace(tmp, self.path)

    def __call__(self) -> float:
        return self.now

    def advance(self, s: float) -> None:
        self.now += s
        self._write()


class FileClock:
    """An agent process's clock: the float the test last wrote to ``path`` (wall time if None)."""

    def __init__(self, path: str | None) -> None:
        self.path = path

    def __call__(self) -> float:
        if self.path is None:
            return time.time()
        with open(self.path) as f:
            return float(f.read().strip())
