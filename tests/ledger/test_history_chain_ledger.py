"""The history chain in a ledger, on both stores (DESIGN.md §11 "A tamper-evident history"):
every write of the history is chained, any edit of a row by SQL is named by `verify` and refuses
releases until `repair`, and `migrate` builds the chain of a ledger from the version before it."""

from __future__ import annotations

import datetime as dt
import warnings

import duckdb
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pcor_sql.core.accounting import DpCost, OcdpCost
from pcor_sql.errors import PrivacyWarning, Refused, UserError
from pcor_sql.ledger.charge_rules import ChargeItem
from pcor_sql.ledger.consistency import Mismatch
from pcor_sql.ledger.history_chain import FIELDS, Anchor, ChainDifference
from pcor_sql.ledger.outcomes import OUTCOMES
from pcor_sql.ledger.store import Ledger

from ledger_helpers import raw
from old_layouts import BEFORE_CHAIN

pytestmark = pytest.mark.filterwarnings("ignore::pcor_sql.errors.PrivacyWarning")

#: The consistent rewrite: every ε halved, spent_after and the totals fixed to match.
HALVE = ("UPDATE pcor.history SET epsilon = epsilon / 2, spent_after = spent_after / 2",
         "UPDATE pcor.budget SET spent_epsilon = spent_epsilon / 2, spent_residual = spent_residual / 2")


def item(rid: str, epsilon: float, cost=OcdpCost) -> ChargeItem:
    return ChargeItem(rid, cost(epsilon), "pcor/bfs/tight", record_key="id = 42", statement="SELECT 1")


def charge_all(ledger: Ledger) -> Ledger:
    """t and u charged: r1 answered (both units), r2 failed and refunded, r3 answered, r4 under DP."""
    ledger.reserve(["t", "u"], [item("r1", 0.25)]).answered()
    ledger.reserve("t", [item("r2", 0.125)]).failed("data", refund=True)
    ledger.reserve("t", [item("r3", 0.5)]).answered()
    ledger.reserve("t", [item("r4", 0.0625, DpCost)]).answered()
    return ledger


def charged(con) -> Ledger:
    return charge_all(Ledger(con))


def kinds(ledger: Ledger, unit: str | None = None, notion: str | None = None):
    """The kinds of the chain entries, by (unit, notion), in link order."""
    out: dict[tuple[str, str], list[str]] = {}
    for u, n, kind in raw(ledger, "SELECT unit, notion, kind FROM pcor.history_chain ORDER BY unit, notion, link"):
        out.setdefault((u, n), []).append(kind)
    return out if unit is None else out.get((unit, notion), [])


def differences(ledger: Ledger) -> list[ChainDifference]:
    return [d for d in ledger.verify() if isinstance(d, ChainDifference)]


def test_every_write_of_the_history_is_chained_and_verifies(ledger):
    charge_all(ledger)
    assert ledger.verify() == []
    assert kinds(ledger) == {("t", "dp"): ["charge", "change"], ("t", "ocdp"): ["charge", "change"] * 3,
                             ("u", "ocdp"): ["charge", "change"]}
    heads = ledger.chain_heads()
    assert heads[("t", "ocdp")].link == 6 and set(heads) == {("t", "dp"), ("t", "ocdp"), ("u", "ocdp")}


def test_a_consistent_rewrite_is_named_refused_put_back_and_recorded(ledger, reopen):
    charge_all(ledger)
    anchor = [Anchor(u, n, h.link, h.hash) for (u, n), h in ledger.chain_heads().items()]
    for statement in HALVE:
        raw(ledger, statement)
    assert reopen().mismatches == ()  # the totals alone match the rewritten history
    found = differences(ledger)
    assert {(d.unit, d.notion, d.entry.split(" (")[0]) for d in found} == {
        ("t", "ocdp", "release r1"), ("t", "ocdp", "release r2"), ("t", "ocdp", "release r3"),
        ("u", "ocdp", "release r1"), ("t", "dp", "release r4")}
    assert {d.problem for d in found} == {"epsilon, spent_after differ from the chain"}
    with pytest.raises(Refused, match="hash"):
        ledger.reserve("t", [item("r5", 0.1)])
    repaired = ledger.repair()
    assert sorted(d.entry for d in repaired if isinstance(d, ChainDifference)) == sorted(d.entry for d in found)
    assert {m.unit for m in repaired if isinstance(m, Mismatch)} == {"t", "u"}  # totals reset from the restored history
    assert ledger.verify(anchor) == []  # restored in place: the chain (and its kept heads) still hold
    assert (ledger.status("t").spent, ledger.status("u").spent, ledger.status("t", "dp").spent) == (0.75, 0.25, 0.0625)
    [(found_text,)] = raw(ledger, "SELECT content FROM pcor.history_chain WHERE kind = 'repair' AND unit = 'u'")
    assert "release r1 (seq 1): epsilon, spent_after differ from the chain" in found_text
    ledger.reserve("t", [item("r5", 0.1)]).answered()
    assert ledger.verify() == []


