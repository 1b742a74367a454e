"""``write_atomic`` (store/runs/write.py), the one way Warden replaces a file of its own whole: run
files, agent sessions, ``warden otel``'s exporter cursor and receiver state. A file holding lease
tokens is never wider than its mode, even for a moment or after a crash left its temp file; a link
planted where the temp file goes is never written through."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from store.runs.write import write_atomic


def test_a_mode_holds_from_the_start_even_over_a_temp_file_a_crash_left(tmp_path):
    target = tmp_path / "state.log"
    stale = tmp_path / ".state.log.tmp"
    stale.write_bytes(b"half")
    os.chmod(stale, 0o644)
    write_atomic(target, b'{"claim": 1}\n', mode=0o600)
    assert target.read_bytes() == b'{"claim": 1}\n'
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    assert not stale.exists()


def test_without_a_mode_the_file_is_made_as_open_makes_it(tmp_path):
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "state.json", b"{}")
    finally:
        os.umask(old)
    assert oct((tmp_path / "state.json").stat().st_mode & 0o777) == "0o644"


def test_a_link_where_the_temp_file_goes_is_not_written_through(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"untouched")
    os.symlink(elsewhere, tmp_path / ".state.log.tmp")
    with pytest.raises(OSError):
        write_atomic(tmp_path / "state.log", b"tokens", mode=0o600)
    assert elsewhere.read_bytes() == b"untouched" and not (tmp_path / "state.log").exists()


def test_a_fifo_where_the_temp_file_goes_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / ".state.log.tmp")
    done: list[object] = []

    def write() -> None:
        try:
            write_atomic(tmp_path / "state.log", b"tokens", mode=0o600)
            done.append("written")
        except OSError as e:
            done.append(e)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    t.join(30.0)
    waited = t.is_alive()
    if waited:  # the open waits for a reader for ever: give it one so the thread ends, then fail
        os.close(os.open(tmp_path / ".state.log.tmp", os.O_RDONLY | os.O_NONBLOCK))
        t.join(30.0)
    assert not waited, "write_atomic waited on a FIFO for a reader"
    assert done and isinstance(done[0], OSError), done
    assert not (tmp_path / "state.log").exists()


def test_a_fifo_with_a_reader_where_the_temp_file_goes_is_not_written_into(tmp_path):
    fifo = tmp_path / ".state.log.tmp"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(OSError):
            write_atomic(tmp_path / "state.log", b"tokens", mode=0o600)
        assert os.read(reader, 100) == b""  # nothing was written into it
    finally:
        os.close(reader)
    assert not (tmp_path / "state.log").exists()


def test_the_rename_is_synced_with_its_directory(tmp_path, monkeypatch):
    synced: list[tuple[bool, bool]] = []  # (a directory, the new name already there)
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append((stat.S_ISDIR(os.fstat(fd).st_mode), (tmp_path / "state.json").exists()))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_atomic(tmp_path / "state.json", b"{}")
    assert synced[-1] == (True, True), synced
