"""Wake conditions of a park: parsed and checked when the park is planned, evaluated later.

``--wake-on`` takes one or more of (docs/operations.md "Wake conditions"):

=====================  =========================================================================
``handoff:<id>``       the handoff (of any task) is resolved
``node:<key>``         the node (of the parked task) has succeeded
``effect:<key>``       the effect (of the parked task) is confirmed
``file:<path>``        the file changed since the park was planned: it appeared, disappeared, or
                       its size or content (sha256) differ (a touch that keeps the content is no
                       change); the path is made absolute in the planning process's directory
``at:<time>``          the time has come (a duration like ``2h`` from now, or an ISO time)
=====================  =========================================================================

Planning refuses, in one line, a condition that cannot be met or is met already: an unknown
handoff or node, a handoff no longer open, a node already succeeded or abandoned, an effect already
confirmed, a time not in the future. An effect key nobody has intended yet is accepted with a
warning (an in-flight step may still intend and confirm it).

A condition is a plain JSON dict (stored in the task row's ``wake_state``, see store/parks/wake.py):
``{"kind", "target", "text"}`` plus its baseline (``file``: ``exists``, ``size``, ``mtime_ns``,
``sha256``; ``at``: ``at``) and, once met, ``met_at`` and ``evidence``.
"""

from __future__ import annotations

import os
from typing import Iterable, Mapping, NamedTuple, Sequence

from store.storage import lockguard, sql
from store import validate as v
from store.clock import iso, parse_time
from store.errors import InvalidValue, Refused
from store.jsontypes import JsonMapping, JsonObject
from store.storage.core import LedgerCore
from store.text import safe_line

KINDS = ("handoff", "node", "effect", "file", "at")
HASH_CAP = 64 * 1024 * 1024  # files up to this size are compared by sha256; bigger ones by size and mtime
HASH_TIME_S = 2.0  # and only when hashing takes less than this (a slow disk): else by size and mtime
USAGE = "use handoff:<id>, node:<key>, effect:<key>, file:<path> or at:<time>"


# ---------------------------------------------------------------------- planning
def parse(core: LedgerCore, task_id: str, specs: str | Sequence[str] | None) -> tuple[list[JsonObject], list[str]]:
    """``--wake-on`` values → (conditions with their baselines, warnings). Refused: one line."""
    if specs is None:
        return [], []
    items = [specs] if isinstance(specs, str) else list(specs)
    out: list[JsonObject] = []
    warnings: list[str] = []
    for raw in items:
        text = str(raw).strip()
        if not text:
            continue
        kind, sep, target = text.partition(":")
        kind = kind.strip().lower()
        target = target.strip()
        if not sep or kind not in KINDS:
            raise Refused(f"unknown wake condition {text!r}: {USAGE}")
        if not target:
            raise Refused(f"wake condition {text!r} names nothing: {USAGE}")
        cond = _check(core, task_id, kind, target, warnings)
        if any(c["kind"] == cond["kind"] and c["target"] == cond["target"] for c in out):
            continue
        out.append(cond)
    return out, warnings


