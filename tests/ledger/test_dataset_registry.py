"""The registry's releasable keys read whole (`releasable_set`, what an admission keeps) agree with
the key-by-key check (`all_releasable`) on every set of keys."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pcor_sql
from pcor_sql.ledger.dataset_registry import all_releasable, releasable_set, releasable_text

DECLARED = [3, 5, 8, 13, 21]


@pytest.fixture(scope="module")
def owner():
    con = duckdb.connect()
    con.execute("CREATE TYPE dept AS ENUM ('a', 'b'); CREATE TABLE t AS SELECT i AS id, (['a', 'b'])[i % 2 + 1]::dept"
                " AS dept, 100.0 * i AS pay FROM range(40) t(i)")
    owner = pcor_sql.Owner(con, warn=lambda message: None)
    owner.register("open", "t", key="id", metric="pay", by="dept", releasable=DECLARED)
    owner.register("closed", "t", key="id", metric="pay", by="dept")
    yield owner
    con.close()


def test_the_set_holds_the_frozen_texts(owner):
    assert releasable_set(owner.ledger, "open") == frozenset(str(k) for k in DECLARED)
    assert releasable_set(owner.ledger, "closed") is None
    assert releasable_set(owner.ledger, "nowhere") is None


@settings(max_examples=50, deadline=None)
@given(keys=st.lists(st.one_of(st.integers(0, 25), st.sampled_from([5.0, 13.0, 2.5])), min_size=1, max_size=4))
def test_the_set_and_the_key_by_key_check_agree(owner, keys):
    whole = releasable_set(owner.ledger, "open")
    assert ({releasable_text(k) for k in keys} <= whole) == all_releasable(owner.ledger, "open", keys)
