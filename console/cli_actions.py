"""Operator action subcommands (park, resume, narrow, rewind, abort, handoffs, resolve)."""


def register(sub, parents) -> None:
    """Filled in by the operator-actions work."""
