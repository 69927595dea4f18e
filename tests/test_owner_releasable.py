"""A releasable predicate selects keys by their data, so the set it selects becomes public: the
owner is warned at registration and `dataset show` says how the set was made (DESIGN.md §6 "What an analyst may ask about")."""

from __future__ import annotations

import duckdb
import pytest

import pcor_sql
from pcor_sql.errors import PrivacyWarning
from tests.cli.cli_helpers import invoke


@pytest.fixture
def owner(tmp_path):
    con = duckdb.connect(str(tmp_path / "pay.duckdb"))
    con.execute("CREATE TYPE dept AS ENUM ('a', 'b'); CREATE TABLE t AS SELECT i AS id, (['a', 'b'])[i % 2 + 1]::dept"
                " AS dept, 100.0 * i AS pay FROM range(100) t(i)")
    yield pcor_sql.Owner(con), tmp_path / "pay.duckdb"
    con.close()


def test_a_predicate_warns_that_its_set_becomes_public(owner):
    handle, _ = owner
    with pytest.warns(PrivacyWarning, match="selected by the data .*becomes public"):
        found = handle.register("rich", "t", key="id", metric="pay", by="dept", releasable="pay > 5000")
    assert found.releasable == 49 and found.releasable_source == "predicate: pay > 5000"


def test_a_list_does_not_warn_and_says_so(owner, recwarn):
    handle, _ = owner
    found = handle.register("some", "t", key="id", metric="pay", by="dept", releasable=[1, 2, 3])
    assert not [w for w in recwarn if issubclass(w.category, PrivacyWarning)]
    assert found.releasable_source == "list"


def test_dataset_show_says_how_the_set_was_made(owner):
    handle, path = owner
    with pytest.warns(PrivacyWarning):
        handle.register("rich", "t", key="id", metric="pay", by="dept", releasable="pay > 5000")
    handle.register("some", "t", key="id", metric="pay", by="dept", releasable=[1, 2])
    handle.con.close()
    shown = invoke("dataset", "show", "rich", "--db", str(path))
    assert shown.exit_code == 0, shown.stderr
    assert "releasable keys: 49 (selected by the predicate: pay > 5000 at registration: data-derived, public)" \
        in shown.stdout
    assert "releasable keys: 2 (a declared list)" in invoke("dataset", "show", "some", "--db", str(path)).stdout
    as_json = invoke("dataset", "show", "rich", "--db", str(path), "--format", "json").stdout
    assert '"releasable_source": "predicate: pay > 5000"' in as_json



def test_the_owners_warnings_point_at_the_owners_own_call(owner):
    """Declared keys absent from the data warn the owner at the line of their own `register`
    call (not inside pcor_sql, not at `sys`, where it pointed before)."""
    handle, _ = owner
    with pytest.warns(UserWarning, match="not in the data") as absent:
        handle.register("few", "t", key="id", metric="pay", by="dept", releasable=[1, 99999])
    assert {w.filename for w in absent if "not in the data" in str(w.message)} == {__file__}
