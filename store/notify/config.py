"""Which events notify whom: the notifier's configuration (a TOML file) and the command line's routes.

Where the file is: ``--config PATH``, else ``$WARDEN_NOTIFY_CONFIG``, else
``$XDG_CONFIG_HOME/warden/notify.toml`` (``~/.config/warden/notify.toml``) when it exists. Every
key is optional; an unknown key, a bad value or an invalid apprise URL is one line naming where it
is (``ConfigError``), and nothing starts.

    link_base = "https://warden.example.com:8000"   # warden serve's address as a phone reaches it
    link_ttl = "12h"        # how long a message's link to a handoff can answer it
    group = "5s"            # a burst ends after this much quiet…
    group_max = "30s"       # …or this long after its first notice: then it is one message
    state = "/var/lib/warden/notify.sqlite"   # default: beside a SQLite ledger (docs/operations.md)
    console = true          # `warden console` on this ledger runs the notifier too

    [[route]]
    name = "oncall"
    to = ["slacks://T000/B000/XXXX", "ntfys://ntfy.example.com/warden-oncall"]
    events = ["handoff:permission"]   # handoff, handoff:KIND, alarm, budget, failed, finished
    tasks = ["prod-*"]                # shell patterns on the task id (default: every task)
    severity = "warn"                 # the least severity sent: info, warn or alarm
    quiet = "5m"                      # at most one message every 5 minutes (what comes meanwhile waits, grouped)

Each ``--to URL`` of the command line adds one route named ``cli`` that takes every event.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from store.jsontypes import JsonMapping
from store.text import safe_line

ENV = "WARDEN_NOTIFY_CONFIG"
SEVERITIES = ("info", "warn", "alarm")
EVENTS = ("handoff", "alarm", "budget", "failed", "finished")
HANDOFF_KINDS = ("confirm", "direction", "exception", "acceptance", "permission", "alignment")
DEFAULT_LINK_TTL_S = 12 * 3600.0
DEFAULT_GROUP_S = 5.0
DEFAULT_GROUP_MAX_S = 30.0
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")


class ConfigError(ValueError):
    """A configuration that cannot be used; the message is one line for the operator."""


def duration(value: object, where: str) -> float:
    """``90``, ``"90s"``, ``"5m"``, ``"12h"``, ``"1d"`` → seconds (not negative, at most 30 days)."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: a duration like 30s, 5m or 12h (got {value!r})")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        m = _DURATION.match(str(value))
        if m is None:
            raise ConfigError(f"{where}: a duration like 30s, 5m or 12h (got {safe_line(repr(value), limit=40)})")
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if not 0 <= seconds <= 30 * 86400:
        raise ConfigError(f"{where}: between 0 and 30 days (got {value!r})")
    return seconds


def url_id(url: str) -> str:
    """A destination's stable, non-secret id (its URL holds tokens: never stored or shown whole)."""
    return hashlib.sha256(url.encode()).hexdigest()[:12]


def masked(url: str) -> str:
    """An apprise URL as shown: the scheme and host, the rest (tokens, topics) hidden."""
    m = re.match(r"^([A-Za-z0-9+.-]+)://([^/?#]*)", url)
    if m is None:
        return "…"
    host = m.group(2).rsplit("@", 1)[-1]
    return f"{m.group(1)}://{host}/…#{url_id(url)[:6]}"


@dataclass(frozen=True)
class Route:
    """Who hears what: destinations, the events and tasks they take, the least severity, a quiet time."""

    name: str
    to: tuple[str, ...]
    events: tuple[str, ...] = EVENTS  # "handoff" or "handoff:permission", "alarm", …
    tasks: tuple[str, ...] = ("*",)
    severity: str = "info"
    quiet_s: float = 0.0

    def takes(self, event: str, handoff_kind: str | None, task_id: str | None, severity: str) -> bool:
        if SEVERITIES.index(severity) < SEVERITIES.index(self.severity):
            return False
        if not any(e == event or (handoff_kind is not None and e == f"{event}:{handoff_kind}") for e in self.events):
            return False
        return any(fnmatch.fnmatchcase(task_id or "", pattern) for pattern in self.tasks)


@dataclass(frozen=True)
class NotifyConfig:
    routes: tuple[Route, ...] = ()
    link_base: str | None = None
    link_ttl_s: float = DEFAULT_LINK_TTL_S
    group_s: float = DEFAULT_GROUP_S
    group_max_s: float = DEFAULT_GROUP_MAX_S
    state: str | None = None
    console: bool = False
    source: str = "(no configuration file)"
    retry: tuple[float, float] = (5.0, 900.0)  # the first retry's wait, the longest
    give_up_s: float = 86400.0  # a message still failing a day later is marked failed

    def route(self, name: str) -> Route | None:
        return next((r for r in self.routes if r.name == name), None)

    def destination(self, route: str, dest: str) -> str | None:
        """The URL of a route's destination by its id, when it is still configured."""
        r = self.route(route)
        return None if r is None else next((u for u in r.to if url_id(u) == dest), None)


def config_path(given: str | None, env: Mapping[str, str] = os.environ) -> Path | None:
    """The configuration file to read: given, from the environment, or the default one when present."""
    if given:
        return Path(given)
    if env.get(ENV):
        return Path(env[ENV])
    base = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    default = base / "warden" / "notify.toml"
    return default if default.is_file() else None


def check_url(url: str, where: str) -> str:
    """An apprise URL apprise can use (its own parser decides); a bad one is one line."""
    import apprise  # the notify extra: imported where it is needed, so the store imports without it

    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"{where}: an apprise URL (like ntfy://host/topic or json://host/path)")
    if apprise.Apprise.instantiate(url.strip()) is None:
        raise ConfigError(f"{where}: apprise cannot use {masked(url.strip())!s} (see apprise's list of services)")
    return url.strip()


