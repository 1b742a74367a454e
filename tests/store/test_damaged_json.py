"""A stored JSON value that is not JSON (a damaged row, a ledger written by something else) is
``LedgerUnavailable`` with one line wherever the store reads it, never a ``JSONDecodeError``
traceback: the claim's dependency outputs, a rewind's rejections, a narrow's preconditions and a
retried write's recorded outcome all decode through the store's checked path (``models.loads``)."""

from __future__ import annotations

import pytest

from store import Ledger, LedgerUnavailable, NodeSpec
from store.storage import sql, write_requests
from store.storage.db import write_tx

DAMAGED = '{"half": '


def damage(led: Ledger, column: str, key: str, text: str = DAMAGED) -> None:
    with write_tx(led.db):
        sql.execute(led.db, f"UPDATE node SET {column} = ? WHERE key = ?", [text, key])


def one_line(e: pytest.ExceptionInfo[LedgerUnavailable]) -> None:
    msg = str(e.value)
    assert "not JSON" in msg and "\n" not in msg and "Traceback" not in msg


def test_a_damaged_dependency_output_is_one_line_at_claim(ledger: Ledger) -> None:
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",))])
    ledger.commit(ledger.claim("t", "w"), output={"ok": True})
    damage(ledger, "output", "a")
    with pytest.raises(LedgerUnavailable) as e:
        ledger.claim("t", "w")
    one_line(e)


def test_damaged_rejections_are_one_line_at_rewind(ledger: Ledger) -> None:
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a")])
    ledger.commit(ledger.claim("t", "w"), output=1)
    damage(ledger, "rejections", "a")
    plan = ledger.plan_rewind("t", "a", reason="again")
    with pytest.raises(LedgerUnavailable) as e:
        ledger.apply(plan, operator="op")
    one_line(e)


def test_damaged_preconditions_are_one_line_at_narrow(ledger: Ledger) -> None:
    ledger.create_task("t", preconditions={"scope": ["all", "core"]})
    ledger.add_nodes("t", [NodeSpec("a", preconditions={"scope": "core"}), NodeSpec("b")])
    damage(ledger, "preconditions", "a", '{"scope":')  # still found by the name it mentions
    with pytest.raises(LedgerUnavailable) as e:
        ledger.plan_narrow("t", set={"scope": "ext"}, reason="ext only")
    one_line(e)


def test_a_damaged_write_record_is_one_line(ledger: Ledger) -> None:
    with write_tx(ledger.db):
        sql.execute(ledger.db, "INSERT INTO write_request (id, at, result) VALUES (?, ?, ?)", ["r1", 0.0, DAMAGED])
        sql.execute(ledger.db, "INSERT INTO write_request (id, at, result) VALUES (?, ?, ?)", ["r2", 0.0, '{"v":7}'])
    assert write_requests.recorded(ledger.db, "r2") == {"v": 7}
    assert write_requests.recorded(ledger.db, "nobody") is None
    with pytest.raises(LedgerUnavailable) as e:
        write_requests.recorded(ledger.db, "r1")
    one_line(e)


def test_a_write_record_that_is_json_but_not_an_object_is_one_line(ledger: Ledger) -> None:
    # A record is always an object (write_requests.encode); another JSON value was a TypeError in decode.
    with write_tx(ledger.db):
        sql.execute(ledger.db, "INSERT INTO write_request (id, at, result) VALUES (?, ?, ?)", ["r1", 0.0, "[1, 2]"])
    with pytest.raises(LedgerUnavailable) as e:
        write_requests.recorded(ledger.db, "r1")
    assert "not a JSON object" in str(e.value) and "\n" not in str(e.value)
