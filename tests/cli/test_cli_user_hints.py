"""Hints that point the right way on a table a new user brings (DESIGN.md §5: one line naming
the problem and the fix): a misspelt column, a string in double quotes, a record whose metric is
NULL, and releasable keys the owner declared that are not in the data."""

from __future__ import annotations

import duckdb
import pytest

from tests.cli.cli_helpers import FAST, assert_error, invoke

BIRTHS = """
CREATE TABLE births AS SELECT range::INT AS id, (range % 7)::INT AS births,
    (['CA', 'NY', 'TX'])[range % 3 + 1] AS state, (range % 5)::INT AS year FROM range(200);
INSERT INTO births VALUES (5000, NULL, 'CA', 1);
"""


@pytest.fixture
def births(tmp_path):
    path = tmp_path / "births.duckdb"
    con = duckdb.connect(str(path))
    con.execute(BIRTHS)
    con.close()
    return str(path)


def explain(births, query):
    return invoke("explain-outlier", query, "--db", births, "--by", "state,year", "--domain", "state=CA|NY|TX",
                  "--domain", "year=0|1|2|3|4", *FAST)


def test_a_misspelt_column_is_named_with_the_columns_like_it(births):
    line = assert_error(explain(births, "SELECT birth FROM births WHERE id = 1"))
    assert "there is no column birth: did you mean births?" in line, line
    assert "existing table, view or file" not in line, line


def test_a_misspelt_column_of_an_alias_is_named_too(births):
    line = assert_error(explain(births, "SELECT births FROM births b WHERE b.stat = 'CA' AND id = 1"))
    assert "there is no column stat: did you mean state?" in line, line


@pytest.mark.parametrize("where", ['state = "CA"', "state IN ('NY', \"CA\")", 'state <> "CA"'])
def test_a_string_in_double_quotes_is_told_to_use_single_quotes(births, where):
    line = assert_error(explain(births, f"SELECT births FROM births WHERE {where} AND id = 1"))
    assert "use single quotes for a string: 'CA'" in line, line


def test_a_null_metric_is_said_as_null(births):
    line = assert_error(explain(births, "SELECT births FROM births WHERE id = 5000"))
    assert "metric is NULL" in line and "None" not in line, line


def test_the_owner_hears_how_many_declared_releasable_keys_are_absent(births):
    result = invoke("dataset", "add", "births", "births", "--key", "id", "--metric", "births", "--by", "state,year",
                    "--domain", "state=CA|NY|TX", "--domain", "year=0|1|2|3|4",
                    "--releasable-keys", "1,99999999,77777777", "--db", births)
    assert result.exit_code == 0, result.stderr
    assert "3 releasable keys" in result.stdout
    assert "2 of the 3 releasable keys declared for 'births' are not in the data (e.g. 99999999, 77777777)" \
        in result.stderr, result.stderr


def test_no_note_when_every_declared_key_is_present(births):
    result = invoke("dataset", "add", "births", "births", "--key", "id", "--metric", "births", "--by", "state,year",
                    "--domain", "state=CA|NY|TX", "--domain", "year=0|1|2|3|4", "--releasable-keys", "1,2", "--db", births)
    assert result.exit_code == 0, result.stderr
    assert "not in the data" not in result.stderr
