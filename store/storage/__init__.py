"""Storage: the floor every other room stands on. Nothing here knows about claims, actions or
estimates.

* ``db``, ``backends``   opening a database (a path, ``sqlite:///`` or ``postgresql://``); the
  driver's errors made typed, lost connections re-made
* ``sql``                the one raw-SQL layer
* ``models``, ``tables``, ``schema``   the tables, their typed rows, their versions
* ``lockguard``, ``writegate``, ``sqlite_file``, ``pgshared``   the locks: never dropping this
  process's SQLite locks, writers taking turns, what a ledger file is, one PostgreSQL connection
  per process
* ``watch``, ``commitprobe``   noticing that a ledger may have changed (inotify, ``PRAGMA
  data_version``, LISTEN/NOTIFY)
* ``write_requests``     a retried write's recorded outcome
* ``checkpoints``        named points inside a write transaction, where a test may hold it open
* ``core``, ``rows``, ``budget_clock``   the ledger's core: an open database, its clock, the
  journal writer, the task and node rows; rows made into frozen views; the budget clock that stands
  still while a task waits
"""
