"""Shared fixtures: a ledger on a fixed, manual clock, on each backend.

``backend`` is parametrised (ids ``sqlite`` and ``postgres``): every test that asks for ``ledger``,
``ledger_path`` or ``new_target`` runs on a SQLite file in ``tmp_path`` and on PostgreSQL. The
PostgreSQL half needs a server: set ``WARDEN_TEST_PG_URL`` (``.ci/run`` starts a throw-away one and
sets it); without it those tests skip, saying why. Each PostgreSQL test gets a fresh schema of its
own (``?options=-csearch_path=…`` in the URL, so subprocesses given the URL see the same one),
dropped afterwards. Tests of SQLite-only behaviour (file corruption, WAL, ``mode=ro``, symlinks)
ask for ``sqlite_only`` or build their own file paths.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import Callable
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, settings

from store import Ledger, ManualClock

# Hypothesis profiles of the model-based tests with real processes (tests/store/test_ledger_model.py),
# chosen with WARDEN_MODEL_PROFILE: "model-ci" (the default: bounded to keep CI at a few minutes)
# or "model-deep" (a long run before a release).
_MODEL = dict(deadline=None, print_blob=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
settings.register_profile("model-ci", max_examples=8, stateful_step_count=30, database=None, **_MODEL)
settings.register_profile("model-deep", max_examples=300, stateful_step_count=80, **_MODEL)
# Every other hypothesis test: no per-example deadline and no "too slow" health check. Both time an
# example on the wall clock (200 ms by default), so on a loaded machine an example descheduled for a
# moment fails — or passes on the re-run and is reported "flaky" — though the code is right. What
# these tests check is behaviour, never speed; their own @settings (max_examples…) apply on top.
settings.register_profile("warden", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("warden")

# A fixed instant (2027-01-15T08:00:00Z) so snapshots and JSON are deterministic.
T0 = 1_800_000_000.0

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# Every PostgreSQL read snapshot must be re-run after a lost connection (store.storage.db.read_tx): under
# the suite — and the agent and console processes it starts, which inherit this — one that is not
# raises store.storage.db.UnretriedRead.
os.environ["WARDEN_STRICT_READS"] = "1"

PG_URL = os.environ.get("WARDEN_TEST_PG_URL", "").strip()
PG_SKIP = "PostgreSQL tests need a server: set WARDEN_TEST_PG_URL=postgresql://user@host:port/db (.ci/run starts one)"


def pg_admin():
    """An autocommit psycopg connection to the test server (for schemas, pg_terminate_backend...)."""
    import psycopg

    return psycopg.connect(PG_URL, autocommit=True)


def pg_schema_url(schema: str) -> str:
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options={quote('-csearch_path=' + schema, safe='')}"


class PgSchemas:
    """Creates throw-away schemas on the test server and drops them at the end of a test."""

    def __init__(self) -> None:
        self.made: list[str] = []
        self._admin = None

    def new(self) -> str:
        if self._admin is None:
            self._admin = pg_admin()
        name = "wt_" + uuid.uuid4().hex[:16]
        self._admin.execute(f'CREATE SCHEMA "{name}"')
        self.made.append(name)
        return pg_schema_url(name)

    def drop(self) -> None:
        if self._admin is None:
            return
        for name in self.made:
            self._admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request) -> str:
    if request.param == "postgres" and not PG_URL:
        pytest.skip(PG_SKIP)
    return request.param


@pytest.fixture
def pg_only() -> str:
    """A test that is about PostgreSQL only: skipped (saying why) without a server."""
    if not PG_URL:
        pytest.skip(PG_SKIP)
    return PG_URL


@pytest.fixture
def new_target(backend, tmp_path) -> Callable[[str], str]:
    """A factory: ``new_target(name)`` → a target for a new, empty ledger on this test's backend
    (a file path under tmp_path, or a URL to a fresh PostgreSQL schema)."""
    if backend == "sqlite":
        yield lambda name="ledger": str(tmp_path / f"{name}.db")
        return
    schemas = PgSchemas()
    yield lambda name="ledger": schemas.new()
    schemas.drop()


@pytest.fixture
def pg_target(pg_only) -> Callable[[str], str]:
    """Like ``new_target`` but always PostgreSQL (for PostgreSQL-only tests)."""
    schemas = PgSchemas()
    yield lambda name="ledger": schemas.new()
    schemas.drop()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def ledger_path(new_target) -> str:
    return new_target("ledger")


@pytest.fixture
def sqlite_only(backend) -> None:
    """Marks a test of SQLite-only behaviour (files, WAL, mode=ro): its PostgreSQL variant skips."""
    if backend != "sqlite":
        pytest.skip("SQLite-only behaviour (files, WAL, mode=ro, symlinks)")


@pytest.fixture
def ledger(ledger_path, clock):
    led = Ledger.open(ledger_path, clock=clock)
    yield led
    led.close()


# ---------------------------------------------------------------------- a loaded machine
# No test may depend on the machine being idle: waits are on conditions, their deadlines are
# safety nets stretched by the machine's slowdown (tests/support/waiting.py), and a bound that is
# the point of a test is scaled the same way or compared with a baseline of the same test. The
# machine's speed is measured once, here, and handed to the workers (and the processes tests start)
# through the environment, so every part of the session scales by the same figure.
def pytest_configure(config) -> None:
    from tests.support import waiting

    os.environ[waiting.SPEED_ENV] = f"{waiting.machine_speed():.3f}"
    _stretch_textual_pilot(waiting.stretch)


def _stretch_textual_pilot(stretch: Callable[[float], float]) -> None:
    """Textual's pilot (``app.run_test``) waits up to 30 s on the wall clock for the screen to take
    its pending messages after each key and pause, then raises ``WaitForScreenTimeout``: a safety
    net like ours, stretched the same way."""
    try:
        from textual.pilot import Pilot
    except ImportError:  # pragma: no cover - textual is a dependency
        return
    real = Pilot._wait_for_screen
    if getattr(real, "stretched", False):
        return

    async def wait_for_screen(self, timeout: float = 30.0) -> bool:
        return await real(self, stretch(timeout))

    wait_for_screen.stretched = True  # type: ignore[attr-defined]
    Pilot._wait_for_screen = wait_for_screen  # type: ignore[method-assign]


def pytest_report_header(config) -> str:
    from tests.support import waiting

    return (f"machine: {waiting.machine_speed():.2f}× the reference's CPU time, load {os.getloadavg()[0]:.1f} "
            f"on {waiting.cpus()} CPUs (safety nets ×{waiting.slowdown():.1f} now; tests/support/waiting.py)")


# ---------------------------------------------------------------------- parallel runs (pytest-xdist)
# The suite runs on two workers (pyproject addopts: -n 2 --dist loadgroup). Tests that drive a real
# terminal, a browser or the demo's process tree measure nothing but still wait on screens with
# generous deadlines; they share one worker so two of them never compete for the CPU with each
# other. Everything else (ledger races included: they synchronise on conditions) spreads freely.
SERIAL_FILES = frozenset({
    "test_alerts_pty.py", "test_demo.py", "test_demo_agents.py", "test_keys_pty.py", "test_live.py",
    "test_serve_browser.py", "test_serve_http.py", "test_serve_cli.py", "test_sizes_terminals.py",
    "test_terminal_safety.py", "test_typeahead.py", "test_console_connections.py", "test_postgres_console.py",
    "test_cli_conventions.py", "test_hostile_console_pty.py", "test_outage_line.py", "test_demo_alarms.py",
    "test_control_pty.py", "test_plain_terminal.py",
})


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if item.path.name in SERIAL_FILES:
            item.add_marker(pytest.mark.xdist_group("terminal"))
