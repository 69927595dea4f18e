"""Hints name an option the way the caller writes it: a flag on the command line, a keyword
from Python, a clause or WITH option in a statement (DESIGN.md §5 "Errors")."""

from __future__ import annotations

import duckdb
import pytest

import pcor_sql
from pcor_sql.errors import CLI, SQL, caller, option_hint, option_name
from tests.cli.cli_helpers import QUERY, assert_error, invoke


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    pcor_sql.load_datasets(c)
    yield c
    c.close()


def test_option_hint_per_caller():
    assert option_hint("epsilon", "0.2") == "epsilon=0.2"
    assert option_hint("search", "bfs") == "search='bfs'"
    assert option_name("by") == "by=..."
    with caller(CLI):
        assert option_hint("epsilon", "0.2") == "--epsilon 0.2"
        assert option_hint("max_contexts", "1000") == "--max-contexts 1000"
        assert option_hint("domains", "'a=x|y'") == "--domain 'a=x|y'"
        assert option_name("by") == "--by"
        with caller(SQL):
            assert option_hint("epsilon", "0.2") == "WITH (epsilon = 0.2)"
            assert option_hint("by", "a,b", sql="a, b") == "BY a, b"
            assert option_name("by") == "BY"
            # Not a statement option: the runner's own flag.
            assert option_hint("max_contexts", "1000") == "--max-contexts 1000"
    with caller(SQL):
        assert option_hint("search", "bfs") == "WITH (search = 'bfs')"
        assert option_hint("max_contexts", "1000") == "max_contexts=1000"
    assert option_hint("epsilon", "0.2") == "epsilon=0.2"  # the context is left as found


@pytest.mark.parametrize(
    "options, needle",
    [
        ({"epsilon": float("nan")}, "epsilon=0.2"),
        ({"samples": 0}, "samples=50"),
        ({"by": "job_title,,year"}, "by='job_title,year'"),
    ],
)
def test_python_callers_see_python_keywords(con, options, needle):
    with pytest.raises(pcor_sql.UserError) as info:
        pcor_sql.explain_outlier(con, QUERY, **options)
    assert needle in str(info.value)
    assert "--" not in str(info.value)


def test_a_statement_sees_its_clauses(con):
    statement = (
        "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 BY job_title, year "
        "WITH (start = 'job_title IN (''Teacher'')', seed = 1)"
    )
    with pytest.raises(pcor_sql.UserError) as info:
        pcor_sql.sql(con, statement)
    assert "WITH (start = ...)" in str(info.value) and "--" not in str(info.value)


def test_the_command_line_sees_flags():
    assert_error(invoke("explain-outlier", QUERY, "--epsilon", "-1"), "--epsilon 0.2")
    assert_error(invoke("explain-outlier", QUERY, "--by", "job_title,,year"), "--by job_title,year")


def test_the_command_line_gets_no_dataframe_hint():
    error = assert_error(invoke("explain-outlier", "SELECT v FROM df WHERE id = 3"), "does not exist")
    assert "register" not in error
