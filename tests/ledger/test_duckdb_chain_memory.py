"""The embedded store's chain heads kept in process (`ledger.duckdb_chain_memory`): an append from
a head that another writer moved meanwhile is refused and run again from the table, so the chain
never forks and still verifies; a repair or a failed transaction forgets what was kept."""

from __future__ import annotations

import warnings

import duckdb
import pytest

from pcor_sql.core.accounting import OcdpCost
from pcor_sql.errors import BudgetExceeded, PrivacyWarning
from pcor_sql.ledger.charge_rules import ChargeItem
from pcor_sql.ledger.records import new_release_id
from pcor_sql.ledger.store import Ledger



def _item(epsilon: float = 0.1) -> ChargeItem:
    return ChargeItem(new_release_id(), OcdpCost(epsilon), "bfs")


def _ledger(con: duckdb.DuckDBPyConnection) -> Ledger:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return Ledger(con)


def raw(con, query: str) -> list[tuple]:
    return con.execute(query).fetchall()


def _links(con) -> list[int]:
    return [link for (link,) in raw(con, "SELECT link FROM pcor.history_chain WHERE unit = 't' ORDER BY link")]


def test_two_stores_on_one_file_take_turns_on_a_chain_each_from_a_stale_head():
    """Each store keeps the head it committed; the other's appends make it stale every time."""
    con = duckdb.connect()
    first, second = _ledger(con), _ledger(con)
    first.set_limit("t", 100.0)
    for turn in range(6):
        ledger = (first, second)[turn % 2]
        ledger.reserve("t", [_item()]).answered()
    assert _links(con) == list(range(1, 13))  # 6 charges and 6 outcomes, no link twice, none skipped
    assert first.verify() == [] and second.verify() == []
    [(link, head)] = raw(con, "SELECT link, head FROM pcor.chain_heads WHERE unit = 't'")
    [(last,)] = raw(con, "SELECT entry_hash FROM pcor.history_chain WHERE unit = 't' AND link = 12")
    assert (link, head) == (12, last)


def test_a_head_rewritten_under_the_memory_is_found_and_read_again():
    """A chain head set by hand (same link, another hash) is not the kept one: the append is refused as a
    conflict, runs again from the table, and the chain then links to the head as it is."""
    con = duckdb.connect()
    ledger = _ledger(con)
    ledger.set_limit("t", 100.0)
    ledger.reserve("t", [_item()]).answered()
    [(link,)] = raw(con, "SELECT link FROM pcor.chain_heads WHERE unit = 't'")
    con.execute("UPDATE pcor.chain_heads SET head = $1 WHERE unit = 't'", ["f" * 64])
    ledger.reserve("t", [_item()]).answered()
    [(prev,)] = raw(con, f"SELECT prev_hash FROM pcor.history_chain WHERE unit = 't' AND link = {link + 1}")
    assert prev == "f" * 64  # read from the table, not the kept head
    assert ledger.verify() != []  # the hand edit is still found


def test_a_refused_charge_and_a_repair_leave_nothing_stale():
    con = duckdb.connect()
    ledger = _ledger(con)
    ledger.set_limit("t", 0.25)
    ledger.reserve("t", [_item()]).answered()
    with pytest.raises(BudgetExceeded):
        ledger.reserve("t", [_item(1.0)])
    con.execute("DELETE FROM pcor.history_chain WHERE unit = 't' AND link = 2")  # the outcome's entry
    assert ledger.verify() != []
    ledger.repair()
    assert ledger.verify() == []
    ledger.reserve("t", [_item()]).answered()  # after the repair rewrote the chain
    assert ledger.verify() == []
    assert _links(con) == list(range(1, len(_links(con)) + 1))


def test_a_charge_of_several_units_and_a_refund_chain_as_read():
    """The rows kept from the INSERT and the UPDATE (RETURNING) are those a read makes: verify folds the
    chain and compares it field by field with the history."""
    con = duckdb.connect()
    ledger = _ledger(con)
    for unit in ("a", "b", "c"):
        ledger.set_limit(unit, 10.0)
    for _ in range(3):
        ledger.reserve(["a", "b", "c"], [_item(), _item(0.2)]).answered()
    ledger.reserve(["a", "b"], [_item(), _item()]).failed("data", refund=True)
    ledger.reserve(["c"], [_item()]).settle({0: "data"}, refund=True)
    assert ledger.verify() == []
