"""Names and paths a run directory may use, validated before anything is read."""

from __future__ import annotations

import json
import re
from typing import TypeGuard

from store.errors import Refused

_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def valid_name(name: object) -> TypeGuard[str]:
    """A run or record name: ``[A-Za-z0-9._-]{1,64}``, and not ``.`` or ``..``."""
    return (
        isinstance(name, str)
        and _NAME.fullmatch(name) is not None
        and name not in (".", "..")
    )


def require_name(name: object, what: str = "run") -> str:
    """Return ``name`` if valid, else raise ``Refused`` (nothing is read)."""
    if not valid_name(name):
        shown = json.dumps(name if isinstance(name, str) else repr(name))
        raise Refused(
            f"invalid {what} name {shown[:80]}: use 1-64 of A-Z a-z 0-9 . _ - (not . or ..)"
        )
    return name


def valid_sha256(value: object) -> TypeGuard[str]:
    """A lowercase hex sha256 digest."""
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def safe_relpath(path: object) -> tuple[str, ...] | None:
    """Split a relative POSIX path into its components, or None when it is not safe.

    Safe: a non-empty string, not absolute, no backslash or NUL, no empty, ``.`` or ``..``
    component.
    """
    if not isinstance(path, str) or not path or len(path) > 1024:
        return None
    if path.startswith("/") or "\\" in path or "\x00" in path:
        return None
    parts = tuple(path.split("/"))
    if any(p in ("", ".", "..") for p in parts):
        return None
    return parts
