"""The read side: what the console and the ``warden`` command read from a ledger.

* ``feed``        the journal's cursor and its wake-ups (``store.storage.watch`` notices changes)
* ``signals``     every signal of a task: stall signals per node, with their evidence, and the
  task-level ones
* ``task_level``  the task-level signals that read the ledger: ``wake``, ``budget_insufficient``,
  an expired park
* ``analysis``    estimates and signals kept current for one task
* ``tally``       every task's row kept current from the journal
* ``cli_json``    the JSON shapes of ``warden status``, ``graph`` and ``events``
* ``task_report`` ``warden report``: what a task leaves behind
"""
