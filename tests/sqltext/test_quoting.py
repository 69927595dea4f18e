import datetime as dt
import decimal

import duckdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pcor_sql.errors import UserError
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal, string_literals


@pytest.fixture(scope="module")
def con():
    """One connection for the round trips: they only SELECT (a connection costs ~50 ms, an
    example ~1 ms)."""
    con = duckdb.connect()
    yield con
    con.close()


@given(st.text(min_size=1).filter(lambda s: "\x00" not in s))
def test_identifier_round_trips_through_duckdb(con, name):
    rows = con.execute(f"SELECT 1 AS {quote_identifier(name)}")
    assert rows.description[0][0] == name


@given(st.lists(st.text().filter(lambda s: "\x00" not in s), max_size=4))
def test_string_literals_reads_back_what_quote_literal_wrote(values):
    sql = f"SELECT {', '.join([quote_literal(v) for v in values] + ['1'])} -- 'not a string'"
    assert string_literals(sql) == values


@given(st.text().filter(lambda s: "\x00" not in s))
def test_string_literal_round_trips_through_duckdb(con, value):
    assert con.execute(f"SELECT {quote_literal(value)}").fetchall()[0][0] == value


@pytest.mark.parametrize(
    "value",
    [0, -7, 2**62, 1.5, -0.0, 1e300, True, False, None, decimal.Decimal("12.50"), dt.date(2020, 1, 2), dt.datetime(2020, 1, 2, 3, 4, 5)],
)
def test_other_literals_round_trip(value):
    con = duckdb.connect()
    assert con.execute(f"SELECT {quote_literal(value)}").fetchall()[0][0] == value


def test_injection_is_inert():
    con = duckdb.connect()
    con.execute("CREATE TABLE t(x VARCHAR)")
    evil = "x'); DROP TABLE t; --"
    con.execute(f"INSERT INTO t VALUES ({quote_literal(evil)})")
    assert con.execute("SELECT x FROM t").fetchall() == [(evil,)]
    evil_col = 'a"; DROP TABLE t; --'
    con.execute(f"ALTER TABLE t ADD COLUMN {quote_identifier(evil_col)} INT")
    assert evil_col in [d[0] for d in con.execute("SELECT * FROM t").description]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), object(), "a\x00b"])
def test_bad_literals_are_user_errors(bad):
    with pytest.raises(UserError):
        quote_literal(bad)


@pytest.mark.parametrize("bad", ["", "a\x00", None])
def test_bad_identifiers_are_user_errors(bad):
    with pytest.raises(UserError):
        quote_identifier(bad)
