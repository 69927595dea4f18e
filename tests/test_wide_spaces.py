"""Context spaces far past 64 free bits, end to end: every sampling search releases, the
summary answers wide contexts exactly as the plain SQL path does, and `direct` / COE refuse
with the admissible count and the searches that work."""

from __future__ import annotations

import warnings

import duckdb
import numpy as np
import pytest

import pcor_sql
from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.builtins import BUILTIN_NAMES
from pcor_sql.core.verifiers.registry import default_registry
from pcor_sql.engine.coe_enumeration import MAX_ENUMERABLE, check_size
from pcor_sql.errors import UserError

QUERY = "SELECT v FROM t WHERE id = 0"


def wide_table(con: duckdb.DuckDBPyConnection, sizes: dict[str, int], rows: int, planted: float = 400.0) -> None:
    for name, size in sizes.items():
        labels = ", ".join(f"'{name}{j}'" for j in range(size))
        con.execute(f"CREATE TYPE {name}_t AS ENUM ({labels})")
    digits, stride = [], 1
    for name, size in sizes.items():
        digits.append(f"enum_range(NULL::{name}_t)[((hash(range) // {stride}) % {size})::BIGINT + 1]::{name}_t AS {name}")
        stride *= size
    first = next(iter(sizes))
    con.execute(
        f"CREATE TABLE t AS SELECT range AS id, {', '.join(digits)}, "
        f"CASE WHEN range = 0 THEN {float(planted)!r} ELSE (hash(range * 7 + 1) % 1000) / 10.0 END AS v FROM range({rows})"
    )
    con.execute(f"UPDATE t SET {first} = '{first}0' WHERE id = 0")


@pytest.fixture(scope="module")
def con70():
    con = duckdb.connect()
    wide_table(con, {"state": 50, "product": 6, "channel": 4, "segment": 10}, 20_000)  # 70 values
    yield con
    con.close()


@pytest.mark.parametrize("verifier", BUILTIN_NAMES)
@pytest.mark.parametrize("search", ["bfs", "dfs", "random-walk", "uniform"])
def test_every_sampling_search_releases_on_a_70_value_space(con70, search, verifier):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the in-memory ledger
        r = pcor_sql.explain_outlier(con70, QUERY, search=search, verifier=verifier, epsilon=0.5, samples=8,
                                     seed=3, owner_view=True)
    assert r.owner.population >= 1 and set(r.context) == {"state", "product", "channel", "segment"}
    assert "state0" in r.context["state"]  # the record's own values are always in its context
    # 12,000 cells: the checks walked (`python -m benchmarks scale`'s wide cases). The released context, read back by its own SQL
    # and judged by the reference verifier, is valid.
    values = con70.execute(f"SELECT v FROM t WHERE {r.predicate}").fetchnumpy()["v"]
    [(v,)] = con70.execute(QUERY).fetchall()
    assert values.size == r.owner.population
    assert default_registry().make(verifier).check(ArrayPopulation.of(values, v))


def test_direct_and_coe_refuse_with_the_count_and_the_searches_that_work(con70):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in (
            lambda: pcor_sql.explain_outlier(con70, QUERY, search="direct", epsilon=0.2, seed=1),
            lambda: pcor_sql.coe(con70, QUERY, verifier="grubbs"),
            lambda: pcor_sql.coe(con70, QUERY, verifier="grubbs", max_contexts=None),  # "no limit" still stops
        ):
            with pytest.raises(UserError) as err:
                call()
            text = str(err.value)
            assert "2^66" in text and "too many to enumerate" in text
            assert "uniform, random-walk, dfs, bfs" in text


def test_check_size_messages():
    check_size(1 << 20, 1 << 20)  # at the limit: fine
    with pytest.raises(UserError, match=r"1,048,576 admissible contexts, more than the limit of 1,000 .*max_contexts"):
        check_size(1 << 20, 1000)
    with pytest.raises(UserError, match=r"2\^41 \(about 2\.2e\+12\) admissible contexts, too many"):
        check_size(MAX_ENUMERABLE * 2, 1 << 64)
    check_size(MAX_ENUMERABLE, 1 << 64)


def test_summary_path_equals_plain_path_on_a_500_value_space():
    con = duckdb.connect()
    # 500 values, 497 free bits; V = 150 is an outlier in some contexts and not in others.
    wide_table(con, {"zip": 480, "product": 12, "channel": 8}, 6_000, planted=150.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for verifier in ("lof", "histogram", "grubbs"):
            request = pcor_sql.outlier_request(con, QUERY, search="bfs", verifier=verifier, epsilon=0.2)
            run = pcor_sql.Session(con).prepare(request)
            space = run.space(0)
            assert len(space.free_bits) == 497
            fast, plain = run.oracle(0), run.oracle(0, plain=True)
            rng = np.random.default_rng(11)
            masks = [space.full, space.v_mask]
            for density in (1, 3):  # free bits kept with probability 1/2, then 1/8
                for _ in range(8):
                    word = (1 << 497) - 1
                    for _ in range(density):
                        word &= int.from_bytes(rng.bytes(63), "little")
                    masks.append(space.from_free(word))
            verdicts = []
            for mask in masks:
                assert fast.population_size(mask) == plain.population_size(mask)
                verdicts.append(fast.is_valid(mask))
                assert verdicts[-1] == plain.is_valid(mask), (verifier, hex(mask))
            assert 0 < sum(verdicts) < len(verdicts), verifier  # both verdicts occur: the check can fail
        r = pcor_sql.explain_outlier(con, QUERY, search="bfs", verifier="lof", epsilon=0.2, samples=5, seed=2,
                                     descents=2)
        assert "zip0" in r.context["zip"]
