"""Shared external quotas, scheduled as resources (a task's throughput is often set by
an outside service's rate window, not by the model — name the shared quota when the graph is
made and schedule it, rather than let every branch hit the wall and back off on its own).

A quota is declared on the ledger (every task shares it) or on one task (``declare``): a name, a
capacity and a window. With a window, at most ``capacity`` claims of nodes drawing on it start in
any ``window_s`` seconds (an API's rate limit: 10 a minute); without one, at most ``capacity``
nodes drawing on it hold a live lease at once (a licence, a GPU). A node names the quotas it draws
on (``add_node(..., quotas=[...])``; a name resolves to the task's quota of that name, else the
ledger's; an undeclared name is refused when the node is added).

A claim passes over a ready node whose quota is full and takes the next one; the node stays
pending — waiting on a quota is not work: it has no lease, its wall clock does not run, no stall
signal can fire — and the ``quota_wait`` signal (info) says "waiting on quota X (serialised by
quota policy)" with the figures, in ``warden graph``, the node detail and the graph's lease
column. When it frees, the next claim takes it, in graph order. A claim that takes a node drawing
on quotas names them in its ``node.claimed`` event (``quotas``).

Race safety: the claim that takes a node drawing on quotas locks those quota rows (PostgreSQL:
``FOR UPDATE``, in name order, after the node's own row; SQLite: the write transaction is already
exclusive), counts the draws under that lock and records its own draw in the same transaction, so
concurrent claimers in any number of processes never exceed the capacity.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

from store.clock import duration_text, iso
from store.errors import NotFound, Refused
from store.storage import sql
from store.storage.core import LedgerCore, validate_task_id
from store.storage.db import retry_write, write_tx
from store.storage.events import QuotaDeclared
from store.validate import show
from store.views import QUOTA_LEDGER, QuotaUse

LEDGER = QUOTA_LEDGER  # the scope of a quota every task shares
NAME_MAX = 64
WAIT_NODES = 50  # quota_wait signals of one task at most (then one line says how many more)


class QuotaRow(NamedTuple):
    scope: str
    name: str
    capacity: int
    window_s: float | None
    declared_at: float
    declared_by: str


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX or any(c.isspace() for c in name) \
            or "\x00" in name:
        raise Refused(f"a quota name is 1-{NAME_MAX} characters without spaces (got {show(name)})")
    return name


@retry_write
def declare(core: LedgerCore, name: str, capacity: int, *, window_s: float | None, task_id: str | None,
            actor: str) -> None:
    """Declare (or change) a quota on the ledger (``task_id`` None) or on one task."""
    check_name(name)
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise Refused(f"a quota's capacity is a whole number of at least 1 (got {show(capacity)})")
    if window_s is not None and (isinstance(window_s, bool) or not isinstance(window_s, (int, float))
                                 or not 0 < float(window_s) <= 366 * 86400):
        raise Refused(f"a quota's window is seconds > 0, at most a year, or None (got {show(window_s)})")
    scope = LEDGER
    if task_id is not None:
        validate_task_id(task_id)
        scope = task_id
    now = core.now()
    window = None if window_s is None else float(window_s)
    with write_tx(core.db):
        if task_id is not None:
            core.task_record(task_id, lock="update")  # NotFound for an unknown task
        had = _row(core, scope, name, lock=True)
        if had is None:
            sql.execute(core.db, "INSERT INTO quota (scope, name, capacity, window_s, declared_at, declared_by) "
                                 "VALUES (?, ?, ?, ?, ?, ?)", [scope, name, int(capacity), window, now, actor])
        else:
            sql.execute(core.db, "UPDATE quota SET capacity = ?, window_s = ?, declared_at = ?, declared_by = ? "
                                 "WHERE scope = ? AND name = ?", [int(capacity), window, now, actor, scope, name])
        per = "at once" if window is None else f"per {duration_text(window)}"
        core.journal(task_id, None, actor, f"quota {name}: {capacity} {per}" + (f" (was {had.capacity})" if had else ""),
                     QuotaDeclared(quota=name, scope=scope, capacity=int(capacity), window_s=window))


def _row(core: LedgerCore, scope: str, name: str, *, lock: bool = False) -> QuotaRow | None:
    return sql.fetch_row(core.db, QuotaRow, f"SELECT {sql.columns(QuotaRow)} FROM quota WHERE scope = ? AND name = ?"
                         + (sql.lock(core.db, " FOR UPDATE") if lock else ""), [scope, name])


def resolve(core: LedgerCore, task_id: str, names: Sequence[str], *, lock: bool = False) -> list[QuotaRow]:
    """The quota each name means for ``task_id`` (the task's own, else the ledger's), in name order
    (the one lock order); an undeclared name is refused."""
    out = []
    for name in sorted(set(names)):
        row = _row(core, task_id, name, lock=lock) or _row(core, LEDGER, name, lock=lock)
        if row is None:
            raise Refused(f"no quota {name!r} is declared for task {task_id!r} or the ledger: "
                          "declare it first (ledger.declare_quota)")
        out.append(row)
    return out


def check_declared(core: LedgerCore, task_id: str, names: Sequence[str]) -> None:
    for n in names:
        check_name(n)
    resolve(core, task_id, names)


def add_node_quotas(core: LedgerCore, node_ids: Mapping[str, int], quotas: Mapping[str, Sequence[str]]) -> None:
    rows = [(node_ids[key], name) for key, names in quotas.items() for name in sorted(set(names))]
    if rows:
        sql.execute_many(core.db, "INSERT INTO node_quota (node_id, name) VALUES (?, ?)", rows)


def node_quota_names(core: LedgerCore, node_id: int) -> list[str]:
    return [r[0] for r in sql.fetch_all(core.db, "SELECT name FROM node_quota WHERE node_id = ? ORDER BY name",
                                        [node_id])]


def _use(core: LedgerCore, q: QuotaRow, now: float) -> QuotaUse:
    if q.window_s is None:
        n = sql.scalar(core.db, "SELECT COUNT(*) FROM quota_draw d JOIN node n ON n.id = d.node_id "
                                "AND n.lease_token = d.token WHERE d.scope = ? AND d.name = ? "
                                "AND n.status = 'running' AND n.lease_until > ?", [q.scope, q.name, now])
        return QuotaUse(q.scope, q.name, q.capacity, None, int(n or 0), None)
    n, oldest = sql.fetch_all(core.db, "SELECT COUNT(*), MIN(at) FROM quota_draw WHERE scope = ? AND name = ? "
                                       "AND at > ?", [q.scope, q.name, now - q.window_s])[0]
    frees = None if oldest is None else float(oldest) + q.window_s
    return QuotaUse(q.scope, q.name, q.capacity, q.window_s, int(n or 0), frees)


def full_names(core: LedgerCore, task_id: str, now: float) -> list[str]:
    """The names of the quotas ``task_id`` may draw on that are full now (no lock: a first look;
    the claim decides under the quota's lock in :func:`draw`)."""
    rows = sql.fetch_rows(core.db, QuotaRow, f"SELECT {sql.columns(QuotaRow)} FROM quota WHERE scope IN (?, ?) "
                                             "ORDER BY name, scope", [LEDGER, task_id])
    mine: dict[str, QuotaRow] = {}
    for r in rows:  # the task's own quota of a name wins over the ledger's
        if r.name not in mine or r.scope == task_id:
            mine[r.name] = r
    return [name for name, r in mine.items() if _use(core, r, now).full]


def draw(core: LedgerCore, task_id: str, node_id: int, token: str, now: float) -> list[QuotaUse] | None:
    """Inside a claim's write transaction, after the node's row is taken: lock the node's quotas,
    and record one draw on each when every one has room (returns them as they stand after the
    draw; [] when the node draws on none), else draw nothing and return None."""
    names = node_quota_names(core, node_id)
    if not names:
        return []
    rows = resolve(core, task_id, names, lock=True)
    uses = [_use(core, q, now) for q in rows]
    if any(u.full for u in uses):
        return None
    for q in rows:
        if q.window_s is not None:  # draws older than the window count no more
            sql.execute(core.db, "DELETE FROM quota_draw WHERE scope = ? AND name = ? AND at <= ?",
                        [q.scope, q.name, now - q.window_s])
        else:  # draws whose lease is gone
            sql.execute(core.db, "DELETE FROM quota_draw WHERE scope = ? AND name = ? AND NOT EXISTS (SELECT 1 "
                                 "FROM node n WHERE n.id = quota_draw.node_id AND n.lease_token = quota_draw.token "
                                 "AND n.status = 'running' AND n.lease_until > ?)", [q.scope, q.name, now])
        sql.execute(core.db, "INSERT INTO quota_draw (scope, name, node_id, token, at) VALUES (?, ?, ?, ?, ?)",
                    [q.scope, q.name, node_id, token, now])
    return [QuotaUse(u.scope, u.name, u.capacity, u.window_s, u.in_use + 1, u.frees_at) for u in uses]


# ---------------------------------------------------------------------- reading
def quotas(core: LedgerCore, task_id: str | None = None) -> list[QuotaUse]:
    """The quotas declared on the ledger (and on ``task_id`` when given), as they stand now."""
    now = core.now()
    if task_id is not None:
        core.task_record(task_id)
    scopes = [LEDGER] if task_id is None else [LEDGER, task_id]
    rows = sql.fetch_rows(core.db, QuotaRow, f"SELECT {sql.columns(QuotaRow)} FROM quota "
                                             f"WHERE scope IN ({sql.marks(len(scopes))}) ORDER BY scope, name", scopes)
    return [_use(core, r, now) for r in rows]


def quota(core: LedgerCore, name: str, task_id: str | None = None) -> QuotaUse:
    row = (_row(core, task_id, name) if task_id is not None else None) or _row(core, LEDGER, name)
    if row is None:
        raise NotFound(f"no quota {name!r}" + (f" for task {task_id!r} or the ledger" if task_id else ""))
    return _use(core, row, core.now())


class Waiting(NamedTuple):
    node: str
    use: QuotaUse


def waiting(core: LedgerCore, task_id: str, now: float, limit: int = WAIT_NODES + 1) -> list[Waiting]:
    """Ready pending nodes of ``task_id`` that a claim passes over because a quota they draw on is
    full (each with the first full quota), in graph order."""
    full = full_names(core, task_id, now)
    if not full:
        return []
    rows = sql.fetch_all(
        core.db,
        "SELECT n.key, MIN(q.name) FROM node n JOIN node_quota q ON q.node_id = n.id WHERE n.task_id = ? "
        f"AND n.status = 'pending' AND q.name IN ({sql.marks(len(full))}) "
        "AND (n.next_retry_at IS NULL OR n.next_retry_at <= ?) "
        "AND NOT EXISTS (SELECT 1 FROM edge e JOIN node d ON d.id = e.src_id WHERE e.dst_id = n.id "
        "AND d.status NOT IN ('succeeded', 'abandoned')) GROUP BY n.key, n.position ORDER BY n.position LIMIT ?",
        [task_id, *full, now, limit])
    uses = {name: quota(core, name, task_id) for name in {r[1] for r in rows}}
    return [Waiting(key, uses[name]) for key, name in rows]


def wait_text(w: Waiting, now: float) -> str:
    u = w.use
    tail = ""
    if u.frees_at is not None:
        tail = f"; a place frees at {iso(u.frees_at)} (in {duration_text(max(0.0, u.frees_at - now))})"
    elif u.window_s is None:
        tail = "; a place frees when a holder commits, fails or loses its lease"
    return f"waiting on quota {u.name} (serialised by quota policy): {u.describe()}{tail}"


__all__ = ["LEDGER", "QuotaUse", "Waiting", "add_node_quotas", "check_declared", "check_name", "declare", "draw",
           "full_names", "node_quota_names", "quota", "quotas", "resolve", "wait_text", "waiting"]
