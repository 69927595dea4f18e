"""Verifier specs as text (`--verifier`, the API): one grammar with `USING lof(k = 20)`."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.verifiers.registry import default_registry
from pcor_sql.engine.record_search import verifier_label
from pcor_sql.errors import UserError
from pcor_sql.frontend.option_lists import parse_verifier_spec


@pytest.mark.parametrize(
    "spec, want",
    [
        ("lof", ("lof", {})),
        ("lof()", ("lof", {})),
        ("lof(k=10)", ("lof", {"k": 10})),
        ("lof(k=20, threshold=1.5)", ("lof", {"k": 20, "threshold": 1.5})),
        ("  LOF ( K = 20 ,threshold=2 )  ", ("lof", {"k": 20, "threshold": 2})),
        ("grubbs(alpha=1e-3)", ("grubbs", {"alpha": 0.001})),
        ("zscore(z=.5)", ("zscore", {"z": 0.5})),
        ("x(a=-3, b=+2.5E2)", ("x", {"a": -3, "b": 250.0})),
        ("mine(label='it''s', flag=TRUE)", ("mine", {"label": "it's", "flag": True})),
        ("lof(k = 20) -- a comment", ("lof", {"k": 20})),
    ],
)
def test_parse_verifier_spec(spec, want):
    got = parse_verifier_spec(spec)
    assert got == want
    assert [type(v) for v in got[1].values()] == [type(v) for v in want[1].values()]


@pytest.mark.parametrize(
    "spec",
    ["", "   ", "(k=1)", "lof(", "lof)", "lof(k)", "lof(k=)", "lof(=1)", "lof(k=1,)", "lof(k=1 threshold=2)",
     "lof(k=1,,t=2)", "lof(k=1))", "lof(k=1) extra", "lof(k=1, k=2)", "lof(k=abc)", "lof(k=$)", "lof k=1",
     "lof(k='x)", "lof(k=(1))", 'mine(other="q")', 3],
)
def test_malformed_specs_name_the_spec_and_the_fix(spec):
    with pytest.raises(UserError) as err:
        parse_verifier_spec(spec)
    assert "verifier spec" in err.value.problem and "\n" not in err.value.problem and err.value.fix


def test_a_double_quoted_value_is_a_name_in_sql():
    with pytest.raises(UserError) as err:
        parse_verifier_spec('mine(other="q")')
    assert "double quotes" in err.value.problem and err.value.fix == "write it in single quotes: other = 'q'"


_names = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_values = st.one_of(
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
)


def spec_text(name, options):
    """A spec as a user writes it: SQL literals (TRUE, 'it''s', repr of a number)."""
    def literal(value):
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return repr(value)

    inner = ", ".join(f"{key}={literal(value)}" for key, value in options.items())
    return f"{name}({inner})" if inner else name


@settings(max_examples=300, deadline=None)
@given(_names, st.dictionaries(_names, _values, max_size=4))
def test_written_then_parsed_round_trips(name, options):
    text = spec_text(name, options)
    got_name, got = parse_verifier_spec(text)
    assert got_name == name
    assert got.keys() == options.keys()
    for key, value in options.items():
        assert type(got[key]) is type(value)
        assert got[key] == value or (isinstance(value, float) and math.isnan(value))


def test_specs_of_the_built_ins_round_trip_through_the_registry_and_the_label():
    reg = default_registry()
    for spec in ("lof(k=7, threshold=2.5)", "grubbs(alpha=0.01)", "histogram(rel=0.001)", "zscore(z=2.5)"):
        name, options = parse_verifier_spec(spec)
        ver = reg.make(name, **options)
        assert ver.options() == options
        assert verifier_label(ver) == spec and parse_verifier_spec(verifier_label(ver)) == (name, options)
