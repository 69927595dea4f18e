"""`charge_reads`: the charge's one read answers what the tables hold — a unit charged before
(stored) or never (zeros), public units, the notion's default limit, the strictness flag, the
needs-repair flag, release ids charged before — and an analyst's rows alongside."""

from __future__ import annotations

import pytest

from pcor_sql.core.accounting import OcdpCost
from pcor_sql.ledger.charge_reads import by_tag, read_state, read_state_with
from pcor_sql.ledger.charge_rules import NEEDS_REPAIR, ChargeItem, UnitRow
from pcor_sql.ledger.quota_rules import ALL_DATASETS, quota_datasets, quota_state
from ledger_helpers import raw
from pcor_sql.ledger.records import new_release_id
from pcor_sql.ledger.transactions import utc_now

pytestmark = pytest.mark.filterwarnings("ignore::pcor_sql.errors.PrivacyWarning")


def item(epsilon: float) -> ChargeItem:
    return ChargeItem(new_release_id(), OcdpCost(epsilon), "pcor/bfs/tight", "id = 42")


def test_the_state_of_stored_new_and_public_units(ledger):
    charged = item(0.25)
    ledger.reserve("t", [charged]).answered()
    ledger.set_public("lookup", True)
    state = ledger.read_with(lambda ops: read_state(ops, ("lookup", "new", "t"), "ocdp", [charged.release_id, "never"]))
    assert state.rows == (UnitRow("lookup", None, 0.0, 0.0, 0, True, False), UnitRow("new", None, 0.0, 0.0, 0, False, False),
                          UnitRow("t", None, 0.25, pytest.approx(0.0), 1, False, True))
    assert state.seen == {charged.release_id: (frozenset({"t"}), 0.25)}
    assert (state.default_limit, state.strict, state.needs_repair) == (None, False, False)


def test_limits_defaults_and_the_repair_flag(ledger):
    def read_state_now():
        return ledger.read_with(lambda ops: read_state(ops, ("t",), "ocdp", []))

    ledger.set_default_limit(2.0, "dp")
    state = read_state_now()
    assert (state.default_limit, state.strict) == (None, True)  # a default of another notion makes it strict
    ledger.set_default_limit(3.0, "ocdp")
    ledger.set_limit("t", 1.5)
    state = read_state_now()
    assert (state.default_limit, state.strict, state.rows[0].limit, state.rows[0].stored) == (3.0, True, 1.5, True)
    raw(ledger, "INSERT INTO pcor.settings VALUES ($1, 1, $2)", [NEEDS_REPAIR, utc_now()])
    assert read_state_now().needs_repair


def test_an_analysts_rows_in_the_same_read(ledger):
    from pcor_sql.ledger.analysts import add_analyst

    def read_for(analyst):
        return ledger.read_with(lambda ops: read_state_with(ops, ("t",), "ocdp", [], analyst, quota_datasets(["people"])))

    _, found = read_for("nobody")
    assert quota_state("nobody", "ocdp", found).exists is False
    add_analyst(ledger, "ana", quota=0.5)
    _, found = read_for("ana")
    ana = quota_state("ana", "ocdp", found)
    assert (ana.exists, ana.revoked, ana.allowed, ana.rows[ALL_DATASETS].limit) == (True, False, None, 0.5)
    raw(ledger, "UPDATE pcor.analysts SET datasets = $1, revoked_at = $2 WHERE name = 'ana'", [["people"], utc_now()])
    _, found = read_for("ana")
    ana = quota_state("ana", "ocdp", found)
    assert (ana.exists, ana.revoked, ana.allowed) == (True, True, ("people",))


def test_rows_of_either_store_group_by_their_tag_in_order():
    # psycopg hands back tuples, DuckDB tuples or lists: the tag goes, the rest stays a tuple in read order
    rows = [("b", "t", 1.0, 0.5, 0.0, 2, None), ["s", "default_limit_dp", 3.0, None, None, None, None],
            ("b", "u", None, 0.0, 0.0, 0, None)]
    assert by_tag(rows) == {"b": [("t", 1.0, 0.5, 0.0, 2, None), ("u", None, 0.0, 0.0, 0, None)],
                            "s": [("default_limit_dp", 3.0, None, None, None, None)]}
    assert by_tag([]) == {}
