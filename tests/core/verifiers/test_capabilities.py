"""Verifier capabilities are declared once per class and read everywhere (DESIGN.md §4 "Declared once"): what each
built-in reads, the subclass and older-object rules, the kernel registry and the lists of names
texts show."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from pcor_sql.core.verifiers.builtins import BUILTIN_NAMES, BUILTINS, builtin_list, unserved
from pcor_sql.core.verifiers.capabilities import Capabilities, Reads, capabilities_of
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers.registry import default_registry
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.engine.compiled_checks import KERNELS
from pcor_sql.engine.verdicts import cacheable
from pcor_sql.request_specs import VERIFIER

SPARK = frozenset({Reads.MOMENTS, Reads.NEAR, Reads.SQL})


def test_each_builtin_declares_what_it_reads():
    got = {cls: (capabilities_of(cls()).reads, capabilities_of(cls()).vectorized) for cls in BUILTINS}
    assert got == {Grubbs: (Reads.MOMENTS, True), ZScore: (Reads.MOMENTS, True),
                   Histogram: (Reads.NEAR, False), Lof: (Reads.NEAR, False)}
    assert all(capabilities_of(cls()).deterministic and cacheable(cls()) for cls in BUILTINS)
    assert [capabilities_of(cls()).label for cls in BUILTINS] == ["Grubbs' test", "histogram", "LOF", "z-score"]


def test_every_builtin_has_a_compiled_kernel_and_only_exact_types_do():
    assert set(KERNELS) == set(BUILTINS)

    class Mine(Grubbs):
        pass

    assert Mine not in KERNELS


def test_a_subclass_keeps_what_it_reads_but_is_deterministic_only_when_it_says_so():
    class Mine(Lof):
        pass

    @dataclass(frozen=True)
    class Sure(ZScore):
        deterministic = True

    assert capabilities_of(Mine()).reads is Reads.NEAR and not cacheable(Mine())
    assert capabilities_of(Sure()).vectorized and cacheable(Sure())


def test_an_object_of_the_older_protocol_is_read_from_its_attributes():
    class Moments:
        name = "m"
        needs_values = False

        def check(self, pop):
            return False

        def check_many(self, n, mean, m2, v):
            return np.zeros(np.shape(n), dtype=bool)

    class Bare:
        def check(self, pop):
            return False

    class Sql:
        needs_sql = True
        deterministic = True

    assert capabilities_of(Moments()) == Capabilities(Reads.MOMENTS, False, "m", vectorized=True)
    assert capabilities_of(Bare()).reads is Reads.ALL_VALUES  # unsaid: it may read every value
    assert capabilities_of(Sql()).needs_sql and cacheable(Sql())
    with pytest.raises(ValueError, match="moments alone"):
        Capabilities(Reads.NEAR, True, "x", vectorized=True)


def test_user_verifiers_are_not_cached_and_say_what_they_read():
    registry = default_registry()
    registry.register_python("far", lambda values, v: True)
    registry.register_sql("big", "{v} > max({metric})")
    far, big = registry.make("far"), registry.make("big")
    assert capabilities_of(far).reads is Reads.ALL_VALUES and not cacheable(far)
    assert capabilities_of(big).reads is Reads.SQL and not cacheable(big)


def test_an_engine_refuses_what_it_does_not_serve_naming_what_it_does():
    registry = default_registry()
    registry.register_python("far", lambda values, v: True)
    problem, fix = unserved(registry.make("far"), SPARK, "spark")
    assert problem == "verifier 'far' reads all values of each context, which the spark engine does not serve"
    assert fix == "use grubbs, histogram, lof or zscore here, or run 'far' on DuckDB"
    assert all(unserved(cls(), SPARK, "spark") is None for cls in BUILTINS)
    assert unserved(registry.make("far"), frozenset(Reads), "duckdb") is None
    assert builtin_list([Reads.MOMENTS]) == "grubbs or zscore"


def test_the_help_text_lists_the_registry_builtins():
    assert BUILTIN_NAMES == default_registry().names() == ("grubbs", "histogram", "lof", "zscore")
    assert builtin_list() in VERIFIER.help
