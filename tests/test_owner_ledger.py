"""The owner's block for analysts and the ledger's integrity (Owner.add_analyst, analysts,
revoke_analyst, set_analyst_quota, verify_ledger, repair_ledger, migrate_ledger)."""

from __future__ import annotations

import warnings

import duckdb
import pytest

import pcor_sql
from pcor_sql.errors import PrivacyWarning, Refused, UserError
from pcor_sql.ledger.analysts import authenticate


@pytest.fixture
def ledger_url(store_kind, request):
    """None: the data file's own ledger; else a fresh PostgreSQL ledger's URL (DESIGN.md §11)."""
    return None if store_kind == "duckdb" else request.getfixturevalue("postgres_server").fresh_url()


@pytest.fixture
def owner(tmp_path, ledger_url):
    con = duckdb.connect(str(tmp_path / "data.duckdb"))
    con.execute("CREATE TABLE t AS SELECT i AS id, ['a', 'b', 'c'][i % 3 + 1] AS dept,"
                " CASE WHEN i = 42 THEN 900.0 ELSE 100.0 + i % 11 END AS pay FROM range(90) s(i)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield pcor_sql.Owner(con, ledger_url)
    con.close()


def test_analysts_through_the_owner(owner):
    owner.register("people", "t", key="id", metric="pay", by="dept", limit=5.0)
    token = owner.add_analyst("ana", quota=0.5, notion="ocdp", datasets=["people"])
    assert authenticate(owner.ledger, token).name == "ana"
    [info] = owner.analysts()
    assert (info.name, info.datasets, info.revoked) == ("ana", ("people",), False)
    assert [(u.notion, u.limit) for u in info.usage if u.dataset is None] == [("ocdp", 0.5), ("dp", None), ("sp", None)]
    owner.set_analyst_quota("ana", 0.2, notion="dp")
    assert {u.notion: u.limit for u in owner.analysts()[0].usage}["dp"] == 0.2
    assert owner.revoke_analyst("ana").revoked and authenticate(owner.ledger, token) is None
    with pytest.raises(UserError, match="no analyst named 'bob'"):
        owner.revoke_analyst("bob")


def test_verify_repair_and_migrate_through_the_owner(owner, ledger_url):
    owner.set_limit("t", 1.0)
    owner.explain_outlier("SELECT pay FROM t WHERE id = 42", epsilon=0.3, by="dept", verifier="grubbs")
    assert owner.verify_ledger() == () and not owner.migrate_ledger().changed
    owner.ledger.read_with(lambda ops: ops.raw("UPDATE pcor.budget SET spent_epsilon = 0"))
    reopened = pcor_sql.Owner(owner.con, ledger_url)
    [mismatch] = reopened.verify_ledger()
    assert (mismatch.spent_total, mismatch.history_sum) == (pytest.approx(0.0, abs=1e-12), pytest.approx(0.3))
    with pytest.raises(Refused, match=r"Owner.repair_ledger\(\)"):
        reopened.explain_outlier("SELECT pay FROM t WHERE id = 42", epsilon=0.3, by="dept", verifier="grubbs")
    assert [m.unit for m in reopened.repair_ledger()] == [mismatch.unit]
    assert reopened.spent("t") == pytest.approx(0.3) and reopened.verify_ledger() == ()
