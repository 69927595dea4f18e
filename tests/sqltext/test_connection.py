"""`FROM df` finds an Arrow object in the caller's scope, as `duckdb.sql` does (DESIGN.md §5 "Statements"), charged
to a unit that names it, with the warning that it has no identity beyond this process."""

from __future__ import annotations

import warnings

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import pcor_sql
from pcor_sql.errors import PrivacyWarning, UserError
from pcor_sql.sqltext.connection import objects_in_scope

DOMAINS = {"g": ["a", "b", "c", "d"]}
OPTIONS = dict(seed=1, by="g", domains=DOMAINS, ledger=":memory:", allow_seeded=True)


def _table(outlier: float = 50.0) -> pa.Table:
    values = np.r_[np.random.default_rng(0).normal(size=199), outlier]
    return pa.table({"id": list(range(200)), "v": values, "g": ["a", "b", "c", "d"] * 50})


def _deep(con: duckdb.DuckDBPyConnection, depth: int) -> object:
    """The release from `depth` frames below the frame that holds `df`."""
    if depth:
        return _deep(con, depth - 1)
    return pcor_sql.explain_outlier(con, "SELECT v FROM df WHERE id = 199", warn=_warnings.append, **OPTIONS)


_warnings: list[str] = []


def test_a_local_arrow_table_is_found_charged_by_name_and_warned_about():
    con = duckdb.connect()
    df = _table()  # noqa: F841 - read by name from this frame
    _warnings.clear()
    result = _deep(con, 4)
    assert result.charge.units == ("object:temp.main.df",)
    [message] = [w for w in _warnings if "caller's scope" in w]
    assert "no identity beyond this process" in message and "object:temp.main.df" in message
    # Registered for the call only: the caller's connection is left as it was.
    assert con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'df'").fetchall() == [(0,)]


def test_the_same_release_as_a_registered_object():
    con = duckdb.connect()
    df = _table()
    found = pcor_sql.explain_outlier(con, "SELECT v FROM df WHERE id = 199", warn=lambda m: None, **OPTIONS)
    con.register("df", df)
    registered = pcor_sql.explain_outlier(con, "SELECT v FROM df WHERE id = 199", warn=lambda m: None, **OPTIONS)
    assert (found.predicate, found.charge.units) == (registered.predicate, registered.charge.units)


def test_a_catalog_table_wins_over_a_python_variable_of_the_same_name():
    con = duckdb.connect()
    con.register("df", _table(outlier=50.0))
    df = _table(outlier=-50.0)  # noqa: F841 - must not be read
    seen: list[str] = []
    result = pcor_sql.explain_outlier(con, "SELECT v FROM df WHERE id = 199", warn=seen.append, **OPTIONS)
    assert result.record["v"] == 50.0
    assert not any("caller's scope" in m for m in seen)


def test_a_name_nowhere_is_still_the_one_line_error_with_its_fix():
    con = duckdb.connect()
    with pytest.raises(UserError, match=r"does not exist.*con.register\('nowhere', nowhere\)"):
        pcor_sql.explain_outlier(con, "SELECT v FROM nowhere WHERE id = 1", **OPTIONS)


def test_a_variable_that_is_not_a_table_is_not_read():
    con = duckdb.connect()
    nowhere = [1, 2, 3]  # noqa: F841 - a list is not a DataFrame
    with pytest.raises(UserError, match="does not exist"):
        pcor_sql.explain_outlier(con, "SELECT v FROM nowhere WHERE id = 1", **OPTIONS)


def test_the_warning_reaches_python_callers_without_a_warn_callback():
    con = duckdb.connect()
    df = _table()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with objects_in_scope(con, "SELECT v FROM df", None):
            assert con.execute("SELECT count(*) FROM df").fetchall() == [(df.num_rows,)]
    assert any(issubclass(w.category, PrivacyWarning) and "caller's scope" in str(w.message) for w in caught)
    assert con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'df'").fetchall() == [(0,)]
