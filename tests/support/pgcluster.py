"""A throw-away PostgreSQL cluster of the test's own, for tests that restart the server.

Never the shared dev server: this one is initdb'd into a temporary directory, listens on a free
loopback port, and is stopped and removed at the end. It runs with
``synchronous_standby_names = 'nobody'`` and ``synchronous_commit = local``: commits do not wait,
but a session that says ``SET LOCAL synchronous_commit = on`` has its COMMIT wait (for a standby
that never comes) *after* the commit record is flushed — a commit that has happened but whose
answer has not been sent, which a restart or ``pg_terminate_backend`` then loses. That is exactly
the "COMMIT sent, answer lost" case, made on purpose.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

PGBIN = "/usr/lib/postgresql/15/bin"


def available() -> str | None:
    """None when a cluster can be started here, else why not."""
    if not os.path.exists(os.path.join(PGBIN, "initdb")):
        return f"no PostgreSQL binaries at {PGBIN}"
    if os.geteuid() != 0:
        return "starting a cluster runs initdb as the postgres user (needs root here)"
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        return "no postgres user"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Safety nets only (a loaded machine starts a cluster slowly); nothing waits for them to pass.
PG_CTL_WAIT_S = 300


def _as_postgres(cmd: str, timeout: float = PG_CTL_WAIT_S + 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["su", "postgres", "-s", "/bin/sh", "-c", cmd], capture_output=True, text=True,
                          timeout=timeout)


class Cluster:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="warden-pg-")
        os.chmod(self.dir, 0o755)
        self.data = os.path.join(self.dir, "data")
        os.mkdir(self.data)
        shutil.chown(self.data, "postgres")
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.restarts = 0

    def _ctl(self, args: str) -> None:
        r = _as_postgres(f"{PGBIN}/pg_ctl -D '{self.data}' {args}")
        if r.returncode != 0:
            raise RuntimeError(f"pg_ctl {args.split()[0]} failed: {r.stdout} {r.stderr}")

    def start(self, *, durable: bool = False, standby_of: "Cluster | None" = None) -> "Cluster":
        """``durable``: a server as one would run it (``fsync=on``, ``synchronous_commit=on``: every
        commit waits for its WAL flush) instead of the tests' fast one (bench_fleet.py's capacity).
        ``standby_of``: a hot standby (a read replica) of that running cluster, by streaming
        replication (``pg_basebackup -R``)."""
        if standby_of is not None:
            r = _as_postgres(f"{PGBIN}/pg_basebackup -D '{self.data}' -R -X stream -h 127.0.0.1 "
                             f"-p {standby_of.port} -U postgres")
            if r.returncode != 0:
                raise RuntimeError(f"pg_basebackup failed: {r.stderr}")
            os.chmod(self.data, 0o700)  # initdb does this; the server refuses a wider data directory
        else:
            r = _as_postgres(f"{PGBIN}/initdb -D '{self.data}' -A trust -U postgres")
            if r.returncode != 0:
                raise RuntimeError(f"initdb failed: {r.stderr}")
        if durable:
            opts = (f"-p {self.port} -k '{self.data}' -c listen_addresses=127.0.0.1 -c fsync=on "
                    "-c synchronous_commit=on -c max_connections=100")
        else:
            opts = (f"-p {self.port} -k '{self.data}' -c listen_addresses=127.0.0.1 -c fsync=off "
                    "-c synchronous_standby_names=nobody -c synchronous_commit=local -c max_connections=50")
        self._opts = opts
        self._ctl(f"-o \"{opts}\" -w -t {PG_CTL_WAIT_S} -l '{self.data}/log' start")
        return self

    def down(self, mode: str = "fast") -> None:
        """Stop the server (``-m fast``: connections are told and closed; ``immediate``: the
        postmaster and backends just die) and keep its data for :meth:`up`."""
        self._ctl(f"-m {mode} -w -t {PG_CTL_WAIT_S} stop")

    def up(self) -> None:
        """Start the server stopped by :meth:`down` again, on the same port."""
        self._ctl(f"-o \"{self._opts}\" -w -t {PG_CTL_WAIT_S} -l '{self.data}/log' start")

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every connection is terminated; the server comes back."""
        self._ctl(f"-m fast -w -t {PG_CTL_WAIT_S} -l '{self.data}/log' restart")
        self.restarts += 1

    def stop(self) -> None:
        try:
            self._ctl("-m immediate stop")
        except Exception:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---------------------------------------------------------------- observing it
    def query(self, sql: str, params: tuple = (), timeout: float = PG_CTL_WAIT_S) -> list[tuple]:
        """Run one statement on a fresh connection, re-trying while the server is away."""
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as c:
                    cur = c.execute(sql, params)
                    return list(cur.fetchall()) if cur.description else []
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)  # the server is restarting: poll until it answers
