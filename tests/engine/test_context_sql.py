"""The in-memory context mask and its compiled WHERE select the same rows on DuckDB."""

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcor_sql.core.space import Attribute, ContextSpace
from pcor_sql.engine.context_sql import context_predicate
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal

TEXT_VALUES = st.text(alphabet=st.sampled_from("ab'\" ,|=();-x"), min_size=1, max_size=5)


@st.composite
def tables(draw):
    dom_a = draw(st.lists(TEXT_VALUES, min_size=1, max_size=4, unique=True))
    dom_b = draw(st.lists(st.integers(-3, 3), min_size=1, max_size=4, unique=True))
    n = draw(st.integers(0, 25))
    # Only some domain values appear in the data; NULLs appear too.
    rows = [
        (
            draw(st.one_of(st.none(), st.sampled_from(dom_a))),
            draw(st.one_of(st.none(), st.sampled_from(dom_b))),
        )
        for _ in range(n)
    ]
    anchor = (draw(st.integers(0, len(dom_a) - 1)), draw(st.integers(0, len(dom_b) - 1)))
    space = ContextSpace([Attribute("a col'\"", tuple(dom_a)), Attribute("b", tuple(dom_b))], anchor)
    free = draw(st.integers(0, (1 << len(space.free_bits)) - 1))
    as_enum = draw(st.booleans())
    return dom_a, rows, space, space.from_free(free), as_enum


def _in_mask(space, mask, row):
    for i, value in enumerate(row):
        if value is None:
            return False
        j = space.attributes[i].domain.index(value)
        if not (space.attribute_bits(mask, i) >> j) & 1:
            return False
    return True


@pytest.fixture(scope="module")
def con():
    """One connection for every example: a connection costs ~50 ms, most of an example's time."""
    con = duckdb.connect()
    yield con
    con.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_mask_and_compiled_where_select_the_same_rows(con, case):
    dom_a, rows, space, mask, as_enum = case
    con.execute("DROP TABLE IF EXISTS t")  # the previous example's
    con.execute("DROP TYPE IF EXISTS e")
    col_a = quote_identifier("a col'\"")
    if as_enum:
        # The ENUM type omits the last declared value: declared domains may be wider than the type.
        enum_values = dom_a[:-1] or dom_a
        con.execute(f"CREATE TYPE e AS ENUM ({', '.join(quote_literal(v) for v in enum_values)})")
        cast = frozenset() if set(dom_a) <= set(enum_values) else frozenset({"a col'\""})
        rows = [r for r in rows if r[0] is None or r[0] in enum_values]
        con.execute(f"CREATE TABLE t(id INT, {col_a} e, b INT)")
    else:
        cast = frozenset()
        con.execute(f"CREATE TABLE t(id INT, {col_a} VARCHAR, b INT)")
    for i, (a, b) in enumerate(rows):
        con.execute("INSERT INTO t VALUES (?, ?, ?)", [i, a, b])
    expected = sorted(i for i, r in enumerate(rows) if _in_mask(space, mask, r))
    where = context_predicate(space, mask, cast_varchar=cast, omit_full=False)
    got = sorted(r[0] for r in con.execute(f"SELECT id FROM t WHERE {where}").fetchall())
    assert got == expected


def test_full_not_null_attributes_are_omitted_from_the_released_predicate():
    space = ContextSpace([Attribute("job", ("a", "b")), Attribute("year", (1, 2, 3))], (0, 1))
    mask = space.full
    nn = frozenset({"job", "year"})
    assert context_predicate(space, mask, not_null=nn) == "TRUE"
    assert context_predicate(space, mask, omit_full=False, not_null=nn) == '"job" IS NOT NULL AND "year" IS NOT NULL'
    only = space.from_values({"job": ["a"], "year": [2, 3]})
    assert context_predicate(space, only, not_null=nn) == '"job" = \'a\' AND "year" IN (2, 3)'
    assert context_predicate(space, space.from_values({"year": [1, 2]}), not_null=nn) == '"year" IN (1, 2)'
    # A nullable column is never omitted: NULL rows are in no population, whatever the data holds.
    assert context_predicate(space, mask) == '"job" IS NOT NULL AND "year" IS NOT NULL'
    assert context_predicate(space, space.from_values({"year": [1, 2]})) == '"job" IS NOT NULL AND "year" IN (1, 2)'


def test_injection_in_domain_values_is_inert():
    evil = "x') OR 1=1; DROP TABLE t; --"
    space = ContextSpace([Attribute("a", (evil, "y"))], (0,))
    con = duckdb.connect()
    con.execute("CREATE TABLE t(a VARCHAR)")
    con.execute("INSERT INTO t VALUES ('y'), (?)", [evil])
    where = context_predicate(space, space.v_mask)
    assert con.execute(f"SELECT a FROM t WHERE {where}").fetchall() == [(evil,)]
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(2,)]
