"""Near misses of our statements (`EXPLAIN OUTLIERS`, `IDENTIFY ANOMALIES`) are one error naming
the statement meant, not DuckDB's raw parser error; DuckDB's own EXPLAIN still passes through."""

from __future__ import annotations

import duckdb
import pytest

import pcor_sql
from pcor_sql.errors import UserError
from tests.cli.cli_helpers import assert_error, invoke


@pytest.mark.parametrize(("text", "meant"), [
    ("EXPLAIN OUTLIERS SELECT salary FROM salaries WHERE id = 42", "EXPLAIN OUTLIER"),
    ("explain outleir SELECT salary FROM salaries WHERE id = 42", "EXPLAIN OUTLIER"),
    ("EXPLIAN OUTLIER SELECT salary FROM salaries WHERE id = 42", "EXPLAIN OUTLIER"),
    ("IDENTIFY ANOMALIES SELECT salary FROM salaries WITH (beta = 5, radius = 1, epsilon = 1)", "IDENTIFY ANOMALY"),
    ("IDENTITY ANOMALY SELECT salary FROM salaries WITH (beta = 5, radius = 1, epsilon = 1)", "IDENTIFY ANOMALY"),
])
def test_a_near_miss_names_the_statement_meant(text, meant):
    with pytest.raises(UserError, match=f"did you mean {meant}") as raised:
        pcor_sql.sql(duckdb.connect(), text)
    assert meant in raised.value.fix


@pytest.mark.parametrize("text", ["EXPLAIN SELECT 1", "EXPLAIN ANALYZE SELECT 1", "explain from range(3)"])
def test_duckdbs_explain_passes_through(text):
    assert pcor_sql.sql(duckdb.connect(), text) is not None


def test_the_command_line_says_it_in_one_line():
    result = invoke("sql", input="EXPLAIN OUTLIERS SELECT salary FROM salaries WHERE id = 42;\n")
    assert_error(result, "did you mean EXPLAIN OUTLIER")
