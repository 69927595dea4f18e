"""The summary build in DuckDB's `threads` (DESIGN.md §10 "Building the summary"): the same present cells, sorted
runs and moments, byte for byte, as the build before it (frozen in
`benchmarks.summary_build_old`) at any thread count, on tables of one record batch and of
several, with ties, −0.0 beside 0.0, NULL attributes; the same bad-metric count and first value
outside a domain; the thread count taken from the connection."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pcor_sql.engine.counting_runs as counting_runs
import pcor_sql.engine.run_sorting as run_sorting
from benchmarks.summary_build_old import old_build
from pcor_sql.core.run_kernels import run_moments
from pcor_sql.engine.build_threads import duckdb_threads, even_blocks
from pcor_sql.engine.counting_runs import read_cells
from pcor_sql.engine.run_sorting import sorted_runs
from pcor_sql.engine.schema import resolve_schema
from pcor_sql.engine.summary import build_summary


def new_build(con, schema, threads):
    rows = read_cells(con, schema, threads)
    present, runs, moments = rows.runs(threads)
    return present, runs, moments, rows.bad_metric, rows.outside


def same_bits(a, b) -> bool:
    """Bit for bit, for arrays that hold the input's own values in another order (present keys,
    run values and starts): a permutation does no arithmetic, so its bits are the same on every
    CPU, and -0.0 stays apart from 0.0."""
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def close_moments(a, b) -> bool:
    """Moments are sums: two builds may add in another order (numpy's reductions differ with the
    CPU's vector width), which moves a mean or variance of at most a few thousand values of
    magnitude < 100 by a few ulps — far below 1e-9 relative (1e-12 absolute, for means near 0)."""
    return a.dtype == b.dtype and np.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True)


def assert_same(old, new):
    """The present keys and runs bit for bit, each moment array within its rounding; then the
    checks' inputs."""
    for a, b in zip([old[0], old[1].values, old[1].starts], [new[0], new[1].values, new[1].starts]):
        assert same_bits(a, b)
    assert all(close_moments(a, b) for a, b in zip(old[2], new[2]))
    assert old[3:] == new[3:]


def enum_table(con, rows):
    con.execute("DROP TABLE IF EXISTS t")  # the previous example's, on a shared connection
    con.execute("DROP TYPE IF EXISTS g_t")
    con.execute("CREATE TYPE g_t AS ENUM ('a', 'b', 'c', 'unused')")
    con.execute("CREATE TABLE t(g g_t, h g_t, x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    return resolve_schema(con, "t", "x")


VALUES = st.sampled_from([0.0, -0.0, 1.0, 2.5, -3.0]) | st.floats(-1e6, 1e6)


@pytest.fixture(scope="module")
def shared_con():
    """One connection for a property's examples (each replaces table t and its type): a
    connection costs 50-130 ms on a loaded machine, more than an example."""
    con = duckdb.connect()
    yield con
    con.close()


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.sampled_from(["a", "b", "c"]), VALUES),
                     min_size=1, max_size=80))
def test_one_batch_the_same_as_the_old_build_at_1_and_2_threads(shared_con, rows):
    con = shared_con
    schema = enum_table(con, rows)
    old = old_build(con, schema)
    for threads in (1, 2):
        assert_same(old, new_build(con, schema, threads))


def generated(con, rows, seed, cells, null_every, grain):
    """`rows` rows over `cells` = (|a|, |b|) cells, several record batches: a NULL `a` every
    `null_every` rows, values rounded to `grain` (coarse: many ties), −0.0 where they round to 0."""
    na, nb = cells
    con.execute(f"CREATE TYPE a_t AS ENUM ({', '.join(repr(f'a{i}') for i in range(na))})")
    con.execute(f"CREATE TYPE b_t AS ENUM ({', '.join(repr(f'b{i}') for i in range(nb))})")
    con.execute(
        f"CREATE TABLE g AS SELECT CASE WHEN i % {null_every} = 0 THEN NULL ELSE ('a' || (hash(i + {seed}) % {na}))::a_t END AS a, "
        f"('b' || (hash(i * 3 + {seed}) % {nb}))::b_t AS b, "
        f"CASE WHEN i % 11 = 0 THEN -0.0 ELSE round(((hash(i * 7 + {seed}) % 20001)::DOUBLE - 10000) / {grain}) * {grain} END AS x "
        f"FROM range({rows}) t(i)")
    return resolve_schema(con, "g", "x")


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10**6), cells=st.sampled_from([(3, 2), (40, 30), (90, 80)]),
       null_every=st.sampled_from([7, 1000, 10**9]), grain=st.sampled_from([0.5, 1000.0, 5000.0]))