def check_link_base(value: object, where: str) -> str:
    text = str(value).strip().rstrip("/")
    if not re.match(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", text):
        raise ConfigError(f"{where}: an http(s) address like https://warden.example.com:8000 "
                          f"(got {safe_line(repr(value), limit=60)})")
    return text


def _strings(value: object, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(x, str) and x for x in items):
        raise ConfigError(f"{where}: a string or a list of strings")
    return tuple(items)


def _route(raw: JsonMapping, where: str, names: set[str]) -> Route:
    unknown = set(raw) - {"name", "to", "events", "tasks", "severity", "quiet"}
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    name = str(raw.get("name", f"route{len(names) + 1}"))
    if not _NAME.match(name) or name in names:
        raise ConfigError(f"{where}: name {safe_line(name, limit=40)!r}: letters, digits and ._- (unique)")
    if "to" not in raw:
        raise ConfigError(f"{where}: 'to' (one apprise URL or a list) is needed")
    to = tuple(check_url(u, f"{where}.to") for u in _strings(raw["to"], f"{where}.to"))
    events = _strings(raw.get("events", list(EVENTS)), f"{where}.events")
    for e in events:
        base, _, kind = e.partition(":")
        if base not in EVENTS or (kind and (base != "handoff" or kind not in HANDOFF_KINDS)):
            raise ConfigError(f"{where}.events: {safe_line(e, limit=40)!r} is not one of {', '.join(EVENTS)} "
                              f"(or handoff:KIND, KIND one of {', '.join(HANDOFF_KINDS)})")
    severity = str(raw.get("severity", "info"))
    if severity not in SEVERITIES:
        raise ConfigError(f"{where}.severity: one of {', '.join(SEVERITIES)}")
    names.add(name)
    return Route(name=name, to=to, events=events, tasks=_strings(raw.get("tasks", ["*"]), f"{where}.tasks"),
                 severity=severity, quiet_s=duration(raw.get("quiet", 0), f"{where}.quiet"))


TOP_KEYS = {"link_base", "link_ttl", "group", "group_max", "state", "console", "route", "retry_first",
            "retry_longest", "give_up"}


def parse(text: str, where: str) -> NotifyConfig:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where}: not TOML: {safe_line(str(e), limit=120)}") from None
    unknown = set(raw) - TOP_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r} (one of {', '.join(sorted(TOP_KEYS))})")
    routes_raw = raw.get("route", [])
    if not isinstance(routes_raw, list) or not all(isinstance(r, dict) for r in routes_raw):
        raise ConfigError(f"{where}: 'route' is a list of tables ([[route]])")
    names: set[str] = set()
    routes = tuple(_route(r, f"{where}: route {i + 1}", names) for i, r in enumerate(routes_raw))
    console = raw.get("console", False)
    if not isinstance(console, bool):
        raise ConfigError(f"{where}: console: true or false")
    state = raw.get("state")
    if state is not None and (not isinstance(state, str) or not state.strip()):
        raise ConfigError(f"{where}: state: a file path")
    group_s = duration(raw.get("group", DEFAULT_GROUP_S), f"{where}: group")
    return NotifyConfig(
        routes=routes,
        link_base=check_link_base(raw["link_base"], f"{where}: link_base") if "link_base" in raw else None,
        link_ttl_s=max(60.0, duration(raw.get("link_ttl", DEFAULT_LINK_TTL_S), f"{where}: link_ttl")),
        group_s=group_s,
        group_max_s=max(group_s, duration(raw.get("group_max", DEFAULT_GROUP_MAX_S), f"{where}: group_max")),
        state=state, console=console, source=where,
        retry=(max(0.05, duration(raw.get("retry_first", 5), f"{where}: retry_first")),
               duration(raw.get("retry_longest", 900), f"{where}: retry_longest")),
        give_up_s=duration(raw.get("give_up", 86400), f"{where}: give_up"),
    )


def load(given: str | None, env: Mapping[str, str] = os.environ) -> NotifyConfig:
    """The configuration from its file (none: the defaults, no routes)."""
    path = config_path(given, env)
    if path is None:
        return NotifyConfig()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    return parse(text, str(path))


def state_setting(env: Mapping[str, str] = os.environ) -> str | None:
    """Only the file's ``state`` (``warden serve`` checks links there): no route is checked, so a
    server without apprise, or with a configuration it cannot use, still finds the links."""
    path = config_path(None, env)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8")) if path is not None else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    state = raw.get("state")
    return state if isinstance(state, str) and state.strip() else None


def with_cli(cfg: NotifyConfig, to: Sequence[str], link_base: str | None) -> NotifyConfig:
    """The configuration plus the command line: ``--to`` URLs as the route ``cli`` (every event),
    ``--link-base`` over the file's."""
    routes = cfg.routes
    if to:
        if cfg.route("cli") is not None:
            raise ConfigError(f"{cfg.source}: a route is named 'cli', the name --to uses")
        routes = (*routes, Route(name="cli", to=tuple(check_url(u, "--to") for u in to)))
    base = check_link_base(link_base, "--link-base") if link_base else cfg.link_base
    return NotifyConfig(routes=routes, link_base=base, link_ttl_s=cfg.link_ttl_s, group_s=cfg.group_s,
                        group_max_s=cfg.group_max_s, state=cfg.state, console=cfg.console, source=cfg.source,
                        retry=cfg.retry, give_up_s=cfg.give_up_s)


__all__ = ["ConfigError", "NotifyConfig", "Route", "load", "parse", "with_cli", "config_path", "duration",
           "url_id", "masked", "check_url", "SEVERITIES", "EVENTS"]
