"""A checkpoint question for tests that are not about its parts: ``ask(ledger, claim, ...)`` is
``ledger.request_human`` with what a checkpoint must carry (store/ledger/checkpoint.py) filled in
where the call leaves it out — what was done, where it is stuck, each option's consequence, why
the recommendation or why there is none. Given parts are kept; ill-typed arguments pass through
untouched, so the ledger's refusals of them are still what a test sees."""

from __future__ import annotations

from typing import Any, Mapping

DONE = "the step's work so far (a test)"
STUCK = "a decision the test leaves to a person"


def parts(options: Any = None, recommendation: Any = None, context: Any = None) -> tuple[Any, Any]:
    """(options, context) with the missing parts filled."""
    if isinstance(options, list):
        options = [{**o, "consequence": f"the step goes on with {o['id']!s}"}
                   if isinstance(o, Mapping) and "id" in o and not o.get("consequence") else o for o in options]
    if context is None or isinstance(context, Mapping):
        ctx = dict(context or {})
        ctx.setdefault("done", DONE)
        ctx.setdefault("stuck", STUCK)
        if recommendation is None:
            ctx.setdefault("no_recommendation", "the test names none")
        else:
            ctx.setdefault("why", "the test's choice")
        context = ctx
    return options, context


def ask(ledger: Any, claim: Any, *args: Any, options: Any = (), recommendation: Any = None, context: Any = None,
        **kw: Any) -> Any:
    """``ledger.request_human(claim, ...)`` as a whole checkpoint."""
    options, context = parts(list(options) if isinstance(options, tuple) else options, recommendation, context)
    return ledger.request_human(claim, *args, options=options, recommendation=recommendation, context=context, **kw)


# warden mcp's ask_human: its parts as arguments, options with their consequences
MCP_PARTS = {"done": DONE, "stuck": STUCK, "no_recommendation": "the test names none"}


def mcp_options(*ids: str) -> list[dict[str, str]]:
    return [{"id": i, "consequence": f"the step goes on with {i}"} for i in ids]
