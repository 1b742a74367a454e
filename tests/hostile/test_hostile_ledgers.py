"""Hostile and broken ledger files: every way of opening one (read-only, an existing ledger for
writing, the agent's create-if-missing, the console's feed) refuses with one clear line naming
the path (escaped), and leaves the file and its directory exactly as they were — same bytes, same
mtime, no ``-wal``/``-shm``/``-journal`` beside it."""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path
from typing import Callable

import pytest

from hostile_support import assert_one_clear_line, fingerprint, foreign_sqlite, set_schema_version
from store import Ledger, LedgerUnavailable, SchemaMismatch
from store.reading.feed import Feed
from store.text import safe_line
from tests.support import not_regular

MAGIC = b"SQLite format 3\x00"


def _ledger(path: Path) -> Path:
    with Ledger.open(path) as led:
        led.create_task("t", title="a task")
        for i in range(30):
            led.add_node("t", f"n{i}", deps=[f"n{i - 1}"] if i else [], title="x" * 200)
    return path


# ---------------------------------------------------------------------- the corpus
def _empty(p: Path) -> None:
    p.write_bytes(b"")


def _random(size: int, seed: int) -> Callable[[Path], None]:
    def make(p: Path) -> None:
        p.write_bytes(random.Random(seed).randbytes(size))
    return make


def _magic_garbage(size: int, seed: int) -> Callable[[Path], None]:
    def make(p: Path) -> None:
        p.write_bytes(MAGIC + random.Random(seed).randbytes(size - len(MAGIC)))
    return make


def _truncated(fraction: float) -> Callable[[Path], None]:
    def make(p: Path) -> None:
        whole = _ledger(p.with_name("whole.db")).read_bytes()
        p.write_bytes(whole[: max(1, int(len(whole) * fraction))])
        for f in p.parent.glob("whole.db*"):
            f.unlink()
    return make


def _truncated_at(n: int) -> Callable[[Path], None]:
    def make(p: Path) -> None:
        whole = _ledger(p.with_name("whole.db")).read_bytes()
        p.write_bytes(whole[:n])
        for f in p.parent.glob("whole.db*"):
            f.unlink()
    return make


def _bad_page_size(p: Path) -> None:
    data = bytearray(_ledger(p).read_bytes())
    data[16:18] = (3000).to_bytes(2, "big")
    p.write_bytes(bytes(data))


def _foreign(wal: bool) -> Callable[[Path], None]:
    return lambda p: foreign_sqlite(p, wal=wal)


def _version(value: object) -> Callable[[Path], None]:
    def make(p: Path) -> None:
        set_schema_version(_ledger(p), value)
    return make


def _ledger_then(sql: str) -> Callable[[Path], None]:
    """A good ledger, then ``sql`` run on it behind Warden's back."""
    def make(p: Path) -> None:
        _ledger(p)
        con = sqlite3.connect(p)
        con.execute(sql)
        con.commit()
        con.close()
    return make


def _empty_sqlite(p: Path) -> None:
    con = sqlite3.connect(p)
    con.execute("PRAGMA user_version = 7")  # a valid, table-less database file
    con.commit()
    con.close()


