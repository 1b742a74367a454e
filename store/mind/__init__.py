"""The task's mind: the half of the task's state that is not its graph.

* ``rules``    bounds and value rules of everything agent-written here
* ``views``    the frozen views (``MindState`` on the task row, requirements, entries, plan versions, memories)
* ``state``    the mind's counters on the task row, moved by commits: the drift run, alignment checks
* ``record``   requirements, conclusions and rejected paths, proposed memories (the writes)
* ``replan``   plan versions: add, remove, reorder, narrow, and the nodes in flight
* ``recall``   ``Claim.inputs["memory"]``: what the scheduler hands a node at claim time
* ``read``     the mind of a task, its plan history, the memories (the reads)
* ``signals``  ``drift_suspected`` and ``alignment_due``

Nothing is imported here, so the store's lower modules can import one part without the others.
"""
