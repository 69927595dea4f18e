"""Every numeric option has a declared maximum (DESIGN.md §8 "Bounded work"), read from
its one spec by every caller: Python, statements, the CLI and HTTP (tests/service). The bounds
table in docs/service.md is held to the specs here."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

import pcor_sql
from pcor_sql.core.option_spec import Kind, OptionSpec
from pcor_sql.errors import UserError
from pcor_sql.request_specs import explain_specs, identify_specs

NUMERIC = [s for s in (*explain_specs().values(), *identify_specs().values()) if s.kind in (Kind.NUMBER, Kind.INTEGER)]


def test_every_numeric_option_declares_a_maximum():
    assert NUMERIC and all(s.maximum is not None for s in NUMERIC)
    with pytest.raises(TypeError, match="declares no maximum"):
        OptionSpec("unbounded", Kind.INTEGER, 1, "an option without a maximum", "1")


@pytest.mark.parametrize("spec", NUMERIC, ids=lambda s: s.name)
def test_the_spec_refuses_one_past_its_maximum_with_one_line(spec):
    past = int(spec.maximum) + 1 if spec.kind is Kind.INTEGER else spec.maximum * 2
    with pytest.raises(UserError, match=f"{spec.name} must be ≤") as err:
        spec.check(past)
    assert "\n" not in str(err.value)
    assert spec.check(int(spec.maximum) if spec.kind is Kind.INTEGER else spec.maximum) is not None


def test_a_huge_integer_is_named_by_its_size_not_its_digits():
    [samples] = [s for s in NUMERIC if s.name == "samples"]
    with pytest.raises(UserError) as err:
        samples.check(2**1000)
    assert "302-digit number" in str(err.value) and len(str(err.value)) < 300


@pytest.fixture
def con():
    c = duckdb.connect()
    c.execute("CREATE TYPE dept AS ENUM ('a', 'b'); CREATE TABLE t AS SELECT i AS id, (['a', 'b'])[i % 2 + 1]::dept"
              " AS dept, CASE WHEN i = 7 THEN 900.0 ELSE i % 5 END AS pay FROM range(40) t(i)")
    return c


@pytest.mark.parametrize("options", [{"samples": 1_000_001}, {"descents": 100_001}, {"epsilon": 1e4},
                                     {"search": "uniform", "max_draws": 2**62}])
def test_python_and_statements_refuse_past_the_bound_before_anything_is_charged(con, options):
    session = pcor_sql.Session(con, ledger=":memory:", warn=lambda message: None)
    with pytest.raises(UserError, match="must be ≤"):
        pcor_sql.explain_outlier(None, "SELECT pay FROM t WHERE id = 7", session=session, verifier="grubbs", **options)
    written = ", ".join(f"{k} = {v!r}" if isinstance(v, str) else f"{k} = {v}" for k, v in options.items())
    with pytest.raises(UserError, match="must be ≤"):
        pcor_sql.sql(con, f"EXPLAIN OUTLIER SELECT pay FROM t WHERE id = 7 USING grubbs WITH ({written})",
                     session=session)
    assert session.ledger().history() == ()


def test_anomaly_options_are_bounded_in_python(con):
    session = pcor_sql.Session(con, ledger=":memory:", warn=lambda message: None)
    for options in ({"beta": 2**1000}, {"radius": 1e308}):
        with pytest.raises(UserError, match="must be ≤"):
            pcor_sql.identify_anomaly(None, "SELECT pay FROM t WHERE id = 7", session=session,
                                      **{"beta": 2, "radius": 1.0, "epsilon": 0.5, **options})


def test_the_service_page_states_every_bound():
    readme = Path(__file__).resolve().parent.parent.joinpath("docs", "service.md").read_text(encoding="utf-8")
    table = readme[readme.index("| option | bounds |"):]
    table = table[:table.index("\n\n")]
    shown = {"epsilon": "1,000", "samples": "1,000,000", "descents": "100,000", "max_checks": "100,000,000",
             "max_draws": "1,000,000,000", "max_contexts": "2^40", "beta": "10^15", "radius": "10^300",
             "seed": "2^64 − 1", "k": "10^15 + 1"}
    values = {"1,000": 1e3, "1,000,000": 1e6, "100,000": 1e5, "100,000,000": 1e8, "1,000,000,000": 1e9,
              "2^40": 2**40, "10^15": 1e15, "10^300": 1e300, "2^64 − 1": 2**64 - 1, "10^15 + 1": 1e15 + 1}
    for spec in NUMERIC:
        assert re.search(rf"`{spec.name}`", table), spec.name
        assert shown[spec.name] in table and values[shown[spec.name]] == spec.maximum, spec.name
