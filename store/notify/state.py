"""The notifier's state file: what it read, what it owes to whom, what it sent, the links it gave out.

A SQLite file of its own beside the ledger (``<ledger>.notify.sqlite``; for a PostgreSQL ledger the
configuration's ``state``, else ``$XDG_STATE_HOME/warden/notify-<id>.sqlite``), never the ledger: the
notifier only reads the journal, so it can follow a ledger opened read-only, and a schema of its own
changes nothing agents rely on. Mode 0600 (it names the links' handoffs; it holds no URL, since a
URL's tokens stay in the configuration, and no link in clear: only a link's SHA-256).

Durable delivery, step by step, each step one transaction (``synchronous=FULL``: a step is on disk
before the next begins):

1. **read** — the notices made from new journal events (and alarms) are inserted with the cursor
   moved past those events: a restart reads on from there, nothing twice, nothing skipped;
2. **group** — a route's waiting notices become one *batch* when the burst is over (``group``
   quiet, or ``group_max`` after its first) and the route's ``quiet`` time since its last batch has
   passed; the batch has one *delivery* per destination;
3. **send** — a delivery is marked ``sending`` before apprise is called, then ``sent``, or
   ``retrying`` with its next time (back-off doubling from ``retry_first`` to ``retry_longest``),
   or ``failed`` past ``give_up``. A delivery found ``sending`` at start was interrupted mid-send
   (``kill -9``): it is marked ``uncertain`` and never sent again — the service may have it, and a
   message twice is the failure this file exists to prevent; ``warden notify --status`` shows it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple, Sequence

import peewee as pw

from store.clock import iso
from store.storage import sql
from store.storage.beside import kept_beside
from store.storage.db import read_tx, write_tx

VERSION = "1"
TABLES = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS notice (id INTEGER PRIMARY KEY, route TEXT NOT NULL, at REAL NOT NULL, "
    "event TEXT NOT NULL, severity TEXT NOT NULL, task_id TEXT, node TEXT, handoff_id TEXT, line TEXT NOT NULL, "
    "batch_id INTEGER)",
    "CREATE INDEX IF NOT EXISTS notice_waiting ON notice (route, batch_id)",
    "CREATE TABLE IF NOT EXISTS batch (id INTEGER PRIMARY KEY, route TEXT NOT NULL, made_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS delivery (id INTEGER PRIMARY KEY, batch_id INTEGER NOT NULL, route TEXT NOT NULL, "
    "dest TEXT NOT NULL, shown TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, "
    "next_at REAL NOT NULL, last_error TEXT, sent_at REAL, sending_at REAL)",
    "CREATE INDEX IF NOT EXISTS delivery_state ON delivery (state, next_at)",
    "CREATE TABLE IF NOT EXISTS link (id INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, handoff_id TEXT NOT NULL, "
    "route TEXT NOT NULL, made_at REAL NOT NULL, expires_at REAL NOT NULL, used_at REAL, used_by TEXT)",
    "CREATE TABLE IF NOT EXISTS watch (task_id TEXT NOT NULL, node TEXT NOT NULL, family TEXT NOT NULL, "
    "kind TEXT NOT NULL, seen_at REAL NOT NULL, gone_at REAL, PRIMARY KEY (task_id, node, family))",
)
OPEN = ("pending", "sending", "retrying")  # a delivery still owed


class StateError(Exception):
    """The state file cannot be used (one line for the operator)."""


def default_path(ledger: str, configured: str | None, env: dict[str, str] | None = None) -> Path:
    """Where a ledger's notifier state is: configured, beside a SQLite ledger, or under the
    user's state directory for a PostgreSQL one (named by the ledger's address, password masked)."""
    if configured:
        return Path(configured).expanduser()
    return kept_beside(ledger, "notify.sqlite", env)


class Notice(NamedTuple):
    route: str
    at: float
    event: str  # handoff | alarm | budget | failed | finished
    severity: str
    task_id: str | None
    node: str | None
    handoff_id: str | None
    line: str  # one line, already made safe


class NoticeRow(NamedTuple):
    id: int
    route: str
    at: float
    event: str
    severity: str
    task_id: str | None
    node: str | None
    handoff_id: str | None
    line: str


class DeliveryRow(NamedTuple):
    id: int
    batch_id: int
    route: str
    dest: str
    shown: str
    state: str
    attempts: int
    next_at: float
    last_error: str | None
    sent_at: float | None
    sending_at: float | None


class LinkRow(NamedTuple):
    id: int
    handoff_id: str
    route: str
    made_at: float
    expires_at: float
    used_at: float | None
    used_by: str | None


@dataclass(frozen=True)
class LinkCheck:
    """What a link may do: ``ok`` (answer its handoff), else why not (one line)."""

    ok: bool
    why: str
    handoff_id: str | None = None
    row: LinkRow | None = None


class State:
    """One notifier state file (see the module's doc); safe to share between a notifier and ``warden serve``."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise StateError(f"{self.path}: no notifier state here (warden notify --follow makes it)")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            os.close(fd)
        except OSError as e:
            raise StateError(f"{self.path}: cannot open the notifier state: {e.strerror or e}") from None
        self.db = pw.SqliteDatabase(str(self.path), timeout=10, check_same_thread=False, pragmas={
            "journal_mode": "wal", "synchronous": "full", "busy_timeout": 10000, "foreign_keys": 0})
        try:
            with write_tx(self.db):
                for statement in TABLES:
                    sql.execute(self.db, statement)
                sql.execute(self.db, "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", ["version", VERSION])
            version = sql.scalar(self.db, "SELECT value FROM meta WHERE key = ?", ["version"])
        except pw.DatabaseError as e:
            raise StateError(f"{self.path}: not a notifier state file ({' '.join(str(e).split())})") from None
        if version != VERSION:
            raise StateError(f"{self.path}: notifier state version {version}; this Warden reads {VERSION}")

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ one follower at a time
    @contextlib.contextmanager
    def follower(self) -> Iterator[bool]:
        """Held while a notifier follows this state: True when this process holds it, False when
        another does (that one sends; this one must not)."""
        fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ the cursor
    def meta(self, key: str) -> str | None:
        value = sql.scalar(self.db, "SELECT value FROM meta WHERE key = ?", [key])
        return None if value is None else str(value)

    def cursor(self) -> int | None:
        value = self.meta("cursor")
        return None if value is None else int(value)

    def take(self, notices: Sequence[Notice], cursor: int, *, watch: Sequence[tuple[str, str, str, str, float]] = (),
             gone: Sequence[tuple[str, str, str, float]] = ()) -> None:
        """Step 1: the notices, the alarms now seen (or gone) and the new cursor, in one transaction."""
        with write_tx(self.db):
            if notices:
                sql.execute_many(self.db, "INSERT INTO notice (route, at, event, severity, task_id, node, handoff_id, "
                                          "line) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [list(n) for n in notices])
            for task_id, node, family, kind, at in watch:
                sql.execute(self.db, "INSERT INTO watch (task_id, node, family, kind, seen_at) VALUES (?, ?, ?, ?, ?) "
                                     "ON CONFLICT (task_id, node, family) DO UPDATE SET kind = excluded.kind, "
                                     "seen_at = excluded.seen_at, gone_at = NULL", [task_id, node, family, kind, at])
            for task_id, node, family, at in gone:
                sql.execute(self.db, "UPDATE watch SET gone_at = ? WHERE task_id = ? AND node = ? AND family = ? "
                                     "AND gone_at IS NULL", [at, task_id, node, family])
            sql.execute(self.db, "INSERT INTO meta (key, value) VALUES ('cursor', ?) ON CONFLICT (key) DO UPDATE "
                                 "SET value = excluded.value", [str(cursor)])

    def watched(self) -> dict[tuple[str, str, str], tuple[str, float | None]]:
        """Alarms and gates notified: (task, node, family) → (kind, when it went away or None)."""
        return {(t, n, f): (k, g) for t, n, f, k, g in
                sql.fetch_all(self.db, "SELECT task_id, node, family, kind, gone_at FROM watch")}

    # ------------------------------------------------------------------ step 2: bursts into batches
    def waiting(self) -> list[NoticeRow]:
        return sql.fetch_rows(self.db, NoticeRow, f"SELECT {sql.columns(NoticeRow)} FROM notice "
                                                  "WHERE batch_id IS NULL ORDER BY id")

    def last_batch_at(self, route: str) -> float | None:
        v = sql.scalar(self.db, "SELECT MAX(made_at) FROM batch WHERE route = ?", [route])
        return None if v is None else float(v)

    def make_batch(self, route: str, notice_ids: Sequence[int], dests: Sequence[tuple[str, str]], now: float) -> int:
        """Step 2: the notices become one batch, with one delivery per (destination id, shown)."""
        with write_tx(self.db):
            bid = int(sql.execute(self.db, "INSERT INTO batch (route, made_at) VALUES (?, ?)", [route, now]).lastrowid)
            for chunk in sql.chunks(list(notice_ids)):
                sql.execute(self.db, f"UPDATE notice SET batch_id = ? WHERE id IN ({sql.marks(len(chunk))}) "
                                     "AND batch_id IS NULL", [bid, *chunk])
            sql.execute_many(self.db, "INSERT INTO delivery (batch_id, route, dest, shown, state, next_at) "
                                      "VALUES (?, ?, ?, ?, 'pending', ?)", [[bid, route, d, shown, now] for d, shown in dests])
        return bid

    def batch_made_at(self, batch_id: int) -> float:
        return float(sql.scalar(self.db, "SELECT made_at FROM batch WHERE id = ?", [batch_id]) or 0.0)

    def batch_notices(self, batch_id: int) -> list[NoticeRow]:
        return sql.fetch_rows(self.db, NoticeRow, f"SELECT {sql.columns(NoticeRow)} FROM notice WHERE batch_id = ? "
                                                  "ORDER BY id", [batch_id])

    # ------------------------------------------------------------------ step 3: sending
    def interrupted(self, now: float) -> int:
        """At start: deliveries left ``sending`` by a notifier that died mid-send become ``uncertain``."""
        with write_tx(self.db):
            return sql.execute_count(self.db, "UPDATE delivery SET state = 'uncertain', last_error = ? "
                                              "WHERE state = 'sending'",
                                     ["the notifier stopped while sending it: not sent again (it may have arrived)"])

    def due(self, now: float) -> list[DeliveryRow]:
        return sql.fetch_rows(self.db, DeliveryRow, f"SELECT {sql.columns(DeliveryRow)} FROM delivery "
                                                    "WHERE state IN ('pending', 'retrying') AND next_at <= ? "
                                                    "ORDER BY next_at, id", [now])

    def next_due(self) -> float | None:
        v = sql.scalar(self.db, "SELECT MIN(next_at) FROM delivery WHERE state IN ('pending', 'retrying')")
        return None if v is None else float(v)

    def sending(self, delivery_id: int, now: float) -> bool:
        """Mark a delivery as being sent (compare-and-set: False when it is no longer owed)."""
        with write_tx(self.db):
            return sql.execute_count(self.db, "UPDATE delivery SET state = 'sending', sending_at = ?, "
                                              "attempts = attempts + 1 WHERE id = ? AND state IN ('pending', 'retrying')",
                                     [now, delivery_id]) == 1

    def finished(self, delivery_id: int, state: str, now: float, *, error: str | None = None,
                 next_at: float | None = None) -> None:
        with write_tx(self.db):
            sql.execute(self.db, "UPDATE delivery SET state = ?, last_error = ?, next_at = COALESCE(?, next_at), "
                                 "sent_at = CASE WHEN ? = 'sent' THEN ? ELSE sent_at END WHERE id = ?",
                        [state, error, next_at, state, now, delivery_id])

    def deliveries(self, *, limit: int = 200) -> list[DeliveryRow]:
        """The newest deliveries first (``--status``)."""
        return sql.fetch_rows(self.db, DeliveryRow, f"SELECT {sql.columns(DeliveryRow)} FROM delivery "
                                                    "ORDER BY id DESC LIMIT ?", [limit])

    def counts(self) -> dict[str, int]:
        return {str(s): int(n) for s, n in sql.fetch_all(self.db, "SELECT state, COUNT(*) FROM delivery GROUP BY state")}

    def waiting_count(self) -> int:
        return int(sql.scalar(self.db, "SELECT COUNT(*) FROM notice WHERE batch_id IS NULL") or 0)

    # ------------------------------------------------------------------ links
    def mint(self, handoff_id: str, route: str, now: float, ttl_s: float) -> str:
        """A new single-use link token for one handoff; only its digest is kept."""
        token = secrets.token_urlsafe(24)
        with write_tx(self.db):
            sql.execute(self.db, "INSERT INTO link (digest, handoff_id, route, made_at, expires_at) VALUES (?, ?, ?, ?, ?)",
                        [_digest(token), handoff_id, route, now, now + ttl_s])
        return token

    def _link(self, token: str) -> LinkRow | None:
        return sql.fetch_row(self.db, LinkRow, f"SELECT {sql.columns(LinkRow)} FROM link WHERE digest = ?",
                             [_digest(token)])

    def check_link(self, token: str, handoff_id: str, now: float) -> LinkCheck:
        """May this link answer this handoff now? Bound to one handoff, once, before it expires."""
        with read_tx(self.db):
            row = self._link(token) if token else None
        return _judge(row, handoff_id, now)

    def spend_link(self, token: str, handoff_id: str, now: float, by: str) -> LinkCheck:
        """Use the link (compare-and-set): only one answer ever goes through a link."""
        with write_tx(self.db):
            row = self._link(token) if token else None
            verdict = _judge(row, handoff_id, now)
            if verdict.ok and row is not None:
                n = sql.execute_count(self.db, "UPDATE link SET used_at = ?, used_by = ? WHERE id = ? AND used_at IS NULL",
                                      [now, by, row.id])
                if n != 1:
                    return LinkCheck(False, "this link was already used")
        return verdict

    def unspend_link(self, token: str, now: float) -> None:
        """An answer the ledger refused for its form (not its staleness) leaves the link usable."""
        with write_tx(self.db):
            sql.execute(self.db, "UPDATE link SET used_at = NULL, used_by = NULL WHERE digest = ? AND used_at <= ?",
                        [_digest(token), now])

    def links(self, handoff_id: str) -> list[LinkRow]:
        return sql.fetch_rows(self.db, LinkRow, f"SELECT {sql.columns(LinkRow)} FROM link WHERE handoff_id = ? "
                                                "ORDER BY id", [handoff_id])


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def _judge(row: LinkRow | None, handoff_id: str, now: float) -> LinkCheck:
    if row is None:
        return LinkCheck(False, "this link is not known here (it may belong to another Warden)")
    if row.handoff_id != handoff_id:
        return LinkCheck(False, f"this link answers handoff {row.handoff_id} only, not handoff {handoff_id}",
                         row.handoff_id, row)
    if row.used_at is not None:
        return LinkCheck(False, f"this link was already used, at {iso(row.used_at)} by {row.used_by or 'someone'}",
                         row.handoff_id, row)
    if now >= row.expires_at:
        return LinkCheck(False, f"this link expired at {iso(row.expires_at)}: open the handoffs page with the "
                                "server's token", row.handoff_id, row)
    return LinkCheck(True, "", row.handoff_id, row)


__all__ = ["State", "StateError", "Notice", "NoticeRow", "DeliveryRow", "LinkRow", "LinkCheck", "default_path",
           "OPEN"]