CORPUS: dict[str, tuple[Callable[[Path], None], type[Exception], str]] = {
    "empty-0-bytes": (_empty, LedgerUnavailable, "empty file"),
    **{f"random-{n}-bytes-s{s}": (_random(n, s), LedgerUnavailable, "not a SQLite database")
       for n in (1, 15, 16, 99, 100, 101, 4096, 65537) for s in (1, 2)},
    **{f"magic-then-garbage-{n}": (_magic_garbage(n, n), LedgerUnavailable, "") for n in (100, 512, 4096, 8192)},
    **{f"truncated-{f}": (_truncated(f), LedgerUnavailable, "") for f in (0.1, 0.25, 0.5, 0.9, 0.99)},
    **{f"truncated-at-{n}": (_truncated_at(n), LedgerUnavailable, "") for n in (1, 16, 99, 100, 4096, 4097)},
    "bad-page-size": (_bad_page_size, LedgerUnavailable, "page size"),
    "foreign-rollback": (_foreign(False), LedgerUnavailable, "not a Warden ledger"),
    "foreign-wal": (_foreign(True), LedgerUnavailable, "not a Warden ledger"),
    "empty-sqlite": (_empty_sqlite, LedgerUnavailable, "empty SQLite database"),
    "schema-newer": (_version("999"), SchemaMismatch, "newer Warden"),
    "schema-older": (_version("0"), SchemaMismatch, "warden migrate"),
    **{f"schema-garbage-{i}": (_version(v), LedgerUnavailable, "unreadable schema_version")
       for i, v in enumerate(["abc", " 1\n", "1e3", "", "-1", "\u0663", "1.0", "1_0", "0x1", "\x1b[31m1"])},
    "schema-missing": (_ledger_then("DELETE FROM meta"), LedgerUnavailable, "no schema_version"),
    "meta-dropped": (_ledger_then("DROP TABLE meta"), LedgerUnavailable, "not a Warden ledger"),
}


def _openers(p: Path) -> dict[str, Callable[[], object]]:
    return {
        "read-only": lambda: Ledger.open(p, read_only=True),
        "existing-for-writing": lambda: Ledger.open(p, create=False),
        "agent-create": lambda: Ledger.open(p),
        "feed": lambda: Feed(p, read_only=True).check(),
        "feed-writable": lambda: Feed(p).check(),
    }


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_a_broken_file_is_refused_and_left_exactly_as_it_was(case: str, tmp_path: Path) -> None:
    make, exc, words = CORPUS[case]
    p = tmp_path / "ledger.db"
    make(p)
    for how, open_it in _openers(p).items():
        if case == "empty-0-bytes" and how == "agent-create":
            continue  # an agent may create its ledger in an empty file it was given
        before = fingerprint(p)
        with pytest.raises((LedgerUnavailable, SchemaMismatch)) as e:
            opened = open_it()
            close = getattr(opened, "close", None)
            if close:
                close()
        assert isinstance(e.value, exc), (how, e.value)
        assert_one_clear_line(str(e.value), names=safe_line(str(p)))
        assert words.lower() in str(e.value).lower(), (how, str(e.value))
        assert fingerprint(p) == before, (case, how)


def test_an_empty_file_given_to_an_agent_becomes_a_ledger(tmp_path: Path) -> None:
    p = tmp_path / "ledger.db"
    p.write_bytes(b"")
    with Ledger.open(p) as led:
        led.create_task("t")
    with Ledger.open(p, read_only=True) as led:
        assert [t.task_id for t in led.tasks()] == ["t"]


def test_a_foreign_database_in_use_keeps_its_wal_files_and_bytes(tmp_path: Path) -> None:
    """A foreign WAL database another program has open (-wal and -shm present): refused, and the
    other program's files are untouched."""
    p = tmp_path / "other.db"
    con = foreign_sqlite(p, wal=True, keep_wal=True)
    try:
        con.execute("INSERT INTO notes (body) VALUES ('uncommitted? no: committed, still in the WAL')")
        con.commit()
        before = {f: fingerprint(tmp_path / f) for f in sorted(os.listdir(tmp_path))}
        assert {"other.db-wal", "other.db-shm"} <= set(before)
        for how, open_it in _openers(p).items():
            with pytest.raises(LedgerUnavailable, match="not a Warden ledger") as e:
                open_it()
            assert_one_clear_line(str(e.value))
            after = {f: fingerprint(tmp_path / f) for f in sorted(os.listdir(tmp_path))}
            assert after["other.db"] == before["other.db"], how
            assert set(after) == set(before), how
    finally:
        con.close()


# ---------------------------------------------------------------------- not files
def _symlink_to_ledger(p: Path) -> None:
    os.symlink(_ledger(p.with_name("real.db")), p)


def _dangling_symlink(p: Path) -> None:
    os.symlink(p.with_name("nowhere.db"), p)


