"""How a ``warden`` command fails: one exit code and one error code per kind of failure, one clear
line on stderr, and with ``--json`` one JSON object on stdout. docs/console.md has the tables.

======================  ====  ===============================================================
error code              exit  when
======================  ====  ===============================================================
``usage``               2     the command line is wrong (unknown flag, missing value, a flag
                              the subcommand does not take)
``not_found``           3     no such task, node, handoff, run or record
``unavailable``         4     the ledger cannot be used: missing, not a ledger, unreadable,
                              a bad URL, the server unreachable, permission denied
``schema``              4     the ledger's schema is newer (upgrade Warden) or older
                              (``warden migrate``)
``invalid``             1     a value the store refuses (a malformed id, a time that is not one)
``refused``             1     understood but not allowed (an empty reason, an aborted task...)
``stale``               1     the ledger changed since the preview; nothing was applied
``read_only``           1     a write on a ledger opened read-only
``lease_lost``          1     an agent write whose lease is gone
``conflict``            1     PostgreSQL kept aborting the write; nothing was written
``not_confirmed``       1     an action without ``--yes`` and without a terminal, or declined
``failed``              1     any other failure (a file that cannot be written...)
``interrupted``         130   Ctrl+C
``internal``            1     a bug in Warden (the line says how to get the traceback)
======================  ====  ===============================================================

``warden recover`` exits 0 only for ``reuse_existing_artifact`` and ``warden verify-record`` 0 only
on pass: their ``--json`` output is then the result, not an error object.
"""

from __future__ import annotations

import json
import sqlite3
import sys

from store.errors import (
    InvalidValue,
    LeaseLost,
    LedgerUnavailable,
    NotFound,
    ReadOnly,
    Refused,
    SchemaMismatch,
    StaleRevision,
    WardenError,
    WriteConflict,
)
from store.jsontypes import JsonObject

from ..text import safe_line

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNAVAILABLE = 4
EXIT_INTERRUPTED = 130

# (exception type, error code, exit code): the first that matches wins (subclasses first).
KINDS: tuple[tuple[type[BaseException], str, int], ...] = (
    (NotFound, "not_found", EXIT_NOT_FOUND),
    (SchemaMismatch, "schema", EXIT_UNAVAILABLE),
    (LedgerUnavailable, "unavailable", EXIT_UNAVAILABLE),
    (StaleRevision, "stale", EXIT_FAILED),
    (ReadOnly, "read_only", EXIT_FAILED),
    (InvalidValue, "invalid", EXIT_FAILED),
    (LeaseLost, "lease_lost", EXIT_FAILED),
    (WriteConflict, "conflict", EXIT_FAILED),
    (Refused, "refused", EXIT_FAILED),
    (WardenError, "failed", EXIT_FAILED),
)
CODES = ("usage", "not_found", "unavailable", "schema", "invalid", "refused", "stale", "read_only", "lease_lost",
         "conflict", "not_confirmed", "failed", "interrupted", "internal")


class UsageError(Exception):
    """A usage error: exit 2."""


class CliFailure(Exception):
    """A failure the CLI itself decides (not a store error): its code, exit status and one line."""

    def __init__(self, message: str, code: str = "failed", exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = exit_code


def _driver_error(e: BaseException) -> bool:
    """A database driver's own error that escaped the store (sqlite3, Peewee, psycopg): the ledger
    could not be read. Recognised by module, so the console never imports Peewee."""
    if isinstance(e, sqlite3.Error):
        return True
    return any(t.__module__.split(".")[0] in ("peewee", "psycopg", "psycopg2") for t in type(e).__mro__)


def classify(e: BaseException, *, ledger: str = "") -> tuple[str, int, str]:
    """(error code, exit status, one line) for an exception that ended a command (``ledger``:
    how to name the ledger, already escaped and its password masked)."""
    if isinstance(e, UsageError):
        return "usage", EXIT_USAGE, str(e)
    if isinstance(e, CliFailure):
        return e.code, e.exit_code, str(e)
    if isinstance(e, KeyboardInterrupt):
        return "interrupted", EXIT_INTERRUPTED, "warden: interrupted"
    for kind, code, status in KINDS:
        if isinstance(e, kind):
            return code, status, f"warden: {e}"
    if _driver_error(e):
        name = f" {ledger}" if ledger else ""
        return "unavailable", EXIT_UNAVAILABLE, f"warden: cannot read the ledger{name}: {' '.join(str(e).split())}"
    if isinstance(e, OSError):
        where = f" {e.filename}" if e.filename else ""
        return "failed", EXIT_FAILED, f"warden:{where}: {e.strerror or type(e).__name__}"
    return ("internal", EXIT_FAILED, f"warden: internal error: {type(e).__name__}: {' '.join(str(e).split())} "
            "(set WARDEN_DEBUG=1 for the traceback)")


def report(e: BaseException, *, as_json: bool, ledger: str = "") -> int:
    """Say what failed — one safe line on stderr, and with ``--json`` one JSON object on stdout
    ``{"error": {"code", "message"}}`` — and return the exit status."""
    code, status, line = classify(e, ledger=ledger)
    line = safe_line(line, limit=2000)
    if as_json and not getattr(e, "json_printed", False):  # (already part of the command's one object)
        write_json({"error": {"code": code, "message": line.removeprefix("warden: ")}})
    try:
        print(line, file=sys.stderr)
    except (BrokenPipeError, ValueError):
        pass
    return status


def write_json(obj: JsonObject) -> None:
    try:
        sys.stdout.write(json.dumps(obj, ensure_ascii=True) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass


__all__ = ["CODES", "CliFailure", "EXIT_FAILED", "EXIT_NOT_FOUND", "EXIT_OK", "EXIT_UNAVAILABLE", "EXIT_USAGE",
           "UsageError", "classify", "report"]
