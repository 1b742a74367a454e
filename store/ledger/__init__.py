"""The ledger's parts, under the :class:`~store.facade.Ledger` facade (``store/facade.py``) —

* ``core``     the open database, clock, journal writer, task/node rows (``LedgerCore``)
* ``rows``     database rows → frozen views
* ``build``    create_task, add_node(s): keys, edges, cycles
* ``claims``   claiming ready nodes under the budget governor
* ``fenced``   the agent's lease-fenced writes: heartbeat, commit, fail, handoff, effects, notes
* ``observe``  a heartbeat's bookkeeping: new information (bounded), its own interval, declared waits
* ``queries``  tasks, graphs (whole or in pages), nodes, the journal, handoffs, audit, artifacts
* ``checked``  every argument of every public ``Ledger`` method checked once

The operator actions (plan → preview → apply) live in ``store.actions``, which uses these parts;
the facade sits above both, so importing a part never imports the facade (``from store import
Ledger``).
"""

from ..novelty import normalise_lines
from .core import LedgerCore, digest_json, retry_delay, sha256_hex

__all__ = ["LedgerCore", "digest_json", "normalise_lines", "retry_delay", "sha256_hex"]