def test_an_edit_of_the_chain_itself_is_named_and_the_chain_made_again(ledger):
    charge_all(ledger)
    raw(ledger, "UPDATE pcor.history_chain SET content = replace(content, 'pcor/bfs/tight', 'x') WHERE link = 3"
                " AND unit = 't' AND notion = 'ocdp'")
    assert [d.entry for d in differences(ledger)] == [
        "chain entry 3 (release r2)", "chain entry 4 (release r2)", "release r2 (seq 2)"]
    ledger.repair()
    assert ledger.verify() == []
    assert kinds(ledger, "t", "ocdp") == ["rebuilt"] * 3 + ["repair"]


def test_rows_added_or_deleted_by_sql_are_named(ledger):
    charge_all(ledger)
    raw(ledger, "DELETE FROM pcor.history WHERE release_id = 'r3'")
    copied = ", ".join({"release_id": "'r9'", "seq": "9"}.get(f, f) for f in FIELDS)
    raw(ledger, f"INSERT INTO pcor.history ({', '.join(FIELDS)}) SELECT {copied} FROM pcor.history"
                " WHERE release_id = 'r1' AND unit = 'u'")
    assert [(d.unit, d.entry, d.problem.split(" (")[0]) for d in differences(ledger)] == [
        ("t", "release r3 (seq 3)", "is missing from the history"), ("u", "release r9 (seq 9)", "is not in the chain")]
    ledger.repair()
    assert ledger.verify() == [] and ledger.status("t").spent == 0.75  # r3 back, still charged
    assert ledger.status("u").spent == 0.5  # r9 kept: it only adds to what is spent


def test_two_writers_appending_to_one_chain_never_fork_it(ledger, reopen):
    """DESIGN.md §11: concurrent appends (threads, and on PostgreSQL two connections of two
    ledgers, as two services) each extend the other's entry; the chain verifies."""
    import threading

    other = reopen()
    errors: list[BaseException] = []

    def work(handle: Ledger, name: str) -> None:
        try:
            for i in range(6):
                handle.reserve("t", [item(f"{name}{i}", 0.01)]).answered()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(h, n)) for h, n in ((ledger, "a"), (other, "b"), (ledger, "c"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert ledger.verify() == []
    assert sorted(kinds(ledger, "t", "ocdp")) == ["change"] * 18 + ["charge"] * 18
    assert ledger.chain_heads()[("t", "ocdp")].link == 36


_TEXT = st.text(min_size=1, max_size=6)
_SQL_VALUES = {
    "seq": st.integers(1, 10**6), "k": st.none() | st.integers(1, 10**6), "pid": st.none() | st.integers(1, 10**6),
    "epsilon": st.floats(1e-300, 1e3), "spent_after": st.floats(-1e3, 1e3),
    "released_at": st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2100, 1, 1)),
    "finished_at": st.none() | st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2100, 1, 1)),
    "seeded": st.booleans(), "refunded": st.booleans(), "outcome": st.sampled_from(OUTCOMES),
}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([("r1", "t"), ("r1", "u"), ("r2", "t"), ("r3", "t"), ("r4", "t")]), st.sampled_from(FIELDS),
       st.data())
def test_any_single_field_change_by_sql_is_named(key, name, data):
    con = duckdb.connect()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            ledger = charged(con)
        rid, unit = key
        [(before,)] = con.execute(f"SELECT {name} FROM pcor.history WHERE release_id = $1 AND unit = $2",
                                  [rid, unit]).fetchall()
        value = data.draw(_SQL_VALUES.get(name, st.none() | _TEXT).filter(
            lambda v: v != before or type(v) is not type(before)))
        try:
            con.execute(f"UPDATE pcor.history SET {name} = $1 WHERE release_id = $2 AND unit = $3", [value, rid, unit])
        except duckdb.ConstraintException:
            assume(False)  # the table's own constraints refuse it (NOT NULL, CHECK, the key)
        found = differences(ledger)
        assert any(d.unit == unit and d.entry.startswith(f"release {rid} ") for d in found), found
        with pytest.raises(Refused):
            ledger.reserve("t", [item("next", 0.01)])
    finally:
        con.close()


def test_a_ledger_from_before_the_chain_is_refused_then_migrated_with_its_chain(tmp_path):
    path = tmp_path / "ledger.duckdb"
    con = duckdb.connect(str(path))
    charged(con)
    con.execute(BEFORE_CHAIN)  # the layout of the version before the chain, with its history
    con.close()
    con = duckdb.connect(str(path))
    ledger = Ledger(con)
    with pytest.raises(UserError, match="pcor.history_chain is missing"):
        ledger.reserve("t", [item("r5", 0.1)])
    report = ledger.migrate()
    assert set(report.created) == {"history_chain", "chain_heads", "leases"} and report.chained == 3
    assert "built the hash chain of 3 unit histories" in report.lines()
    assert ledger.verify() == []
    assert kinds(ledger, "t", "ocdp") == ["migrated"] * 3
    con.execute("UPDATE pcor.history SET epsilon = epsilon / 2, spent_after = spent_after / 2 WHERE release_id = 'r3'")
    con.execute("UPDATE pcor.budget SET spent_epsilon = spent_epsilon - 0.25 WHERE unit = 't' AND notion = 'ocdp'")
    assert [d.entry for d in differences(ledger)] == ["release r3 (seq 3)"]
    ledger.repair()
    ledger.reserve("t", [item("r5", 0.1)]).answered()
    assert ledger.verify() == [] and ledger.status("t").spent == pytest.approx(0.85)
    con.close()
