"""Judges: pure judgements with no database, run when an agent writes and read back by the signals.

``novelty`` (what is new in an observation: the measure behind stall signals), ``concepts`` (what
a line of text is about, order ignored), ``budget`` (the budget gates and admission), ``density``
(tokens per unit of progress).
"""
