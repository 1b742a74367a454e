"""Supervising agent frameworks with the ledger: :mod:`store.adapters.langgraph` (``pip install
'warden[langgraph]'``). Nothing here is imported until asked for, so the store does not need the
frameworks installed."""
