"""Makers of what sits at a path and is not a regular file, for the tests that a reader of a named
file (a ledger, a ``file:`` wake condition) refuses it without opening or blocking on it."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def fifo(p: Path) -> None:
    os.mkfifo(p)


def directory(p: Path) -> None:
    p.mkdir()


def unix_socket(p: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    s.close()
