"""Who acts: the operator identity recorded with every action, plan and recovery record.

One place for the CLI (``--operator``) and the console (the app's ``operator``, shown in dialogs):
an explicit name wins; otherwise ``$USER@host``, plus the SSH client address when
``SSH_CONNECTION`` is set.
"""

from __future__ import annotations

import getpass
import os
import socket


def default_operator() -> str:
    """``$USER@host``, plus the SSH client address when ``SSH_CONNECTION`` is set."""
    try:
        user = os.environ.get("USER") or getpass.getuser()
    except Exception:
        user = "unknown"
    who = f"{user}@{socket.gethostname()}"
    ssh = os.environ.get("SSH_CONNECTION", "").split()
    if ssh:
        who += f" (ssh from {ssh[0]})"
    return who


def resolve_operator(name: str | None) -> str:
    """``name`` when it says something, else :func:`default_operator`."""
    return (name or "").strip() or default_operator()


__all__ = ["default_operator", "resolve_operator"]
