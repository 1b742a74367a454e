"""Typed errors of the store. Each carries a one-line human message; the CLI prints that line."""

from __future__ import annotations


class WardenError(Exception):
    """Base of every error the store raises on purpose. ``str(e)`` is one line for a human."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:  # always one line
        return self.message.replace("\n", " ")


class LeaseLost(WardenError):
    """The claim's lease token is no longer current (expired, revoked, task parked/aborted)."""


class StaleRevision(WardenError):
    """The ledger changed since a plan was computed; the plan was not applied."""


class SchemaMismatch(WardenError):
    """The ledger was written by another schema version (newer: refused; older: migrate)."""


class NotFound(WardenError):
    """An unknown task, node, handoff, run or record."""


class Refused(WardenError):
    """A request that is understood but not allowed (empty reason, aborted task, cycle, ...)."""


class ReadOnly(Refused):
    """A write was attempted on a ledger opened read-only."""


class LedgerUnavailable(WardenError):
    """The ledger is missing, corrupt, or not a database Warden can read."""


class WriteConflict(WardenError):
    """PostgreSQL kept aborting a write (deadlock or serialization failure) past the retry bound;
    nothing was written."""
