"""Property tests: any text quoted by the one literal renderer comes back unchanged and inert."""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.frontend import ExplainOutlier, parse_start_predicate, parse_statement, split_statements
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal

# Printable text plus the characters that matter to SQL lexing; no NUL (refused by quoting).
TEXT = st.text(
    alphabet=st.one_of(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), st.sampled_from("'\";$-/*()\\\n")),
    max_size=30,
)
NAME = TEXT.filter(lambda s: s != "")

_CON = duckdb.connect()


@settings(max_examples=80, deadline=None)
@given(value=TEXT, name=NAME)
def test_option_strings_and_quoted_names_round_trip(value, name):
    text = (
        f"EXPLAIN OUTLIER SELECT {quote_identifier(name)} FROM t BY {quote_identifier(name)} "
        f"WITH (dataset = {quote_literal(value)})"
    )
    s = parse_statement(_CON, text)
    assert isinstance(s, ExplainOutlier)
    assert s.dataset == value
    assert s.by == (name,)
    assert s.query.metric_names == (name,)


@settings(max_examples=80, deadline=None)
@given(values=st.lists(TEXT, min_size=1, max_size=4, unique=True), name=NAME)
def test_start_values_round_trip(values, name):
    predicate = f"{quote_identifier(name)} IN ({', '.join(quote_literal(v) for v in values)})"
    assert parse_start_predicate(_CON, predicate, [name]) == {name: values}


@settings(max_examples=80, deadline=None)
@given(values=st.lists(TEXT, min_size=1, max_size=5))
def test_split_statements_keeps_each_statement_whole(values):
    statements = [f"SELECT {quote_literal(v)} AS {quote_identifier(v or 'x')}" for v in values]
    assert split_statements(";\n".join(statements) + ";") == [s.strip() for s in statements]