def test_several_batches_the_same_as_the_old_build_at_any_thread_count(seed, cells, null_every, grain):
    con = duckdb.connect()
    schema = generated(con, 260_000, seed, cells, null_every, grain)
    old = old_build(con, schema)
    assert len(read_cells(con, schema, 2).values) >= 3  # DuckDB's record batches: blocks for the threads
    for threads in (1, 2, 3, 8):
        assert_same(old, new_build(con, schema, threads))


@pytest.mark.parametrize("threads", [1, 2])
def test_the_same_bad_metric_count_and_first_outside_value(threads):
    con = duckdb.connect()
    con.execute("CREATE TYPE a_t AS ENUM ('p', 'q', 'r', 's')")
    con.execute("CREATE TABLE b AS SELECT (['p', 'q', 'r'][1 + (hash(i) % 3)::BIGINT])::a_t AS a, "
                "CASE WHEN i % 50000 = 7 THEN NULL WHEN i % 70000 = 9 THEN 'NaN'::DOUBLE "
                "WHEN i = 250000 THEN 'inf'::DOUBLE ELSE i / 3.0 END AS x FROM range(300000) t(i)")
    con.execute("UPDATE b SET a = 's' WHERE rowid IN (200000, 140000)")
    schema = resolve_schema(con, "b", "x", domains={"a": ["p", "q", "r"]})
    old, new = old_build(con, schema), new_build(con, schema, threads)
    assert old[3:] == new[3:] and new[3] == 6 + 5 + 1 and new[4] == ("a", "s")


def test_the_build_follows_duckdbs_threads_setting(monkeypatch):
    con = duckdb.connect()
    con.execute("SET threads = 3")
    assert duckdb_threads(con) == 3 and duckdb_threads(None) == 1
    schema = generated(con, 300_000, 1, (40, 30), 1000, 0.5)
    seen = []

    def recording(fn, jobs, threads):
        seen.append(threads)
        return [fn(job) for job in jobs]

    monkeypatch.setattr(counting_runs, "in_threads", recording)
    monkeypatch.setattr(run_sorting, "in_threads", recording)
    build_summary(con, schema, with_values=True)
    assert seen == [3, 3, 3]  # the keys, the counting sort, the runs' sorts
    con.execute("SET threads = 1")
    seen.clear()
    build_summary(con, schema, with_values=True)
    assert seen == [1, 1, 1]


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 300), min_size=1, max_size=12), seed=st.integers(0, 2**32 - 1),
       scale=st.sampled_from([1e-3, 1.0, 1e9]))
def test_run_moments_are_numpys_bit_for_bit(lengths, seed, scale):
    values = np.sort(np.random.default_rng(seed).normal(7.0, 1.0, sum(lengths)) * scale)
    starts = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    mean, var = np.empty(len(lengths)), np.empty(len(lengths))
    run_moments(values, starts, 0, len(lengths), mean, var, np.empty(max(lengths)))
    for c, (a, b) in enumerate(zip(starts[:-1], starts[1:])):
        run = values[a:b]
        if run.size == 0:
            assert np.isnan(mean[c]) and np.isnan(var[c])
            continue
        mu = run.sum() / run.size
        assert close_moments(mean[c : c + 1], np.array([mu]))
        assert close_moments(var[c : c + 1], np.array([np.square(run - mu).sum() / run.size]))


@pytest.mark.parametrize("every_list", [True, False])
def test_sorted_runs_are_the_old_ones_at_any_thread_count(every_list):
    # The GROUP BY path's lists (some left out: rows with a NULL attribute) and the counting
    # sort's cells (every list, sorted in place), long runs and short ones.
    from benchmarks.summary_build_old import sorted_runs as old_sorted_runs

    rng = np.random.default_rng(5)
    lengths = np.concatenate((rng.integers(0, 4000, 150), rng.integers(0, 60, 3000)))
    values = np.round(rng.normal(0, 2, lengths.sum()))  # ties, and −0.0 beside 0.0
    values[rng.random(values.size) < 0.1] = -0.0
    groups = np.arange(lengths.size) if every_list else np.flatnonzero(rng.random(lengths.size) < 0.8)
    with np.errstate(invalid="ignore"):  # an empty list's mean: 0 / 0
        old_runs, old_moments = old_sorted_runs(values.copy(), lengths, groups)
    for threads in (1, 2, 5):
        runs, moments = sorted_runs(values.copy(), lengths, groups, threads)
        assert same_bits(runs.values, old_runs.values) and np.array_equal(runs.starts, old_runs.starts)
        assert all(close_moments(a, b) for a, b in zip(moments, old_moments))


