"""How an agent writes a run file (docs/recovery.md): atomically, so a crash never leaves half."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path


def write_atomic(path: os.PathLike[str] | str, data: bytes, *, mode: int | None = None) -> None:
    """How an agent writes a run file so a crash never leaves half of it: a temp file in the same
    directory (never through a link, never into a FIFO or device), fsync, rename over the name,
    fsync of the directory (docs/recovery.md). Parent directories are created. ``mode``: the file's (``0o600`` for one holding lease tokens), never
    wider for a moment; else as ``open`` makes it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    # O_NONBLOCK: a FIFO planted where the temp file goes is not waited on for a reader
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                 0o666 if mode is None else mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or a device there is never written into
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(tmp))
    os.ftruncate(fd, 0)
    with os.fdopen(fd, "wb") as f:
        if mode is not None:
            os.fchmod(f.fileno(), mode)  # a temp file left by a crash keeps the mode it was made with
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    # the rename itself survives a power loss only once the directory is synced (docs/recovery.md)
    dfd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write_json(path: os.PathLike[str] | str, value: object) -> None:
    """``write_atomic`` of indented JSON (state.json, manifest.json, receipts)."""
    write_atomic(path, (json.dumps(value, indent=2) + "\n").encode())

