"""Declared bins (core.bins): parsing what callers write, labels, the bin of a value, and the
split of bins out of declared domains."""

import datetime as dt
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pcor_sql.core.bins import Bins, bin_labels, bin_of, check_edges, declared_bins, edge_text, parse_bins, run_label
from pcor_sql.errors import UserError

AGE = (18, 25, 35, 45, 55, 65, 81)


def test_labels_half_open_with_the_last_bin_closed():
    assert bin_labels(AGE) == ("[18, 25)", "[25, 35)", "[35, 45)", "[45, 55)", "[55, 65)", "[65, 81]")
    assert bin_labels((-math.inf, 25, math.inf)) == ("(-inf, 25)", "[25, inf)")
    assert bin_labels((0.5, 2.0, 2.5)) == ("[0.5, 2)", "[2, 2.5]")
    assert bin_labels((dt.date(2020, 1, 1), dt.date(2021, 1, 1))) == ("[2020-01-01, 2021-01-01]",)
    assert run_label(AGE, 1, 2) == "[25, 45)" and run_label(AGE, 4, 5) == "[55, 81]"


@pytest.mark.parametrize(
    "value, expected",
    [(18, 0), (24, 0), (24.999, 0), (25, 1), (64, 4), (65, 5), (80, 5), (81, 5), (17, None), (81.5, None),
     (float("nan"), None), ("x", None)],
)
def test_bin_of_a_value(value, expected):
    assert bin_of(AGE, value) == expected


def test_bin_of_with_infinite_ends():
    edges = (-math.inf, 0, 10, math.inf)
    assert [bin_of(edges, v) for v in (-1e300, -1, 0, 9.5, 10, 1e300)] == [0, 0, 1, 1, 2, 2]


@given(st.lists(st.integers(-1000, 1000), min_size=2, max_size=12, unique=True), st.integers(-1100, 1100))
def test_bin_of_agrees_with_the_definition(edges, value):
    edges = sorted(edges)
    found = bin_of(edges, value)
    holding = [j for j in range(len(edges) - 1)
               if edges[j] <= value < edges[j + 1] or (j == len(edges) - 2 and value == edges[-1])]
    assert found == (holding[0] if holding else None)


@pytest.mark.parametrize(
    "value, edges, auto",
    [([18, 25, 35], (18, 25, 35), None), ("18,25,35", (18, 25, 35), None), ("auto:5", (), 5), (" AUTO : 3 ", (), 3),
     ("-inf, 2.5, inf", (-math.inf, 2.5, math.inf), None), (["2020-01-01", "2021-01-01"], ("2020-01-01", "2021-01-01"), None)],
)
def test_parse_bins(value, edges, auto):
    assert parse_bins(value, "age") == Bins(edges, auto)


@pytest.mark.parametrize(
    "value, problem",
    [([18], "at least two edges"), ([25, 18], "increase strictly"), ([18, 18, 25], "increase strictly"),
     ([18, math.inf, 25], "infinite bin edge"), ([math.inf, 25], "infinite bin edge"), ("auto:0", "auto bins"),
     ("auto:1000", "auto bins"), ("18,,25", "empty bin edge"), ({"a": 1}, "list of edges"), (7, "list of edges"),
     ([True, 2], "invalid bin edge"), ([float("nan"), 2], "NaN")],
)
def test_bad_bins_are_refused_in_one_line(value, problem):
    with pytest.raises(UserError, match=problem):
        parse_bins(value, "age")


def test_check_edges_refuses_mixed_kinds():
    with pytest.raises(UserError, match="different kinds"):
        check_edges((1, dt.date(2020, 1, 1)))


def test_edge_text():
    assert [edge_text(e) for e in (18, 18.0, 2.5, math.inf, -math.inf, dt.date(2020, 1, 2))] == [
        "18", "18", "2.5", "inf", "-inf", "2020-01-02"]


def test_declared_bins_takes_bins_from_the_domains_and_keeps_the_rest():
    bins, domains = declared_bins({"age": [18, 25]}, {"dept": ["a"], "year": Bins((1, 2))})
    assert bins == (("age", Bins((18, 25))), ("year", Bins((1, 2))))
    assert domains == [("dept", ["a"])]
    assert declared_bins(None, None) == (None, None)
    assert declared_bins(None, {"dept": ["a"]}) == (None, {"dept": ["a"]})
    assert declared_bins((("age", "auto:2"),), None) == ((("age", Bins(auto=2)),), None)


@pytest.mark.parametrize(
    "bins, domains, problem",
    [({"age": [1, 2]}, {"age": ["x"]}, "both bins and a domain"), ({"age": [1, 2]}, {"age": Bins((3, 4))}, "twice"),
     ({"": [1, 2]}, None, "must be a name"), ([("age",)], None, "map attribute names")],
)
def test_declared_bins_errors(bins, domains, problem):
    with pytest.raises(UserError, match=problem):
        declared_bins(bins, domains)
