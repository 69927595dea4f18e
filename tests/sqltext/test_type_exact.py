"""SQL text is made from a value's own data, never from what a subclass says about itself
(DESIGN.md §8 "Inputs are exact": a key of an int subclass whose `__str__` returned "42); UPDATE pcor.budget ..." was
pasted by `quote_literal`, and DuckDB ran the stacked statement)."""

from __future__ import annotations

import datetime as dt
import decimal
import inspect

import duckdb
import pytest

from pcor_sql.sqltext import build, dialect, tokens
from pcor_sql.sqltext.quoting import exact, quote_identifier, quote_literal

STACKED = "42); UPDATE pcor.budget SET spent_epsilon = 0; --"


class EvilInt(int):
    """Says it is a stacked statement whichever way it is turned into text."""

    def __str__(self):
        return STACKED

    __repr__ = __str__

    def __format__(self, spec):
        return STACKED

    def __int__(self):
        return 7


class EvilFloat(float):
    def __repr__(self):
        return STACKED

    __str__ = __repr__

    def __format__(self, spec):
        return STACKED


class EvilStr(str):
    def __str__(self):
        return STACKED

    __repr__ = __str__

    def __format__(self, spec):
        return STACKED

    def replace(self, *args):
        return STACKED

    def __radd__(self, other):
        return other + STACKED

    def __add__(self, other):
        return STACKED + other

    def __getitem__(self, index):
        return STACKED

    def strip(self, *args):
        return STACKED


def evil(value):
    """`value` with every str, int and float inside it replaced by its hostile twin."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return EvilStr(value)
    if isinstance(value, int):
        return EvilInt(value)
    if isinstance(value, float):
        return EvilFloat(value)
    if isinstance(value, (list, tuple)):
        return type(value)(evil(v) for v in value)
    return value


def ledger_con():
    con = duckdb.connect()
    con.execute("CREATE SCHEMA pcor; CREATE TABLE pcor.budget AS SELECT 0.75 AS spent_epsilon")
    con.execute("CREATE TABLE people AS SELECT range AS id FROM range(50)")
    return con


def test_the_stacked_statement_attack_is_inert():
    con = ledger_con()
    key = EvilInt(42)
    assert f"{key}" == STACKED  # what an f-string or str() would have pasted
    selector = f'"id" IN ({quote_literal(key)})'
    assert selector == '"id" IN (42)'
    for statement in duckdb.extract_statements(build.select_from("*", "people", where=selector)):
        con.execute(statement)
    assert con.execute("SELECT spent_epsilon FROM pcor.budget").fetchall() == [(0.75,)]
    # The same for every literal type a builder accepts.
    assert quote_literal(EvilFloat(1.5)) == "1.5"
    assert quote_literal(EvilStr("it's")) == "'it''s'"
    assert quote_identifier(EvilStr('a"b')) == '"a""b"'


class EvilDecimal(decimal.Decimal):
    def __str__(self):
        return STACKED


class EvilDate(dt.date):
    def isoformat(self):
        return STACKED


class EvilDatetime(dt.datetime):
    def isoformat(self, *args, **kwargs):
        return STACKED


@pytest.mark.parametrize("value, text", [
    (EvilDecimal("12.50"), "12.50"),
    (EvilDate(2020, 1, 2), "DATE '2020-01-02'"),
    (EvilDatetime(2020, 1, 2, 3, 4, 5), "TIMESTAMP '2020-01-02 03:04:05'"),
])
def test_other_literal_subclasses_are_written_as_their_data(value, text):
    assert quote_literal(value) == text


def test_exact_copies_to_the_exact_type():
    for value, kind, data in [(EvilInt(3), int, 3), (EvilFloat(2.5), float, 2.5), (EvilStr("x"), str, "x")]:
        copied = exact(value)
        assert type(copied) is kind and copied == data
    assert exact([EvilStr("a"), EvilInt(1)]) == ("a", 1)
    assert all(type(v) in (str, int) for v in exact([EvilStr("a"), EvilInt(1)]))


# One plain call per builder of pcor_sql.sqltext.build; the test below adds the hostile twins.
BUILDER_CALLS = {
    "select_from": ((["x", "y"], "t"), {"where": "x > 1", "group_by": "ALL", "order_by": "x", "limit": 3}),
    "over_context": (("x", "t", "g = 'a'"), {}),
    "describe": (("SELECT 1",), {}),
    "aliased": (("x + 1", "a b"), {}),
    "as_double": (("x",), {}),
    "as_number": (("x", "DATE"), {}),
    "quoted": ((["a", 'b"c'],), {}),
    "all_not_null": ((["a", "b"],), {}),
    "parquet_file": (("data/x.parquet",), {}),
    "metric_values": (("x", "t", "TRUE"), {}),
    "distinct_values": (("t", "g"),  {}),
    "distinct_values_of": (("t", ["g", "h i"]), {}),
    "count_where": (("t", ["x > 1", "x IS NULL"]), {}),
    "group_by_cells": ((["g"], "x", "t"), {}),
    "cell_lists": ((["g"], "x", "t"), {}),
    "double_literal": ((2.5,), {}),
    "cell_windows": ((["g"], "x", "t", 2.5, 3), {"cells_where": "g = 'a'"}),
    "cell_range_counts": ((["g"], "x", "t", 1.0, 4.0, True), {}),
}


def builders():
    return sorted(name for name, f in inspect.getmembers(build, inspect.isfunction)
                  if f.__module__ == build.__name__ and not name.startswith("_"))


def test_every_builder_has_a_call_here():
    assert builders() == sorted(BUILDER_CALLS)


@pytest.mark.parametrize("name", sorted(BUILDER_CALLS))
def test_every_builder_writes_the_data_of_a_subclass(name):
    args, kwargs = BUILDER_CALLS[name]
    plain = getattr(build, name)(*args, **kwargs)
    hostile = getattr(build, name)(*evil(args), **{k: evil(v) for k, v in kwargs.items()})
    assert hostile == plain and STACKED not in str(hostile)


@pytest.mark.parametrize("call, value", [
    (dialect.spark_identifier, 'a "name"'),
    (dialect.spark_string, "it's \\ here"),
    (dialect.spark_sql, "SELECT \"a b\", 'it''s' FROM t"),
    (lambda v: [t.text for t in tokens.tokenize(v)], "SELECT 'x' -- y"),
    (tokens.split_statements, "SELECT 1; SELECT 'a;b'"),
])
def test_the_dialect_and_the_tokenizer_read_a_subclass_as_its_data(call, value):
    assert call(EvilStr(value)) == call(value)
