"""The ledger's units and notions: a charge to several units, totals kept per notion, strict
limits once any exists, default limits, public units, seeded and analyst charges recorded."""

from __future__ import annotations

import duckdb
import pytest

from pcor_sql.core.accounting import DpCost, OcdpCost, SpCost
from pcor_sql.ledger.store import ChargeItem, Ledger, new_release_id
from pcor_sql.errors import BudgetExceeded, InternalError, Refused, UserError

from ledger_helpers import charge_items


@pytest.fixture
def ledger():
    con = duckdb.connect()
    yield Ledger(con, warn=lambda message: None)
    con.close()


def item(cost, **kw) -> ChargeItem:
    return ChargeItem(new_release_id(), cost, "m", **kw)


def test_a_join_charges_every_unit_it_reads(ledger):
    charge_items(ledger, ["t1", "t2"], [item(OcdpCost(0.25))])
    assert ledger.status("t1").spent == ledger.status("t2").spent == 0.25
    assert {r.unit for r in ledger.history()} == {"t1", "t2"}
    ledger.set_limit("t1", 1.0)
    ledger.set_limit("t2", 0.5)
    # The unit with the least headroom decides; a refusal writes to neither.
    with pytest.raises(BudgetExceeded, match="'t2'"):
        charge_items(ledger, ["t1", "t2"], [item(OcdpCost(0.5))])
    assert ledger.status("t1").spent == 0.25
    reservation = ledger.reserve(["t2", "t1"], [item(OcdpCost(0.25))])
    assert (reservation.spent, reservation.limit) == (0.5, 0.5)


def test_notions_are_kept_apart_and_never_added(ledger):
    charge_items(ledger, "t", [ChargeItem("a", OcdpCost(0.4), "pcor")])
    charge_items(ledger, "t", [ChargeItem("b", DpCost(0.3), "dp")])
    charge_items(ledger, "t", [ChargeItem("c", SpCost(0.2, 3), "sp")])
    spent = {n: ledger.status("t", n).spent for n in ("ocdp", "dp", "sp")}
    assert spent == {"ocdp": 0.4, "dp": 0.3, "sp": 0.2}
    assert [r.k for r in ledger.history("t")] == [None, None, 3]
    ledger.set_limit("t", 0.5, "dp")
    ledger.set_limit("t", 0.5, "ocdp")
    ledger.set_limit("t", 0.5, "sp")
    # 0.4 + 0.3 + 0.2 would pass 0.5 if added; per notion each still fits 0.1 more.
    for cost in (OcdpCost(0.1), DpCost(0.1), SpCost(0.1, 3)):
        charge_items(ledger, "t", [item(cost)])
    with pytest.raises(InternalError, match="mixes"):
        charge_items(ledger, "t", [item(OcdpCost(0.1)), item(DpCost(0.1))])
    with pytest.raises(UserError, match="notion"):
        ledger.set_limit("t", 1.0, "ocdp+dp")


def test_a_ledger_with_any_limit_refuses_units_without_one(ledger):
    charge_items(ledger, "free", [ChargeItem("before", OcdpCost(5.0), "m")])  # no limit anywhere yet
    ledger.set_limit("guarded", 1.0)
    assert ledger.strict()
    with pytest.raises(Refused, match="'free' has no ocdp limit") as refused:
        charge_items(ledger, "free", [ChargeItem("after", OcdpCost(0.1), "m")])
    assert "set-limit" in refused.value.fix and "default-limit" in refused.value.fix
    with pytest.raises(Refused):
        charge_items(ledger, "guarded", [ChargeItem("dp", DpCost(0.1), "m")])  # no dp limit of its own
    ledger.set_default_limit(6.0)
    charge_items(ledger, "free", [ChargeItem("after", OcdpCost(0.5), "m")])
    status = ledger.status("free")
    assert (status.limit, status.limit_source, status.spent) == (6.0, "default", 5.5)
    with pytest.raises(BudgetExceeded):
        charge_items(ledger, "free", [ChargeItem("over", OcdpCost(0.6), "m")])
    ledger.set_default_limit(None)
    assert ledger.status("free").limit is None


def test_a_default_limit_alone_makes_the_ledger_strict(ledger):
    assert not ledger.strict()
    ledger.set_default_limit(0.3, "dp")
    assert ledger.strict()
    charge_items(ledger, "u", [ChargeItem("x", DpCost(0.3), "m")])
    with pytest.raises(BudgetExceeded):
        charge_items(ledger, "u", [ChargeItem("y", DpCost(0.01), "m")])
    with pytest.raises(Refused):  # no ocdp limit, and the ledger holds limits
        charge_items(ledger, "u", [ChargeItem("z", OcdpCost(0.01), "m")])


def test_public_units_are_never_charged(ledger):
    ledger.set_limit("facts", 0.1)
    ledger.set_public("lookup")
    charge_items(ledger, ["facts", "lookup"], [item(OcdpCost(0.1))])
    assert ledger.status("lookup").spent == 0.0 and ledger.status("lookup").public
    assert [r.unit for r in ledger.history()] == ["facts"]
    charge_items(ledger, ["lookup"], [item(OcdpCost(9.0))])  # only public data: nothing to charge
    assert ledger.history("lookup") == ()
    ledger.set_public("lookup", False)
    with pytest.raises(Refused):
        charge_items(ledger, ["lookup"], [item(OcdpCost(0.1))])


def test_seeded_and_analyst_charges_are_recorded_as_such(ledger):
    charge_items(ledger, "t", [item(OcdpCost(0.1), seeded=True, dataset="sal"),
                             item(OcdpCost(0.1), role="analyst", dataset="sal")])
    first, second = ledger.history("t")
    assert (first.seeded, first.role, first.dataset) == (True, "owner", "sal")
    assert (second.seeded, second.role) == (False, "analyst")
    with pytest.raises(InternalError):
        charge_items(ledger, "t", [item(OcdpCost(0.1), role="guest")])


def test_a_release_id_charged_to_other_units_is_a_bug(ledger):
    charge_items(ledger, ["a", "b"], [ChargeItem("r1", OcdpCost(0.2), "m")])
    assert charge_items(ledger, ["b", "a"], [ChargeItem("r1", OcdpCost(0.2), "m")]) == 0.2  # a retry: no-op
    with pytest.raises(InternalError):
        charge_items(ledger, ["a"], [ChargeItem("r1", OcdpCost(0.2), "m")])
