"""Which ledgers one console opens, and the short name each row is marked with.

``warden console --ledger A --ledger B`` opens several ledgers at once (SQLite paths and PostgreSQL
URLs mixed). A ``--ledger`` value may also be a name from the contexts file,
``$WARDEN_CONSOLE_CONFIG``, else ``$XDG_CONFIG_HOME/warden/console.toml``
(``~/.config/warden/console.toml``) when it exists — the same place as the notifier's
``notify.toml``::

    open = ["api", "batch"]          # what `warden console` opens without --ledger (optional)

    [ledgers]
    api = "postgresql://warden@db.internal/api"
    batch = "/srv/batch/ledger.db"

A name is 1–16 letters, digits, ``-`` or ``_``; a ledger given as a path or URL is named after its
file (``ledger.db`` → ``ledger``) or its database (the URL's path, else its host), with ``-2``,
``-3``… where two would read the same. Nothing here opens a ledger.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence
from urllib.parse import urlsplit

NAME = re.compile(r"^[A-Za-z0-9_-]{1,16}$")


class ContextError(ValueError):
    """The contexts file or a --ledger name is wrong (one line, said as the usage error)."""


@dataclass(frozen=True)
class Named:
    """One ledger the console opens: its short name and its target (a path or a URL)."""

    name: str
    target: str


def config_path(env: Mapping[str, str] = os.environ) -> Path | None:
    """The contexts file: ``$WARDEN_CONSOLE_CONFIG`` (it must exist), else the default when present."""
    given = env.get("WARDEN_CONSOLE_CONFIG")
    if given:
        return Path(given)
    base = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    path = base / "warden" / "console.toml"
    return path if path.is_file() else None


def load_contexts(path: Path | None) -> tuple[dict[str, str], list[str]]:
    """``(name → target, names opened by default)`` from the contexts file (empty without one)."""
    if path is None:
        return {}, []
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ContextError(f"cannot read the contexts file {path}: {e.__class__.__name__}") from None
    except tomllib.TOMLDecodeError as e:
        raise ContextError(f"{path}: {e}") from None
    ledgers = raw.get("ledgers", {})
    if not isinstance(ledgers, dict):
        raise ContextError(f"{path}: [ledgers] must be a table of name = \"path or URL\"")
    named: dict[str, str] = {}
    for name, target in ledgers.items():
        if not NAME.match(name):
            raise ContextError(f"{path}: ledger name {name!r}: use 1-16 letters, digits, - or _")
        if not isinstance(target, str) or not target:
            raise ContextError(f"{path}: ledger {name}: give a path or a URL")
        named[name] = target
    opened = raw.get("open", [])
    if not isinstance(opened, list) or not all(isinstance(n, str) for n in opened):
        raise ContextError(f"{path}: open must be a list of ledger names")
    for n in opened:
        if n not in named:
            raise ContextError(f"{path}: open names {n!r}, which is not in [ledgers]")
    unknown = sorted(set(raw) - {"ledgers", "open"})
    if unknown:
        raise ContextError(f"{path}: unknown key {unknown[0]!r} (known: open, ledgers)")
    return named, list(opened)


def short_name(target: str) -> str:
    """A ledger's short name from its path or URL (see the module's docstring)."""
    if "://" in target:
        parts = urlsplit(target)
        base = parts.path.strip("/").rsplit("/", 1)[-1] or (parts.hostname or "pg")
    else:
        base = Path(target).name
        for suffix in (".sqlite3", ".sqlite", ".db"):
            if base.endswith(suffix) and len(base) > len(suffix):
                base = base[: -len(suffix)]
                break
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", base).strip("-")[:12]
    return base or "ledger"


def resolve(given: Sequence[str], env: Mapping[str, str] = os.environ) -> list[Named]:
    """The ledgers to open: each ``--ledger`` value (a configured name, else a path or URL), or
    without any the contexts file's ``open`` list; [] when neither says (the caller's default)."""
    path = config_path(env)
    named, opened = load_contexts(path)
    if not given:
        return [Named(n, named[n]) for n in opened]
    out: list[Named] = []
    taken: set[str] = set()
    for value in given:
        if value in named:
            name, target = value, named[value]
        else:
            name, target = short_name(value), value
        if any(n.target == target for n in out):
            raise ContextError(f"ledger {value} is given twice")
        unique, k = name, 2
        while unique in taken:
            unique = f"{name[:13]}-{k}"
            k += 1
        taken.add(unique)
        out.append(Named(unique, target))
    return out


__all__ = ["ContextError", "NAME", "Named", "config_path", "load_contexts", "resolve", "short_name"]
