"""One PostgreSQL connection for every thread of a process: the console's.

Peewee keeps a connection per thread. The console reads from many threads — the feed's reads
(asyncio's thread pool), the task rows, estimates and signals, the graph's pages, parks' wake
conditions, the dialogs' plans and applies, each Textual thread worker a thread of its own — so with
ten agents writing it held 4–5 PostgreSQL connections, opening and closing them as its worker
threads came and went (a connection and its session set-up for every short-lived thread). A
server's connections are a shared, bounded resource (``max_connections``, a pooler's pool): the
console should hold a fixed, small number whatever the fleet does.

:class:`SharedPostgres` gives every thread the same driver connection and takes turns on it:

* a transaction (``BEGIN`` … ``COMMIT``/``ROLLBACK``, i.e. ``read_tx``, ``write_tx``, ``run_write``)
  holds the *gate* from its ``BEGIN`` to its end, so no other thread's statement can land inside it;
* a statement outside a transaction holds it for that statement (psycopg's client-side cursors
  have every row in hand when ``execute`` returns, so reading them afterwards needs no turn).

Peewee's per-thread state (the transaction stack) stays per thread: a thread's ``read_tx`` never
mistakes another thread's open transaction for its own (it waits for it to end instead). Each
thread therefore waits at most for one transaction or one statement of another — reads that must
not wait long (the feed's) must not queue behind long transactions: the console's readers keep
theirs short (``store.ledger.queries.graph_pages`` leaves its snapshot before handing out pages
when the connection is shared).

A lost connection is re-made once for everyone: the thread that notices closes it and connects
again (``WardenPostgres.reconnect``); the others find it closed on their next statement and take
the new one the same way. With the feed's ``LISTEN`` connection (``store/storage/watch.py``) that is two
connections in all.
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

from store.storage.backends import WardenPostgres
from store.storage.sql import DriverConnection, DriverCursor


class _Turn(threading.local):
    tx = False  # this thread holds the gate for its open transaction


class SharedPostgres(WardenPostgres):
    """A :class:`WardenPostgres` whose threads share one connection, taking turns (see above)."""

    shared = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # peewee's own (untyped) options, passed on
        super().__init__(*args, **kwargs)
        self.gate = threading.RLock()
        self._conn_lock = threading.Lock()
        self._shared: DriverConnection | None = None
        self._turn = _Turn()

    # ------------------------------------------------------------------ the connection
    def _connect(self) -> DriverConnection:
        # The thread that makes the connection sets its session up before anyone else can have it.
        with self._conn_lock:
            conn = self._shared
            if conn is None or conn.closed:
                conn = super()._connect()  # type: ignore[misc]  # (peewee.Database._connect is untyped)
                super()._initialize_connection(conn)
                self._shared = conn
            return conn

    def _initialize_connection(self, conn: DriverConnection) -> None:
        """Done once per real connection, in :meth:`_connect` (Peewee calls this per thread)."""

    def _close(self, conn: DriverConnection) -> None:
        # Whoever closes (the ledger closing, a lost connection dropped) closes the real one: the
        # other threads find it closed and take the next one.
        with self._conn_lock:
            if conn is self._shared:
                self._shared = None
        conn.close()

    # ------------------------------------------------------------------ turns
    def begin(self, isolation_level: str | None = None) -> None:
        self.gate.acquire()
        self._turn.tx = True
        try:
            super().begin(isolation_level)
        except BaseException:
            self._end_turn()
            raise

    def commit(self) -> None:
        super().commit()  # a failed COMMIT is followed by ROLLBACK (Peewee's transaction), which ends the turn
        if self.transaction_depth() == 0:
            self._end_turn()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            if self.transaction_depth() == 0:
                self._end_turn()

    def _end_turn(self) -> None:
        if self._turn.tx:
            self._turn.tx = False
            self.gate.release()

    def execute_sql(self, sql: str, params: Sequence[object] | None = None) -> DriverCursor:
        with self.gate:
            return super().execute_sql(sql, params)


__all__ = ["SharedPostgres"]
