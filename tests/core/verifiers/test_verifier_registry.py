"""Registry: names, options and their errors, user Python and SQL verifiers."""

import numpy as np
import pytest

from pcor_sql.core.verifiers.capabilities import Reads, capabilities_of
from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers.registry import (
    PythonVerifier,
    SqlVerifier,
    VerifierRegistry,
    default_registry,
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
    assert reg.option_names("lof") == ("k", "threshold", "duplicates")
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
    assert err.value.fix == "lof takes: k, threshold, duplicates"


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
    assert capabilities_of(ver).reads is Reads.ALL_VALUES and ver.options() == {}
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
    assert capabilities_of(ver).reads is Reads.SQL and ver.options() == {}
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