NOT_FILES = {
    "fifo": (not_regular.fifo, "not a regular file"),
    "directory": (not_regular.directory, "is a directory"),
    "socket": (not_regular.unix_socket, "not a regular file"),
    "symlink-to-a-ledger": (_symlink_to_ledger, "symbolic link"),
    "dangling-symlink": (_dangling_symlink, "symbolic link"),
}


@pytest.mark.parametrize("case", sorted(NOT_FILES))
def test_what_is_not_a_file_is_refused_without_being_opened(case: str, tmp_path: Path) -> None:
    """A FIFO would block a reader forever if opened; nothing here is opened at all."""
    make, words = NOT_FILES[case]
    p = tmp_path / "ledger.db"
    make(p)
    before = {f: fingerprint(tmp_path / f) for f in sorted(os.listdir(tmp_path))}
    for how, open_it in _openers(p).items():
        with pytest.raises(LedgerUnavailable, match=words) as e:
            open_it()
        assert_one_clear_line(str(e.value), names=str(p))
        assert {f: fingerprint(tmp_path / f) for f in sorted(os.listdir(tmp_path))} == before, how


def test_device_files_are_not_ledgers() -> None:
    for dev in ("/dev/null", "/dev/zero", "/dev/urandom"):
        if not os.path.exists(dev):
            continue
        with pytest.raises(LedgerUnavailable, match="not a regular file") as e:
            Ledger.open(dev, read_only=True)
        assert_one_clear_line(str(e.value))


# ---------------------------------------------------------------------- paths
EVIL_NAMES = ["\x1b]0;pwned\x07", "a\nb", "\u202etxt.exe", "\x9b2J", "tab\tname", "[bold]x[red]", "sp ace", "%41?x#y"]


@pytest.mark.parametrize("name", EVIL_NAMES, ids=range(len(EVIL_NAMES)))
def test_a_hostile_path_is_shown_escaped(name: str, tmp_path: Path) -> None:
    missing = tmp_path / f"{name}.db"
    with pytest.raises(LedgerUnavailable) as e:
        Ledger.open(missing, create=False)
    assert_one_clear_line(str(e.value), names=safe_line(str(missing)))
    foreign = tmp_path / f"f{name}.db"
    foreign_sqlite(foreign, wal=True)
    before = fingerprint(foreign)
    with pytest.raises(LedgerUnavailable) as e:
        Ledger.open(foreign, read_only=True)
    assert_one_clear_line(str(e.value), names=safe_line(str(foreign)))
    assert fingerprint(foreign) == before
    good = tmp_path / f"g{name}.db"
    _ledger(good)  # ?, # and % in a path are not URI parameters
    with Ledger.open(good, read_only=True) as led:
        assert led.task("t").title == "a task"


def test_a_read_leaves_a_quiet_ledger_and_its_directory_as_they_were(tmp_path: Path) -> None:
    p = _ledger(tmp_path / "ledger.db")
    before = fingerprint(p)
    for _ in range(3):
        with Ledger.open(p, read_only=True) as led:
            assert led.graph("t").nodes
            with pytest.raises(Exception, match="read-only"):
                led.create_task("u")
        assert fingerprint(p) == before
    feed = Feed(p, read_only=True)
    feed.check()
    assert feed.last_event_id() > 0
    feed.close()


def test_a_read_beside_a_running_agent_sees_its_commits(tmp_path: Path) -> None:
    p = _ledger(tmp_path / "ledger.db")
    with Ledger.open(p) as agent:
        with Ledger.open(p, read_only=True) as reader:
            assert not reader.db.snapshot
            agent.create_task("later")
            assert "later" in [t.task_id for t in reader.tasks()]
        assert os.path.exists(str(p) + "-wal")  # the agent's files are its own: not tidied away


def test_a_ledger_that_never_existed_is_not_said_to_have_disappeared(tmp_path: Path) -> None:
    feed = Feed(tmp_path / "nope.db", read_only=True)
    with pytest.raises(LedgerUnavailable) as e:
        feed.check()
    assert "disappeared" not in str(e.value) and "no ledger at" in str(e.value)
    assert not (tmp_path / "nope.db").exists()
