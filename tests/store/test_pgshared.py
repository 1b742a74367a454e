"""One PostgreSQL connection shared by a process's threads (``store/storage/pgshared.py``): the
threads take turns per transaction, never land a statement inside another thread's transaction,
and a lost connection is re-made once for all of them."""

from __future__ import annotations

import threading
import uuid

import pytest

from store import Ledger, NodeSpec
from store.storage.backends import WardenPostgres
from tests.conftest import pg_admin
from tests.support.waiting import wait_until

pg = pytest.mark.postgres


def named(url: str) -> tuple[str, str]:
    """The URL with an application_name of its own (so pg_stat_activity counts this test's only)."""
    name = "warden-t-" + uuid.uuid4().hex[:10]
    return url + ("&" if "?" in url else "?") + f"application_name={name}", name


def backends(name: str) -> list[int]:
    with pg_admin() as c:
        return [r[0] for r in c.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,))]


class CountingLock:
    """An RLock that counts the threads waiting for it (so a test can wait until one is blocked)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.waiting = 0
        self._mu = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        with self._mu:
            self.waiting += 1
        try:
            return self._lock.acquire(blocking, timeout)
        finally:
            with self._mu:
                self.waiting -= 1

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> "CountingLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def connects(monkeypatch: pytest.MonkeyPatch) -> dict[int, int]:
    """Real connections made, per database object (``id(led.db)``): counted around the driver's
    connect (``WardenPostgres._connect``, which the shared connection calls once per real one)."""
    made: dict[int, int] = {}
    real = WardenPostgres._connect

    def _connect(self: WardenPostgres, *args: object, **kwargs: object) -> object:
        made[id(self)] = made.get(id(self), 0) + 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(WardenPostgres, "_connect", _connect)
    return made


def seeded(url: str) -> None:
    with Ledger.open(url) as led:
        led.create_task("t")
        led.add_nodes("t", [NodeSpec(key=f"n{i}") for i in range(6)])


@pg
def test_many_threads_read_through_one_connection(pg_target, monkeypatch):
    url, name = named(pg_target())
    seeded(url)
    made = connects(monkeypatch)
    led = Ledger.open(url, create=False, one_connection=True)
    try:
        errors: list[BaseException] = []
        seen: list[int] = []

        def reader() -> None:
            try:
                for _ in range(20):
                    seen.append(len(led.graph("t").nodes))
                    led.task("t")
                    led.events(0, limit=10)
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=reader) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert seen == [6] * 160
        assert len(backends(name)) == 1
        assert made[id(led.db)] == 1
    finally:
        led.close()
    assert backends(name) == []


@pg
def test_a_statement_never_lands_inside_another_threads_transaction(pg_target):
    """Thread A holds a Repeatable Read snapshot; thread B's read must wait for it to end and then
    see what committed meanwhile. Were B's statement sent on the shared connection inside A's
    transaction, it would read A's snapshot: the old journal id."""
    from store.storage.db import read_tx

    url, _ = named(pg_target())
    seeded(url)
    led = Ledger.open(url, create=False, one_connection=True)
    gate = led.db.gate = CountingLock()
    writer = Ledger.open(url, create=False)
    try:
        before = led.last_event_id()
        in_tx = threading.Event()
        release = threading.Event()
        a_saw: list[int] = []
        b_saw: list[int] = []

        def a() -> None:
            with read_tx(led.db, loss_is_callers=True):
                a_saw.append(led.last_event_id())
                in_tx.set()
                release.wait(30)
                a_saw.append(led.last_event_id())

        ta = threading.Thread(target=a)
        ta.start()
        assert in_tx.wait(30)
        c = writer.claim("t", "w")  # commits while A's snapshot is open
        assert c is not None
        after = writer.last_event_id()
        tb = threading.Thread(target=lambda: b_saw.append(led.last_event_id()))
        tb.start()
        wait_until(lambda: gate.waiting == 1 or b_saw, "B waits for its turn (or reads)")
        assert b_saw == [], "B read inside A's transaction"  # it must wait while A's transaction is open
        release.set()
        ta.join()
        tb.join()
        assert a_saw == [before, before]  # A's snapshot, undisturbed
        assert b_saw == [after] and after > before
    finally:
        writer.close()
        led.close()


@pg
def test_writes_and_reads_from_several_threads_take_turns(pg_target):
    url, name = named(pg_target())
    seeded(url)
    led = Ledger.open(url, create=False, one_connection=True)
    try:
        errors: list[BaseException] = []

        def agent(i: int) -> None:
            try:
                while True:
                    c = led.claim("t", f"w{i}")
                    if c is None:
                        return
                    led.heartbeat(c, observation=f"working {i}")
                    led.commit(c, output={"by": i})
            except BaseException as e:
                errors.append(e)

        def watcher() -> None:
            try:
                for _ in range(30):
                    led.tasks()
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=agent, args=(i,)) for i in range(3)] + [threading.Thread(target=watcher)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert led.task("t").status == "completed"
        assert len(backends(name)) == 1
    finally:
        led.close()


@pg
def test_a_lost_connection_is_made_again_once_for_every_thread(pg_target, monkeypatch):
    url, name = named(pg_target())
    seeded(url)
    made = connects(monkeypatch)
    led = Ledger.open(url, create=False, one_connection=True)
    try:
        assert led.task("t").total == 6
        [pid] = backends(name)
        with pg_admin() as c:
            c.execute("SELECT pg_terminate_backend(%s)", (pid,))
        wait_until(lambda: pid not in backends(name), "the backend is gone")
        errors: list[BaseException] = []
        got: list[int] = []

        def reader() -> None:
            try:
                got.append(led.task("t").total)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and got == [6] * 4
        assert made[id(led.db)] == 2
        now = backends(name)
        assert len(now) == 1 and now != [pid]
    finally:
        led.close()


def test_sqlite_ignores_one_connection(tmp_path):
    path = str(tmp_path / "l.db")
    seeded(path)
    with Ledger.open(path, create=False, one_connection=True) as led:
        assert led.task("t").total == 6
        assert not hasattr(led.db, "gate")