def test_even_blocks_cover_every_item_once():
    cumulative = np.concatenate(([0], np.cumsum([5, 0, 1, 9, 3, 0, 0, 2])))
    for parts in (1, 2, 3, 8, 20):
        blocks = even_blocks(cumulative, parts)
        assert blocks[0][0] == 0 and blocks[-1][1] == 8 and len(blocks) <= parts
        assert all(a < b and b == c for (a, b), (c, _) in zip(blocks, blocks[1:] + [(8, 0)]))
    assert even_blocks(np.zeros(1), 4) == []


@settings(max_examples=80, deadline=None)
@given(runs=st.lists(st.lists(st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, float("nan"), float("inf")]) | st.floats(-9, 9),
                              max_size=60), min_size=1, max_size=8))
def test_short_runs_sorted_as_numpy_sorts_them_or_left_to_it(runs):
    from pcor_sql.core.run_kernels import SMALL_RUN, sort_small_runs

    values = np.array([x for run in runs for x in run], dtype=np.float64)
    starts = np.concatenate(([0], np.cumsum([len(r) for r in runs]))).astype(np.int64)
    left = np.empty(len(runs), dtype=np.int64)
    left = set(left[: sort_small_runs(values, starts, 0, len(runs), SMALL_RUN, left)].tolist())
    for c, run in enumerate(runs):
        arr = np.array(run, dtype=np.float64)
        ambiguous = np.isnan(arr).any() or ((arr == 0) & np.signbit(arr)).any() and ((arr == 0) & ~np.signbit(arr)).any()
        assert (c in left) == (len(run) > 1 and (len(run) > SMALL_RUN or bool(ambiguous)))
        if c not in left:
            assert same_bits(values[starts[c] : starts[c + 1]], np.sort(arr))


def test_macros_named_like_the_builtins_change_nothing():
    # A user's database may hold macros named like DuckDB's functions; the build calls the
    # built-ins (`system.main.enum_code`, `system.main.current_setting`), which no macro takes.
    con = duckdb.connect()
    schema = generated(con, 130_000, 3, (40, 30), 97, 0.5)
    before = new_build(con, schema, 2)
    con.execute("CREATE MACRO enum_code(x) AS 0")
    con.execute("CREATE MACRO current_setting(x) AS 'seven'")
    assert duckdb_threads(con) == int(con.execute("SELECT system.main.current_setting('threads')").fetchall()[0][0])
    assert_same(before, new_build(con, schema, 2))


def test_serving_threads_are_raised_while_any_build_runs():
    """`ServingThreads`: DuckDB serves on `serving` threads; the first of overlapping builds raises
    the setting to `building`, the last lowers it again; nothing changes when serving ≥ building."""
    from pcor_sql.engine.build_threads import ServingThreads

    con = duckdb.connect()
    threads = ServingThreads(con, 1, 3)
    assert duckdb_threads(con) == 1
    with threads.building():
        assert duckdb_threads(con) == 3
        with threads.building():
            assert duckdb_threads(con) == 3
        assert duckdb_threads(con) == 3  # another build still runs
    assert duckdb_threads(con) == 1
    with pytest.raises(RuntimeError), threads.building():
        raise RuntimeError("a build that fails")
    assert duckdb_threads(con) == 1
    wide = ServingThreads(con, 4, 2)
    with wide.building():
        assert duckdb_threads(con) == 4
    assert duckdb_threads(con) == 4


@settings(max_examples=60, deadline=None)
@given(runs=st.lists(st.lists(st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, float("nan"), float("inf"), -float("inf"),
                                               5e-324, -5e-324, 1e300]) | st.floats(-9, 9) | st.integers(-3, 3),
                              min_size=49, max_size=400), min_size=1, max_size=6),
       longest=st.sampled_from([64, 400]))
def test_long_runs_radix_sorted_as_numpy_sorts_them_or_left_to_it(runs, longest):
    from pcor_sql.core.run_kernels import radix_sort_runs

    values = np.array([float(x) for run in runs for x in run], dtype=np.float64)
    starts = np.concatenate(([0], np.cumsum([len(r) for r in runs]))).astype(np.int64)
    listed = np.arange(len(runs), dtype=np.int64)[::-1].copy()  # in any order
    keys, spare = np.empty(longest, dtype=np.uint64), np.empty(longest, dtype=np.uint64)
    left = np.empty(len(runs), dtype=np.int64)
    k = radix_sort_runs(values, starts, listed, len(runs), keys, spare, np.zeros((8, 256), dtype=np.int64), left)
    left = set(left[:k].tolist())
    for c, run in enumerate(runs):
        arr = np.array([float(x) for x in run], dtype=np.float64)
        zero = arr == 0
        ambiguous = np.isnan(arr).any() or (zero & np.signbit(arr)).any() and (zero & ~np.signbit(arr)).any()
        assert (c in left) == (len(run) > longest or bool(ambiguous))
        got = values[starts[c]: starts[c + 1]]
        assert same_bits(got, arr if c in left else np.sort(arr))  # a run left is untouched