def _check(core: LedgerCore, task_id: str, kind: str, target: str, warnings: list[str]) -> JsonObject:
    cond: JsonObject = {"kind": kind, "target": target}
    if kind == "handoff":
        row = _handoff(core, target)
        if row is None:
            raise Refused(f"wake condition handoff:{target}: no such handoff")
        if row.status != "open":
            raise Refused(f"wake condition handoff:{target}: the handoff is already {row.status}, nothing to wait for")
        cond["target"] = str(row.id)
    elif kind == "node":
        status = sql.scalar(core.db, "SELECT status FROM node WHERE task_id = ? AND key = ?", [task_id, target])
        if status is None:
            raise Refused(f"wake condition node:{target}: no such node in task {task_id}")
        if status in ("succeeded", "abandoned"):
            raise Refused(f"wake condition node:{target}: the node is already {status}, nothing to wait for")
    elif kind == "effect":
        status = sql.scalar(core.db, "SELECT status FROM effect WHERE task_id = ? AND effect_key = ?", [task_id, target])
        if status is None:
            warnings.append(f"wake condition effect:{target}: no such effect yet (it wakes when one is confirmed)")
        elif status != "intended":
            raise Refused(f"wake condition effect:{target}: the effect is already {status}, nothing to wait for")
    elif kind == "at":
        try:
            at = parse_time(target, core.now())
        except ValueError as e:
            raise Refused(f"wake condition at:{v.show(target)}: {e}") from None
        if not v.TIME_MIN <= at <= v.TIME_MAX:  # NaN and infinity ("at:nanh", "at:1e400d"); year 1 with an offset
            raise InvalidValue(f"wake condition (wake_on) at:{v.show(target)} is not a time Warden can store "
                               "(years 1 to 9999, UTC)", "wake_on")
        if at <= core.now():
            raise Refused(f"wake condition at:{v.show(target)}: {iso(at)} is not in the future")
        cond["at"] = at
        cond["target"] = iso(at)  # a duration means "from the preview": the condition names the instant
    else:  # file
        path = os.path.abspath(os.path.expanduser(target))
        cond["target"] = path
        cond.update(file_state(path))
        if cond.get("problem"):
            raise Refused(f"wake condition file:{safe_line(path)}: {cond['problem']}; watch a regular file "
                          "(Warden never opens anything else)")
        if not cond["exists"]:
            warnings.append(f"wake condition file:{safe_line(path)}: no such file yet (it wakes when one appears)")
    cond["text"] = f"{kind}:{cond['target']}"
    return cond


class _Handoff(NamedTuple):
    id: int
    status: str
    resolved_by: str | None
    resolved_at: float | None
    resolution_option: str | None


class _NodeDone(NamedTuple):
    status: str
    finished_at: float | None


class _EffectDone(NamedTuple):
    status: str
    confirmed_at: float | None
    external_id: str | None


def _handoff(core: LedgerCore, target: str) -> _Handoff | None:
    if not v.HANDOFF_ID_RE.fullmatch(target):  # ("1_000", "٣" and 10**30 are no handoff's id)
        return None
    return sql.fetch_row(core.db, _Handoff, f"SELECT {sql.columns(_Handoff)} FROM handoff WHERE id = ?", [int(target)])


def file_state(path: str) -> JsonObject:
    """A file's baseline: exists, size, mtime_ns and (up to HASH_CAP bytes, within HASH_TIME_S)
    sha256; ``problem`` when the path is there but is not a regular file Warden may read (a
    symbolic link, a FIFO, a device, a ledger of this process...): store/storage/lockguard.py."""
    fp = lockguard.read_regular(path, max_bytes=HASH_CAP, max_s=HASH_TIME_S)
    out: JsonObject = {"exists": fp.exists, "size": fp.size, "mtime_ns": fp.mtime_ns, "sha256": fp.sha256}
    if fp.problem is not None:
        out["problem"] = fp.problem
    return out


def file_changed(cond: JsonMapping) -> str | None:
    """Evidence that a ``file`` condition's file changed since its baseline, or None. Only a
    regular file is ever opened (``lstat`` first, then ``O_NOFOLLOW | O_NONBLOCK``, ``fstat``,
    bounded bytes and time): a watched file swapped for a symbolic link, a FIFO or a device is a
    change ("not a regular file"), never read."""
    path = str(cond["target"])
    shown = safe_line(path)
    try:
        st = os.lstat(path)
    except OSError:
        return f"{shown} was removed" if cond.get("exists") else None
    kind = lockguard.kind_of(st.st_mode)
    if kind != "file":
        now = "is now" if cond.get("exists") else "appeared, but is"
        return f"{shown} {now} {lockguard.not_regular(kind)}; not read"
    if not cond.get("exists"):
        return f"{shown} appeared ({st.st_size} bytes)"
    if st.st_size == cond.get("size") and st.st_mtime_ns == cond.get("mtime_ns"):
        return None
    if st.st_size != cond.get("size"):
        return f"{shown} changed: {cond.get('size')} → {st.st_size} bytes"
    fp = lockguard.read_regular(path, max_bytes=HASH_CAP, max_s=HASH_TIME_S)
    if fp.problem is not None:
        return f"{shown} changed ({fp.problem})"
    if fp.sha256 is None or cond.get("sha256") is None:
        return f"{shown} changed (modified, {st.st_size} bytes)"
    return None if fp.sha256 == cond["sha256"] else f"{shown} changed (new content, sha256 {fp.sha256[:12]})"


