"""``warden`` as shipped (the CLI, the console, ``warden run``), stopped at one point until it is
killed: ``python -m tests.support.hang_at MARKER POINT WARDEN-ARGS…``. The marker file appears once
it is there (the test waits on it, then kills the process). Points:

* ``apply:ACTION`` — inside an operator action's write transaction, every row of it written (its
  operator event is the last);
* ``renewal`` — inside a take-back's write transaction (``claim(renew=)``: the lapsed lease taken
  back by its holder, store/ledger/claims.py), the node's new token written, not committed;
* ``renewed`` — ``warden run``'s supervisor just after a take-back committed, before it hands the
  new claim to its keeper (store/adapters/command.py)."""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable


def _hang_after(owner: Any, name: str, marker: str, when: Callable[..., bool]) -> None:
    """``owner.name`` made to call through, then — when ``when(result, *args, **kw)`` — hang."""
    original = getattr(owner, name)

    def hanging(*args: Any, **kw: Any) -> Any:
        out = original(*args, **kw)
        if when(out, *args, **kw):
            with open(marker, "w") as f:
                f.write("there")
            threading.Event().wait()  # until SIGKILL
        return out

    setattr(owner, name, hanging)


def main(argv: list[str]) -> int:
    marker, point, rest = argv[0], argv[1], argv[2:]
    if point.startswith("apply:"):
        from store.storage.core import LedgerCore

        kind = f"operator.{point.removeprefix('apply:')}"
        _hang_after(LedgerCore, "journal", marker, lambda out, self, t, n, a, s, payload, **kw: payload.event_kind() == kind)
    elif point == "renewal":
        from store.ledger import claims

        _hang_after(claims, "_renew", marker, lambda out, *a, **kw: True)
    elif point == "renewed":
        from store.adapters import command

        _hang_after(command, "reclaim", marker, lambda out, ledger, claim, **kw: out is not None and out.attempt == claim.attempt)
    else:
        raise SystemExit(f"unknown point {point!r}")
    from console.cli import main as warden

    return warden(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
