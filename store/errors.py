"""Typed errors of the store. Each carries a one-line human message; the CLI prints that line.

The message is made safe once, here (``store.text.safe_line``: control, bidi and zero-width
characters as visible escapes — ``\\u202e``, ``\\x1b``), whatever the raising code put in it: a
value an agent or an operator wrote (a worker name, an effect key, an option id, a time that is not
one) can never reach a terminal, a log or a JSON error raw through a store refusal. Escaping is
idempotent, so a caller that quoted a value already (``validate.show``) loses nothing.
"""

from __future__ import annotations

from store.text import safe_line


class WardenError(Exception):
    """Base of every error the store raises on purpose. ``str(e)`` is one line for a human."""

    def __init__(self, message: str) -> None:
        message = safe_line(str(message).replace("\r\n", " ").replace("\n", " "))  # one line, nothing raw (U+2028 escaped)
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:  # always one line
        return self.message


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


class InvalidValue(Refused):
    """A value an agent, operator or script passed that Warden cannot accept (a malformed id, a
    number that is not finite or out of range, a value that is not JSON...). Raised before anything
    is written. ``argument`` names the offending argument."""

    def __init__(self, message: str, argument: str = "") -> None:
        super().__init__(message)
        self.argument = argument


class ReadOnly(Refused):
    """A write was attempted on a ledger opened read-only."""


class LedgerUnavailable(WardenError):
    """The ledger cannot be used: missing, corrupt, not a Warden database, or unreachable (the
    connection lost for longer than the reconnect budget; a lock not had within the busy timeout;
    an I/O error)."""


class LedgerBusy(LedgerUnavailable):
    """A lock was not had within the busy timeout (``Ledger.open(busy_timeout_s=...)``); nothing
    was written."""


class ConnectionLost(LedgerUnavailable):
    """The PostgreSQL connection dropped inside a transaction (which is therefore gone).
    ``in_doubt``: it dropped while committing, so the transaction may have committed. The store
    re-runs the transaction itself (resolving the doubt first); an agent only sees this when it
    escapes a path that cannot be re-run, and then it is a ``LedgerUnavailable`` like any other."""

    def __init__(self, message: str, *, in_doubt: bool = False) -> None:
        super().__init__(message)
        self.in_doubt = in_doubt


class WriteConflict(WardenError):
    """PostgreSQL kept aborting a write (deadlock or serialization failure) past the retry bound;
    nothing was written."""
