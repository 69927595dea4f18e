"""Bins as callers write them: `DOMAIN (age BINS (...))` in a statement, `--bins age=18,25,35`
on the command line, `bins={'age': [...]}` in Python — the same request each way."""

from __future__ import annotations

import math

import pytest

from pcor_sql.core.bins import Bins
from pcor_sql.errors import UserError
from pcor_sql.frontend.compact import parse_bins_declarations
from pcor_sql.frontend.request_builders import outlier_from_select, outlier_request
from pcor_sql.frontend.statement_parser import parse_statement

BASE = "EXPLAIN OUTLIER SELECT salary FROM ages WHERE id = 3 "
AGE = (18, 25, 35, 45, 55, 65, 81)


def test_the_bins_declaration_in_a_statement(parser_con):
    s = parse_statement(parser_con, BASE + "BY age, dept DOMAIN (age BINS (18, 25, 35, 45, 55, 65, 81), dept IN ('a'))")
    assert s.domains == (("age", Bins(AGE)), ("dept", ("a",)))
    s = parse_statement(parser_con, BASE + "DOMAIN (age BINS ('-inf', 2.5, 'inf'), d BINS ('2020-01-01', '2021-01-01'))")
    assert s.domains == (("age", Bins((-math.inf, 2.5, math.inf))), ("d", Bins(("2020-01-01", "2021-01-01"))))
    assert parse_statement(parser_con, BASE + "DOMAIN (age BINS 'auto:5')").domains == (("age", Bins(auto=5)),)


@pytest.mark.parametrize(
    "tail, problem",
    [
        ("DOMAIN (age BINS ())", "the bins of age is empty"),
        ("DOMAIN (age BINS (18))", "at least two edges"),
        ("DOMAIN (age BINS (25, 18))", "increase strictly"),
        ("DOMAIN (age BINS (18, 18))", "listed twice in the bins of age"),
        ("DOMAIN (age BINS 18)", "expected '(' after age BINS"),
        ("DOMAIN (age BINS 'often')", "at least two edges"),
        ("DOMAIN (age BINS (18, 25 + 1))", "expected ',' or ')' in the bins of age"),
        ("DOMAIN (age BINS (1, 2), age IN (3))", "declares age twice"),
    ],
)
def test_bins_declaration_errors(parser_con, tail, problem):
    with pytest.raises(UserError, match=problem.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        parse_statement(parser_con, BASE + tail)


@pytest.mark.parametrize(
    "texts, declared",
    [
        ("age=18,25,35", {"age": Bins((18, 25, 35))}),
        ("age=auto:5", {"age": Bins(auto=5)}),
        ("age=-inf,30,inf; d='2020-01-01','2021-01-01'",
         {"age": Bins((-math.inf, 30, math.inf)), "d": Bins(("2020-01-01", "2021-01-01"))}),
        (["age=0.5,1.5", '"odd, name"=1,2'], {"age": Bins((0.5, 1.5)), "odd, name": Bins((1, 2))}),
    ],
)
def test_the_bins_flag(texts, declared):
    assert parse_bins_declarations(texts) == declared


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "--bins: it is empty"),
        ("age", "expected '=' after the attribute 'age'"),
        ("=1,2", "an attribute name is missing"),
        ("age=1,,2", "an empty edge"),
        ("age=1,2=3", "unexpected '='"),
        ("age=1,2;age=3,4", "declared twice"),
        ("age=3,2", "increase strictly"),
        ("age=1", "at least two edges"),
        ("age='1", "unterminated quote"),
    ],
)
def test_bins_flag_errors(text, problem):
    with pytest.raises(UserError, match=problem):
        parse_bins_declarations(text)


def test_every_spelling_builds_the_same_request(con):
    query = "SELECT salary FROM ages WHERE id = 3"
    python = outlier_request(con, query, by="age,dept", bins={"age": list(AGE)}, domains={"dept": ["Admin"]})
    text = outlier_request(con, query, by="age,dept", bins={"age": "18,25,35,45,55,65,81"}, domains={"dept": ["Admin"]})
    flag = outlier_request(con, query, by="age,dept", bins=parse_bins_declarations("age=" + ",".join(map(str, AGE))),
                           domains={"dept": ["Admin"]})
    statement = parse_statement(con, f"EXPLAIN OUTLIER {query} BY age, dept DOMAIN (age BINS {AGE}, dept IN ('Admin'))")
    sql = outlier_from_select(con, statement.query, {"by": list(statement.by), "domains": dict(statement.domains)})
    assert python.bins == text.bins == flag.bins == sql.bins == (("age", Bins(AGE)),)
    assert python.domains == sql.domains == (("dept", ("Admin",)),)
    assert python == text == flag


def test_a_request_refuses_bins_and_a_domain_for_one_attribute(con):
    with pytest.raises(UserError, match="'age' is given both bins and a domain"):
        outlier_request(con, "SELECT salary FROM ages WHERE id = 3", bins={"age": [1, 2]}, domains={"age": [1, 2]})
    with pytest.raises(UserError, match="bins must map attribute names to edges"):
        outlier_request(con, "SELECT salary FROM ages WHERE id = 3", bins=[("age",)])
