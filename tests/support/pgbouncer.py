"""A throw-away PgBouncer in transaction mode in front of a PostgreSQL server, for tests of
``?pool=transaction`` (docs/deployment.md "Connection pooling"). Started on a free loopback port as
the postgres user (PgBouncer will not run as root), stopped and removed at the end."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time

from tests.support.pgcluster import _as_postgres, _free_port

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def available() -> str | None:
    """None when a PgBouncer can be started here, else why not."""
    if not os.path.exists(PGBOUNCER):
        return "no pgbouncer (apt-get install pgbouncer)"
    if os.geteuid() != 0:
        return "starting pgbouncer as the postgres user needs root here"
    return None


class Bouncer:
    """``pool_mode = transaction``, ``pool_size`` server connections per database and user."""

    def __init__(self, server_host: str, server_port: int, *, pool_size: int = 2) -> None:
        self.dir = tempfile.mkdtemp(prefix="warden-pgbouncer-")
        os.chmod(self.dir, 0o777)
        self.port = _free_port()
        self.ini = os.path.join(self.dir, "pgbouncer.ini")
        users = os.path.join(self.dir, "users.txt")
        with open(users, "w") as f:
            f.write('"postgres" ""\n')
        with open(self.ini, "w") as f:
            f.write(f"""[databases]
* = host={server_host} port={server_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {users}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 200
logfile = {self.dir}/pgbouncer.log
pidfile = {self.dir}/pgbouncer.pid
""")
        for name in (self.ini, users):
            os.chmod(name, 0o644)

    def start(self) -> "Bouncer":
        r = _as_postgres(f"{PGBOUNCER} -d '{self.ini}'", timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"pgbouncer did not start: {r.stdout} {r.stderr}")
        deadline = time.monotonic() + 30
        while True:  # until it accepts connections (a condition, bounded)
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("pgbouncer never listened") from None
                time.sleep(0.05)

    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        try:
            with open(os.path.join(self.dir, "pgbouncer.pid")) as f:
                pid = int(f.read().strip())
            os.kill(pid, 15)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
        except (OSError, ValueError):
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


__all__ = ["Bouncer", "available"]
