"""Registry: names, options and their errors, user Python and SQL verifiers, spec text."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers.registry import (
    PythonVerifier,
    SqlVerifier,
    VerifierRegistry,
    default_registry,
    format_spec,
    parse_spec,
)
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.errors import InternalError, UserError


def test_default_registry_holds_the_four_built_ins():
    reg = default_registry()
    assert reg.names() == ("grubbs", "histogram", "lof", "zscore")
    assert reg.make("lof") == Lof()
    assert reg.make("LOF", k=5) == Lof(k=5)
    assert reg.make("grubbs", alpha=0.01) == Grubbs(0.01)
    assert reg.make("histogram", rel=0.01) == Histogram(0.01)
    assert reg.make("zscore", z=2) == ZScore(2.0)
    assert reg.option_names("lof") == ("k", "threshold")
    for name in reg.names():
        v = reg.make(name)
        assert v.name == name
        assert reg.make(name, **v.options()) == v


def test_registries_are_independent():
    a, b = default_registry(), default_registry()
    a.register_python("mine", lambda values, v: False)
    assert "mine" in a and "mine" not in b


def test_unknown_verifier_names_the_choices():
    with pytest.raises(UserError) as err:
        default_registry().make("x")
    assert err.value.problem == "unknown verifier 'x'"
    assert err.value.fix == "use one of: grubbs, histogram, lof, zscore"


def test_unknown_option_names_the_options():
    with pytest.raises(UserError) as err:
        default_registry().make("lof", q=1)
    assert err.value.problem == "unknown option 'q' for lof"
    assert err.value.fix == "lof takes: k, threshold"


@pytest.mark.parametrize(
    "name, options, option",
    [("lof", {"k": "20"}, "k="), ("lof", {"k": 1.5}, "k="), ("lof", {"threshold": -1}, "threshold="),
     ("grubbs", {"alpha": 2}, "alpha="), ("histogram", {"rel": "x"}, "rel="), ("zscore", {"z": None}, "z=")],
)
def test_bad_values_name_the_option_and_the_fix(name, options, option):
    with pytest.raises(UserError) as err:
        default_registry().make(name, **options)
    assert option in err.value.problem and name in err.value.problem
    assert err.value.fix and f"{name}(" in err.value.fix


def test_python_verifier_gets_sorted_values_and_v():
    seen = []

    def far_from_median(values, v):
        seen.append((values.copy(), v))
        return bool(abs(v - np.median(values)) > 10)

    reg = default_registry()
    reg.register_python("far", far_from_median)
    ver = reg.make("far")
    assert isinstance(ver, PythonVerifier)
    assert ver.needs_values and not ver.needs_sql and ver.options() == {}
    assert ver.check(ArrayPopulation.of([3.0, 1.0, 2.0, 50.0], 50.0))
    assert not ver.check(ArrayPopulation.of([3.0, 1.0, 2.0, 50.0], 2.0))
    assert seen[0][0].tolist() == [1.0, 2.0, 3.0, 50.0] and seen[0][1] == 50.0
    assert ver.score(ArrayPopulation.of([3.0, 1.0, 2.0, 50.0], 50.0)) == 1.0
    with pytest.raises(UserError, match="far takes: no options"):
        reg.make("far", k=1)


def test_python_verifier_cannot_corrupt_the_population():
    def sorts_in_place(values, v):
        values[0] = 99.0
        return True

    reg = VerifierRegistry()
    reg.register_python("bad", sorts_in_place)
    pop = ArrayPopulation.of([1.0, 2.0], 1.0)
    with pytest.raises(UserError, match="python verifier 'bad' raised ValueError"):
        reg.make("bad").check(pop)
    assert pop.values().tolist() == [1.0, 2.0]


def test_python_verifier_must_return_a_bool():
    reg = VerifierRegistry()
    reg.register_python("score", lambda values, v: float(v))
    reg.register_python("npbool", lambda values, v: np.float64(v) > 1)
    with pytest.raises(UserError, match="returned float"):
        reg.make("score").check(ArrayPopulation.of([1.0], 1.0))
    assert reg.make("npbool").check(ArrayPopulation.of([2.0], 2.0)) is True
    with pytest.raises(UserError, match="not callable"):
        reg.register_python("nope", 3)


def test_sql_verifier_is_stored_and_rendered_for_the_engine():
    reg = default_registry()
    reg.register_sql("mad", " abs({v} - median({metric})) > 3 * mad({metric}) ")
    ver = reg.make("mad")
    assert isinstance(ver, SqlVerifier)
    assert ver.needs_sql and not ver.needs_values and ver.options() == {}
    assert ver.sql('"m"', "$1") == '(abs($1 - median("m")) > 3 * mad("m"))'
    # One pass: a metric expression that itself contains "{v}" is not substituted again.
    assert ver.sql('"{v}"', "?") == '(abs(? - median("{v}")) > 3 * mad("{v}"))'
    assert ver.sql_expression("m", "?") == ver.sql("m", "?")
    with pytest.raises(InternalError):
        ver.check(ArrayPopulation.of([1.0], 1.0))


@pytest.mark.parametrize(
    "template, match",
    [("", "empty"), ("   ", "empty"), (None, "empty"), ("count(*) > 3", "does not use"),
     ("{metric} > 3", "does not use {v}"), ("{value} > avg({metric})", "unknown placeholder {value}")],
)
def test_bad_sql_templates(template, match):
    with pytest.raises(UserError, match=match):
        default_registry().register_sql("s", template)


@pytest.mark.parametrize("name", ["", "Lof2", "2x", "a-b", "a b", None])
def test_bad_names(name):
    with pytest.raises(UserError, match="invalid verifier name"):
        VerifierRegistry().register_python(name, lambda values, v: True)


def test_names_cannot_be_registered_twice():
    reg = default_registry()
    with pytest.raises(UserError, match="already registered"):
        reg.register_python("lof", lambda values, v: True)
    reg.register_sql("mine", "{v} > max({metric})")
    with pytest.raises(UserError, match="already registered"):
        reg.register_python("mine", lambda values, v: True)


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
        ("mine(label='it''s', other=\"q\")", ("mine", {"label": "it's", "other": "q"})),
    ],
)
def test_parse_spec(spec, want):
    got = parse_spec(spec)
    assert got == want
    assert [type(v) for v in got[1].values()] == [type(v) for v in want[1].values()]


@pytest.mark.parametrize(
    "spec",
    ["", "   ", "(k=1)", "lof(", "lof)", "lof(k)", "lof(k=)", "lof(=1)", "lof(k=1,)", "lof(k=1 threshold=2)",
     "lof(k=1,,t=2)", "lof(k=1))", "lof(k=1) extra", "lof(k=1, k=2)", "lof(k=abc)", "lof(k=$)", "lof k=1",
     "lof(k='x)", 3],
)
def test_malformed_specs_say_how_to_write_one(spec):
    with pytest.raises(UserError) as err:
        parse_spec(spec)
    assert err.value.fix == "write it like lof(k=20, threshold=1.5)"


_names = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_values = st.one_of(
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(_names, st.dictionaries(_names, _values, max_size=4))
def test_format_then_parse_round_trips(name, options):
    text = format_spec(name, options)
    got_name, got = parse_spec(text)
    assert got_name == name
    assert got.keys() == options.keys()
    for key, value in options.items():
        assert type(got[key]) is type(value)
        assert got[key] == value or (isinstance(value, float) and math.isnan(value))


def test_make_spec_and_format_of_built_ins():
    reg = default_registry()
    for spec in ("lof(k=7, threshold=2.5)", "grubbs(alpha=0.01)", "histogram(rel=0.001)", "zscore(z=2.5)"):
        ver = reg.make_spec(spec)
        assert format_spec(ver.name, ver.options()) == spec
        assert reg.make_spec(format_spec(ver.name, ver.options())) == ver
    assert format_spec("lof", {}) == "lof"
    with pytest.raises(InternalError):
        format_spec("lof", {"threshold": math.inf})
