"""Hints that work when followed (DESIGN.md §5 "Errors"): the number a DATE, TIMESTAMP, TIME or
INTERVAL metric should be read as, and the `--domain` declaration of an oddly named column, are
each taken from the error or warning and run — on DuckDB, and through the command line."""

from __future__ import annotations

import re
import shlex
import warnings

import duckdb
import pytest

import pcor_sql
from tests.cli.cli_helpers import FAST, assert_clean_stderr, invoke

# Record 7 is far from every other row, whatever the unit.
TABLE = """
CREATE TYPE grp AS ENUM ('a', 'b', 'c');
CREATE TABLE t AS SELECT i AS id, (['a', 'b', 'c'])[i % 3 + 1]::grp AS g,
    CAST(DATE '2020-01-01' + to_days(CASE WHEN i = 7 THEN 900 ELSE i % 10 END) AS DATE) AS day,
    TIMESTAMP '2020-01-01 00:00:00' + to_hours(CASE WHEN i = 7 THEN 900 ELSE i % 10 END) AS stamp,
    TIMESTAMPTZ '2020-01-01 00:00:00+00' + to_hours(CASE WHEN i = 7 THEN 900 ELSE i % 10 END) AS stamp_tz,
    TIME '01:00:00' + to_minutes(CASE WHEN i = 7 THEN 900 ELSE i % 10 END) AS clock,
    to_minutes(CASE WHEN i = 7 THEN 900 ELSE i % 10 END) AS took,
    i % 5 = 0 AS flag
FROM range(90) r(i)
"""


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    c.execute(TABLE)
    yield c
    c.close()


def explain(con, metric):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pcor_sql.explain_outlier(con, f"SELECT {metric} FROM t WHERE id = 7", verifier="grubbs", epsilon=0.5,
                                        ledger=":memory:")


def hinted_metric(con, column):
    with pytest.raises(pcor_sql.UserError, match="not a number") as raised:
        explain(con, column)
    found = re.search(r"SELECT (.+) \.\.\.$", raised.value.fix)
    assert found, raised.value.fix
    assert "CAST" not in found.group(1) or column == "flag", found.group(1)
    return found.group(1)


@pytest.mark.parametrize("column", ["day", "stamp", "stamp_tz", "clock", "took", "flag"])
def test_the_hinted_number_runs_on_duckdb(con, column):
    metric = hinted_metric(con, column)
    [(kind,)] = con.execute(f"SELECT typeof({metric}) FROM t LIMIT 1").fetchall()
    assert kind in ("DOUBLE", "BIGINT", "INTEGER"), (metric, kind)


@pytest.mark.parametrize("column", ["day", "stamp", "took"])
def test_following_the_hint_releases(con, column):
    metric = hinted_metric(con, column)
    released = explain(con, metric)
    assert released.explanation_sql.startswith("SELECT " + metric.split("(")[0] + "(")


WEIRD = 'we"ird'


@pytest.fixture()
def weird_db(tmp_path):
    path = tmp_path / "w.duckdb"
    c = duckdb.connect(str(path))
    c.execute(f"""CREATE TABLE w AS SELECT i AS id, (['x|1', 'y;2', 'z''3'])[i % 3 + 1] AS "{WEIRD.replace('"', '""')}",
                  CASE WHEN i = 7 THEN 1000.0 ELSE i % 10 END AS v FROM range(60) r(i)""")
    c.close()
    return str(path)


def test_the_domain_hint_of_a_quoted_column_is_taken_as_written(weird_db):
    query = "SELECT v FROM w WHERE id = 7"
    by = shlex.quote(f'"{WEIRD.replace(chr(34), 2 * chr(34))}"')
    first = invoke("explain-outlier", query, "--db", weird_db, "--by", shlex.split(by)[0], *FAST)
    assert first.exit_code == 0, first.stderr
    [warning] = [line for line in first.stderr.splitlines() if "has no declared domain" in line]
    hint = re.search(r"\(e\.g\. (--domain .+?)\) or use an ENUM column", warning).group(1)
    argv = shlex.split(hint)
    assert argv[0] == "--domain" and len(argv) == 2, argv
    again = invoke("explain-outlier", query, "--db", weird_db, "--by", shlex.split(by)[0], *argv, *FAST)
    assert again.exit_code == 0, again.stderr
    assert_clean_stderr(again)
    assert "has no declared domain" not in again.stderr