# ---------------------------------------------------------------------- evaluating
def met(core: LedgerCore, task_id: str, cond: JsonMapping, now: float,
        files: Mapping[str, str | None] | None = None) -> tuple[float | None, str] | None:
    """(since, evidence) when ``cond`` holds now, else None. ``file`` conditions hold only when
    ``files`` (path → evidence, computed outside any transaction) says so, or once recorded."""
    if cond.get("met_at") is not None:
        return cond["met_at"], str(cond.get("evidence") or cond.get("text"))
    kind, target = cond.get("kind"), str(cond.get("target"))
    if kind == "handoff":
        row = _handoff(core, target)
        if row is not None and row.status == "resolved":
            return row.resolved_at, f"handoff {target} resolved by {row.resolved_by} (option {row.resolution_option})"
    elif kind == "node":
        node = sql.fetch_row(core.db, _NodeDone, f"SELECT {sql.columns(_NodeDone)} FROM node WHERE task_id = ? "
                                                 "AND key = ?", [task_id, target])
        if node is not None and node.status == "succeeded":
            return node.finished_at, f"node {target} succeeded"
    elif kind == "effect":
        effect = sql.fetch_row(core.db, _EffectDone, f"SELECT {sql.columns(_EffectDone)} FROM effect "
                                                     "WHERE task_id = ? AND effect_key = ?", [task_id, target])
        if effect is not None and effect.status in ("confirmed", "compensated"):
            ext = f" ({effect.external_id})" if effect.external_id else ""
            return effect.confirmed_at, f"effect {target} confirmed{ext}"
    elif kind == "at":
        at = float(cond.get("at") or 0)
        if at <= now:
            return at, f"the time {iso(at)} has come"
    elif kind == "file" and files is not None:
        evidence = files.get(target)
        if evidence:
            return now, evidence
    return None


def texts(conditions: Iterable[JsonMapping]) -> str:
    """The conditions as one line (the task's or node's ``wake_on``)."""
    return ", ".join(str(c.get("text")) for c in conditions)


# ---------------------------------------------------------------------- the task row's wake_state
def entry(conditions: Sequence[JsonMapping], auto_resume: bool, now: float) -> JsonObject:
    """What a park records for its target: its conditions and whether a met one resumes it."""
    return {"conditions": [dict(c) for c in conditions], "auto_resume": bool(auto_resume), "parked_at": now}


def with_target(state: JsonMapping | None, node: str | None,
                target_entry: JsonMapping | None) -> JsonObject | None:
    """``state`` with the entry of the task's park (``node`` None) or of a node's park set (or
    removed when ``target_entry`` is None); None when nothing is left to watch."""
    out: JsonObject = {"task": (state or {}).get("task"), "nodes": dict((state or {}).get("nodes") or {})}
    if node is None:
        out["task"] = dict(target_entry) if target_entry else None
    elif target_entry:
        out["nodes"][node] = dict(target_entry)
    else:
        out["nodes"].pop(node, None)
    if out["task"] is None:
        del out["task"]
    if not out["nodes"]:
        del out["nodes"]
    return out or None


def targets(state: JsonMapping | None) -> list[tuple[str | None, JsonObject]]:
    """(node key or None for the task, entry) of every watched park in ``state``."""
    if not state:
        return []
    out: list[tuple[str | None, JsonObject]] = []
    if state.get("task"):
        out.append((None, dict(state["task"])))
    for key, e in sorted((state.get("nodes") or {}).items()):
        out.append((key, dict(e)))
    return out
