"""Estimation: P80 remaining-time estimates that say their sample count and their confidence.

``estimates`` (per node and per task), ``durations`` (the estimator's memory: each kind's finished
durations), ``kindmodel`` (what a kind's history says about a fresh run, and its measured
calibration), ``montecarlo`` (the task's remaining time over its dependency graph), ``mixture`` and
``points`` (distributions as equal-probability points, clusters), ``evidence`` (the typed rows the
estimates and the signals read from the ledger).
"""
