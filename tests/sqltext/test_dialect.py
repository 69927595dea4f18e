"""DuckDB's SQL text rewritten for Spark: quoted identifiers and string literals, and the
`system.main.` qualifier of built-ins dropped; nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pcor_sql.errors import UserError
from pcor_sql.sqltext.dialect import spark_identifier, spark_sql, spark_string
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal


def test_identifiers_and_strings_take_sparks_quoting():
    duck = '''SELECT "a b", "x""y" FROM parquet."/tmp/x.parquet" WHERE s IN ('it''s', 'a\\b') -- "c"'''
    assert spark_sql(duck) == '''SELECT `a b`, `x"y` FROM parquet.`/tmp/x.parquet` WHERE s IN ('it''s', 'a\\\\b') -- "c"'''
    assert spark_identifier("a`b") == "`a``b`"
    assert spark_sql("SELECT CAST(m AS DOUBLE) AS m FROM t WHERE TRUE") == "SELECT CAST(m AS DOUBLE) AS m FROM t WHERE TRUE"


def test_duckdb_only_strings_are_refused():
    with pytest.raises(UserError, match="only DuckDB reads"):
        spark_sql("SELECT E'a\\n'")


@given(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1))
def test_any_name_and_value_round_trip(text):
    """What DuckDB would quote becomes Spark's quoting of the same name or value."""
    assert spark_sql(quote_identifier(text)) == spark_identifier(text)
    assert spark_sql(quote_literal(text)) == spark_string(text)


def test_the_builtin_qualifier_is_dropped_and_nothing_like_it():
    """The builders call DuckDB's built-ins as `system.main.f(...)` (a user macro cannot take
    them); Spark has no such catalog. Only the qualifier written together before a name goes."""
    assert spark_sql("SELECT system.main.count(*), SYSTEM.MAIN.row_number() OVER () FROM t") == \
        "SELECT count(*), row_number() OVER () FROM t"
    kept = 'SELECT "system".main.f(x), system.mains.f(x), system . main . f(x), system.main.x FROM system.main."t"'
    assert spark_sql(kept) == "SELECT `system`.main.f(x), system.mains.f(x), system . main . f(x), system.main.x FROM system.main.`t`"
