"""The verdict cache: same outputs with and without it, bounded, keyed by record and verifier,
dropped with the summary (pcor_sql/engine/verdicts.py)."""

from __future__ import annotations

import random
import tracemalloc
import warnings

import duckdb
import pytest

import pcor_sql
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers.registry import PythonVerifier
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.engine.datasets import load_dataset
from pcor_sql.engine.verdicts import DEFAULT_MAX_ENTRIES, VerdictCache, cacheable

Q = "SELECT salary FROM salaries WHERE id = {}"


@pytest.fixture(scope="module")
def con():
    connection = duckdb.connect()
    load_dataset(connection, "salaries")
    yield connection
    connection.close()


def _release(con, session, rid, verifier, search, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = pcor_sql.explain_outlier(con if session is None else None, Q.format(rid), session=session,
                                     verifier=verifier, search=search, seed=seed, samples=20, owner_view=True)
    return r.predicate, r.em_calls, r.start_source, r.owner.population, r.owner.contexts_verified, r.owner.start_checks


def _summary(session):
    [summary] = session._summaries.values()
    return summary


@pytest.mark.parametrize("verifier", ["lof", "histogram", "grubbs", "zscore"])
def test_a_reused_session_releases_what_fresh_sessions_release(con, verifier):
    # Interleaved records, searches and repeated seeds on one Session (verdicts reused) against a
    # fresh Session per release (nothing reused): every seeded output is the same, owner view too.
    session = pcor_sql.Session(con)
    plan = [(42, "bfs", 3), (171, "bfs", 3), (42, "dfs", 4), (42, "bfs", 3), (42, "random-walk", 5), (171, "bfs", 6)]
    for rid, search, seed in plan:
        assert _release(con, session, rid, verifier, search, seed) == _release(con, None, rid, verifier, search, seed)
    assert len(_summary(session).verdicts) > 0


def test_a_repeated_release_checks_nothing_again(con, monkeypatch):
    session = pcor_sql.Session(con)
    first = _release(con, session, 42, "lof", "bfs", 7)
    stored = len(_summary(session).verdicts)

    def no_check(self, pop):
        raise AssertionError("a cached verdict was recomputed")

    def no_sweep(*args, **kwargs):
        raise AssertionError("the start search ran again")

    def no_compiled_check(*args):  # the compiled LOF check (engine.lof_checks) the evaluator runs
        return lambda member: no_check(None, None)

    monkeypatch.setattr(Lof, "check", no_check)
    monkeypatch.setattr("pcor_sql.engine.lof_checks.lof_check", no_compiled_check)
    monkeypatch.setattr("pcor_sql.engine.evaluator.find_start", no_sweep)
    monkeypatch.setattr(type(_summary(session)), "member", no_sweep)  # sizes are remembered too
    assert _release(con, session, 42, "lof", "bfs", 7) == first  # every verdict, size and the start from the cache
    assert len(_summary(session).verdicts) == stored
    monkeypatch.undo()
    monkeypatch.setattr(Lof, "check", no_check)
    monkeypatch.setattr("pcor_sql.engine.lof_checks.lof_check", no_compiled_check)
    with pytest.raises(AssertionError, match="recomputed"):
        _release(con, session, 42, "lof", "bfs", 7 + 1000)  # other coins reach other contexts


def test_the_owner_view_counts_the_start_search(con):
    session = pcor_sql.Session(con)
    searched = _release(con, session, 42, "lof", "bfs", 1)
    assert searched[2] == "search" and 1 <= searched[-1] <= 300
    assert _release(con, session, 42, "lof", "bfs", 2)[-1] == searched[-1]  # the remembered start: same count
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        valid = pcor_sql.explain_outlier(con, Q.format(42), verifier="lof", search="bfs", seed=1).context
        given = pcor_sql.explain_outlier(con, Q.format(42), verifier="lof", search="bfs", seed=1, owner_view=True,
                                         start=valid)
        direct = pcor_sql.explain_outlier(con, Q.format(42), verifier="grubbs", search="direct", seed=1,
                                          owner_view=True, by=["job_title", "year"])
    assert (given.start_source, given.owner.start_checks) == ("user", 0)
    assert (direct.start_source, direct.owner.start_checks) == ("none", 0)
    assert given.owner.as_dict()["start_checks"] == 0


def test_verdicts_are_kept_per_record_and_per_verifier_options(con):
    session = pcor_sql.Session(con)
    _release(con, session, 42, "lof", "bfs", 1)
    _release(con, session, 42, "lof(k=5)", "bfs", 1)
    _release(con, session, 171, "lof", "bfs", 1)
    keys = list(_summary(session).verdicts._groups)
    assert len(keys) == 3
    assert {k[3] for k in keys} == {Lof(), Lof(k=5)}  # (asker, cell, value, verifier)
    assert len({(k[1], k[2]) for k in keys}) == 2  # two records
    assert {k[0] for k in keys} == {"owner"}


def test_a_new_session_starts_without_verdicts(con):
    s1, s2 = pcor_sql.Session(con), pcor_sql.Session(con)
    _release(con, s1, 42, "lof", "bfs", 1)
    _release(con, s2, 42, "grubbs", "dfs", 1)
    assert _summary(s1) is not _summary(s2)
    assert {k[3] for k in _summary(s2).verdicts._groups} == {Grubbs()}


def test_only_pure_verifiers_are_cached():
    assert all(cacheable(v) for v in (Lof(), Grubbs(), Histogram(), ZScore()))
    user = PythonVerifier("mine", lambda values, v: True)
    assert not cacheable(user)
    assert VerdictCache().store(1, 2.0, user) is None

    class Declared:
        deterministic = True

    assert cacheable(Declared())


def test_the_bound_drops_the_least_recently_used_group():
    cache = VerdictCache(max_entries=10)
    a = cache.store(1, 1.0, Lof())
    for m in range(6):
        a.put(m, True)
    b = cache.store(2, 1.0, Lof())
    for m in range(4):
        b.put(m, False)
    assert len(cache) == 10
    cache.store(1, 1.0, Lof())  # a is used again: b is now the least recent
    c = cache.store(3, 1.0, Lof())
    c.put(0, True)
    assert len(cache) == 7  # b's 4 verdicts went to make room for c's first
    assert (2, 1.0, Lof()) not in cache._groups and a.get(5) is True and c.get(0) is True


def test_a_group_alone_at_the_bound_stops_growing_and_stays_right():
    cache = VerdictCache(max_entries=3)
    s = cache.store(1, 1.0, Lof())
    for m in range(5):
        s.put(m, m % 2 == 0)
    assert len(cache) == 3 and [s.get(m) for m in range(5)] == [True, False, True, None, None]
    s.put(0, True)  # already there: no change
    s.put_size(0, 10)
    s.put_start(100, 0, 2, {0: True, 1: False})
    assert len(cache) == 3 and s.size(0) is None and s.start(100) is None  # nothing past the bound


def test_sizes_and_starts_count_toward_the_bound():
    cache = VerdictCache(max_entries=10)
    a = cache.store(1, 1.0, Lof())
    a.put(1, True)
    a.put_size(1, 7)
    a.put_start(20_000, 1, 3, {4: False, 2: False, 1: True})
    assert len(cache) == 5 and a.size(1) == 7 and a.start(20_000) == (1, 3, {4: False, 2: False, 1: True})
    b = cache.store(2, 1.0, Lof())
    b.put_start(20_000, None, 6, {m: False for m in range(6)})  # 5 + 6 > 10: a is dropped whole
    assert len(cache) == 6 and b.start(20_000)[0] is None and (1, 1.0, Lof()) not in cache._groups


def test_the_default_bound_holds_under_64_mib_on_a_57_bit_space():
    # The module doc's arithmetic: ~90 bytes per verdict with 60-bit context keys.
    import random

    rnd = random.Random(0)
    n = 50_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = VerdictCache()
        store = cache.store(1, 1.0, Lof())
        for _ in range(n):
            store.put(rnd.getrandbits(57) | (1 << 59), True)  # the cache holds the only reference to each key
        per_entry = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    assert len(cache) == n
    assert per_entry * DEFAULT_MAX_ENTRIES < 64 * 2**20, per_entry


@pytest.mark.parametrize("bound", [3, 9, 14, 40])
def test_put_many_and_put_sizes_leave_what_one_put_after_the_other_leaves(bound):
    def fill(batched: bool) -> tuple:
        cache = VerdictCache(max_entries=bound)
        other = cache.store(2, 1.0, Lof())
        for m in range(5):
            other.put(m, True)
        s = cache.store(1, 1.0, Lof())
        s.put(3, False)
        verdicts, sizes = {m: m % 3 == 0 for m in range(12)}, {m: 10 + m for m in range(8)}
        if batched:
            s.put_many(verdicts)
            s.put_sizes(sizes)
        else:
            for m, v in verdicts.items():
                s.put(m, v)
            for m, n in sizes.items():
                s.put_size(m, n)
        return (len(cache), [s.get(m) for m in range(12)], [s.size(m) for m in range(8)],
                [other.get(m) for m in range(5)])

    assert fill(True) == fill(False)


@pytest.mark.parametrize("seed", range(40))
def test_batched_puts_match_single_puts_over_random_batches(seed):
    """Random batches (overlapping keys, differing values, a second group or none, bounds that
    fill up): `put_many` / `put_sizes` leave what one `put` after the other leaves, the fast
    paths (all fit and none known; the group alone and full) included."""
    rng = random.Random(seed)
    bound, others = rng.randint(1, 60), rng.randint(0, 2)
    batches = [(rng.random() < 0.6, {rng.randint(0, 80): rng.random() < 0.5 for _ in range(rng.randint(0, 25))})
                for _ in range(8)]

    def fill(batched: bool) -> tuple:
        cache = VerdictCache(max_entries=bound)
        olds = [cache.store(10 + j, 1.0, Lof()) for j in range(others)]
        for j, old in enumerate(olds):
            for m in range(j + 3):
                old.put(m, True)
        s = cache.store(1, 1.0, Lof())
        for is_verdicts, items in batches:
            if batched:
                (s.put_many if is_verdicts else s.put_sizes)(items)
            else:
                for m, x in items.items():
                    (s.put if is_verdicts else s.put_size)(m, x)
        return (len(cache), [s.get(m) for m in range(81)], [s.size(m) for m in range(81)],
                [[old.get(m) for m in range(5)] for old in olds], list(cache._groups))

    assert fill(True) == fill(False)
