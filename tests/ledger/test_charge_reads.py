"""`charge_reads`: the charge's one SELECT answers what the tables hold — a unit charged before
(stored) or never (zeros), public units, the notion's default limit, the strictness flag, the
needs-repair flag, release ids charged before — and an analyst's rows alongside."""

from __future__ import annotations

import pytest

from pcor_sql.core.accounting import OcdpCost
from pcor_sql.ledger.charge_reads import read_state, read_state_with
from pcor_sql.ledger.charge_rules import NEEDS_REPAIR, ChargeItem, UnitRow
from pcor_sql.ledger.quota_rules import ALL_DATASETS, quota_params, quota_parts, quota_state
from pcor_sql.ledger.records import new_release_id

pytestmark = pytest.mark.filterwarnings("ignore::pcor_sql.errors.PrivacyWarning")


def item(epsilon: float) -> ChargeItem:
    return ChargeItem(new_release_id(), OcdpCost(epsilon), "pcor/bfs/tight", "id = 42")


def test_the_state_of_stored_new_and_public_units(con, ledger):
    charged = item(0.25)
    ledger.reserve("t", [charged]).answered()
    ledger.set_public("lookup", True)
    cur = con.cursor()
    state = read_state(cur, ledger.tables, ("lookup", "new", "t"), "ocdp", [charged.release_id, "never"])
    assert state.rows == (UnitRow("lookup", None, 0.0, 0.0, 0, True, False), UnitRow("new", None, 0.0, 0.0, 0, False, False),
                          UnitRow("t", None, 0.25, pytest.approx(0.0), 1, False, True))
    assert state.seen == {charged.release_id: (frozenset({"t"}), 0.25)}
    assert (state.default_limit, state.strict, state.needs_repair) == (None, False, False)


def test_limits_defaults_and_the_repair_flag(con, ledger):
    cur = con.cursor()
    ledger.set_default_limit(2.0, "dp")
    state = read_state(cur, ledger.tables, ("t",), "ocdp", [])
    assert (state.default_limit, state.strict) == (None, True)  # a default of another notion makes it strict
    ledger.set_default_limit(3.0, "ocdp")
    ledger.set_limit("t", 1.5)
    state = read_state(cur, ledger.tables, ("t",), "ocdp", [])
    assert (state.default_limit, state.strict, state.rows[0].limit, state.rows[0].stored) == (3.0, True, 1.5, True)
    con.execute(f"INSERT INTO pcor.settings VALUES ('{NEEDS_REPAIR}', 1, now()::TIMESTAMP)")
    assert read_state(cur, ledger.tables, ("t",), "ocdp", []).needs_repair


def test_an_analysts_rows_in_the_same_read(con, ledger):
    from pcor_sql.ledger.analysts import add_analyst

    cur = con.cursor()
    parts, params = quota_parts(ledger.tables), quota_params("nobody", ["people"])
    _, found = read_state_with(cur, ledger.tables, ("t",), "ocdp", [], parts, params)
    assert quota_state("nobody", "ocdp", found).exists is False
    add_analyst(ledger, "ana", quota=0.5)
    _, found = read_state_with(cur, ledger.tables, ("t",), "ocdp", [], parts, quota_params("ana", ["people"]))
    ana = quota_state("ana", "ocdp", found)
    assert (ana.exists, ana.revoked, ana.allowed, ana.rows[ALL_DATASETS].limit) == (True, False, None, 0.5)
    con.execute("UPDATE pcor.analysts SET datasets = ['people'], revoked_at = now()::TIMESTAMP WHERE name = 'ana'")
    _, found = read_state_with(cur, ledger.tables, ("t",), "ocdp", [], parts, quota_params("ana", ["people"]))
    ana = quota_state("ana", "ocdp", found)
    assert (ana.exists, ana.revoked, ana.allowed) == (True, True, ("people",))
