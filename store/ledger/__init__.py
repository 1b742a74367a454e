"""The ledger's write side, under the :class:`~store.facade.Ledger` facade:

* ``build``    create_task, add_node(s): keys, edges, cycles (``graph``: the pure graph algorithms)
* ``claims``   claiming ready nodes under the budget governor
* ``fenced``   the agent's lease-fenced writes: heartbeat, commit, fail, handoff, effects, notes
* ``observe``  a heartbeat's bookkeeping: new information (bounded), its own interval, declared waits
* ``cost``, ``unsafe``, ``repair``, ``compensation``, ``lost``, ``waits``: the judgements a write
  acts on (cost density, work that cannot run twice, the repair loop, compensations as work), why a
  lease was lost, waiting for a person
* ``queries``  the facade's reads: tasks, graphs (whole or in pages), nodes, the journal, handoffs
* ``rules``    the argument rules of the public API (checked once, in ``store/checked.py``)

The floor they stand on (the open database, the journal writer, the rows) is ``store.storage``;
the operator actions (plan → preview → apply) live in ``store.actions``, above these parts; the
facade sits above both, so importing a part never imports the facade (``from store import
Ledger``).
"""
