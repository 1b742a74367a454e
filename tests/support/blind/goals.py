"""What the blind corpora's goal tests share: a family as a test parameter (slow; a strict expected
failure while it is listed as missing its goal, so it fails the day it is met until taken off the
list) and a healthy family's early stall alarms per form."""

from __future__ import annotations

from typing import Any

import pytest

from .runner import Corpus, run_blind


def family_params(names: list[str], misses: dict[str, str]) -> list[Any]:
    params = []
    for name in names:
        marks = [pytest.mark.slow]
        if name in misses:
            marks.append(pytest.mark.xfail(reason=f"goal not met yet: {misses[name]}", strict=True))
        params.append(pytest.param(name, marks=marks))
    return params


def early_alarms(path: str, name: str, *, seed: int, trials: int, corpus: Corpus | None = None) -> dict[str, list]:
    """Form → the early alarms of each trial of ``name`` that had any (a healthy family meets its goal
    when every list is empty)."""
    rep = run_blind(path, trials=trials, seed=seed, only=(name,), corpus=corpus)
    return {f.form: [o.early_alarms for o in f.outcomes if o.early_alarms] for f in rep.figures}
