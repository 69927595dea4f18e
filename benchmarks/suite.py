"""`python -m benchmarks bench`: how fast releases are, against a naive baseline measured in the
same run.

Groups (each a function returning JSON-able figures; `run_bench` runs them all):
- releases: for each dataset × search (uniform, random-walk, dfs, bfs) × verifier, one
  planted outlier, ε = 0.2, n = 50, `tight` accounting: the end-to-end `explain_outlier`
  (query parsing, record lookup, start search, search, ledger charge on an in-memory ledger)
  and the engine alone (`OutlierRun.release`, the `Session.prepare` hook), both with the
  per-cell summary already built (one `Session` per dataset), and the naive baseline
  (`naive.py`) with the same search and seeds;
- summary: building the per-cell summary (`build_seconds` of a fresh `Session.prepare`) and
  its sorted index (`OutlierRun.preload`);
- per-context: the time to verify one context from the summary path, per verifier, over
  uniformly drawn admissible contexts of salaries record 42 (and the naive path's);
- direct: the exact enumeration COE(D, V) with grubbs over all 2^22 admissible contexts of
  salaries record 42 (`pcor_sql.coe`), and a whole `direct` release;
- big: one bfs + grubbs release on a 10-million-row table with the salaries shape, summary
  build included, with peak memory (`bigtable.py`).

Every timed release starts with an empty Grubbs critical-value cache (a module-level
`lru_cache` of t-quantiles): each repeat is a cold, first-release-in-a-process figure.
Nothing here prints: progress goes to the `report` callback.
"""

from __future__ import annotations

import datetime as _dt
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import duckdb
import numpy as np

import pcor_sql
from benchmarks import bigtable
from benchmarks._sql import ident
from benchmarks.measure import Timing, load_average, machine, percentile, timed
from benchmarks.naive import NaiveOracle, NaiveStopped, NaiveVerifier, naive_release
from benchmarks.targets import Target, at_least, at_most
from benchmarks.tables import mib, seconds
from pcor_sql.core.randomness import make_source
from pcor_sql.core.verifiers.grubbs import grubbs_critical_one
from pcor_sql.errors import PcorError

Report = Callable[[str], None]

SEARCHES = ("uniform", "random-walk", "dfs", "bfs")
VERIFIERS = ("grubbs", "lof", "histogram", "zscore")
DATASETS = {"salaries": "salary", "homicides": "victim_age"}
FEATURED = {"salaries": 42}  # the README's planted outlier; others: the first planted id
TARGET_CELLS = {("salaries", "bfs", "lof"), ("salaries", "bfs", "grubbs")}


@dataclass(frozen=True)
class BenchConfig:
    """What to run. `quick()` and `full()` give the two documented presets."""

    quick: bool = False
    repeats: int = 20
    naive_repeats: int = 3
    naive_limit_s: float | None = None
    datasets: tuple[str, ...] = ("salaries", "homicides")
    searches: tuple[str, ...] = SEARCHES
    verifiers: tuple[str, ...] = VERIFIERS
    epsilon: float = 0.2
    samples: int = 50
    accounting: str = "tight"
    seed: int = 2024
    naive: bool = True
    per_context: int = 2000
    per_context_naive: int = 100
    direct_repeats: int = 3
    summary_repeats: int = 10
    big: bool = True
    big_rows: int = 10_000_000
    big_repeats: int = 3

    @classmethod
    def preset(cls, quick: bool, **overrides: Any) -> "BenchConfig":
        base = cls(
            quick=True, repeats=5, naive_repeats=1, naive_limit_s=10.0, per_context=500,
            per_context_naive=20, direct_repeats=1, summary_repeats=5, big_repeats=2,
        ) if quick else cls()
        given = {k: v for k, v in overrides.items() if v is not None}
        return replace(base, **given)


def _cold() -> None:
    """Forget cached Grubbs critical values, so every timed release pays for its own."""
    grubbs_critical_one.cache_clear()


def record_of(dataset: str) -> int:
    return FEATURED.get(dataset, pcor_sql.planted_outliers(dataset)[0])


@dataclass
class _Data:
    """One dataset's session (summary built), its featured record and the base request."""

    name: str
    metric: str
    record: int
    session: pcor_sql.Session
    request: pcor_sql.OutlierRequest  # the featured record, the config's ε, n and accounting
    run: Any  # the request prepared: its summary, record and lattice

    @property
    def query(self) -> str:
        return f"SELECT {self.metric} FROM {self.name} WHERE id = {self.record}"

    def prepared(self, **changes: Any) -> Any:
        """The featured record's OutlierRun with some request fields changed (summary shared)."""
        return self.session.prepare(self.request.replace(**changes))


def _prepare(con: duckdb.DuckDBPyConnection, name: str, cfg: BenchConfig) -> _Data:
    metric = DATASETS[name]
    record = record_of(name)
    session = pcor_sql.Session(con)
    request = pcor_sql.outlier_request(
        con, f"SELECT {metric} FROM {name} WHERE id = {record}", epsilon=cfg.epsilon, samples=cfg.samples,
        accounting=cfg.accounting, owner_view=True,
    )
    run = session.prepare(request)
    run.preload()  # LOF and histogram read the sorted index: built once per session, like the moments
    return _Data(name, metric, record, session, request, run)


# ---- releases -------------------------------------------------------------------------


def bench_releases(
    con: duckdb.DuckDBPyConnection, data: _Data, cfg: BenchConfig, report: Report
) -> list[dict[str, Any]]:
    out = []
    seeds = [cfg.seed + i for i in range(cfg.repeats)]
    for search in cfg.searches:
        for vname in cfg.verifiers:
            run = data.prepared(search=search, verifier=vname)
            budget = run.request.budget
            entry: dict[str, Any] = {
                "dataset": data.name, "record": data.record, "search": search, "verifier": vname,
                "epsilon": cfg.epsilon, "epsilon1": budget.epsilon1, "samples": cfg.samples,
                "accounting": cfg.accounting, "seeds": seeds,
            }
            try:
                e2e, engine, masks, verified = [], [], [], []
                for s in seeds:
                    _cold()
                    t, _ = timed(lambda: pcor_sql.explain_outlier(
                        con, data.query, search=search, verifier=vname, epsilon=cfg.epsilon,
                        samples=cfg.samples, accounting=cfg.accounting, seed=s, session=data.session))
                    e2e.append(t)
                    _cold()
                    t, rel = timed(lambda: run.release(0, make_source(s)[0]))
                    engine.append(t)
                    masks.append(int(rel.mask))
                    verified.append(rel.owner.contexts_verified)
                entry["end_to_end"] = Timing(tuple(e2e)).as_dict()
                entry["engine"] = Timing(tuple(engine)).as_dict()
                entry["contexts_verified"] = verified
            except PcorError as exc:
                entry["error"] = str(exc)
                report(f"{data.name} {search}+{vname}: {exc}")
                out.append(entry)
                continue
            if cfg.naive:
                entry.update(_naive_cell(con, run, data, cfg, vname, seeds, masks, e2e, engine))
            report(
                f"{data.name} {search}+{vname}: end-to-end {seconds(statistics.median(e2e))}"
                + (f", naive {seconds(entry['naive']['median_s'])}" if "naive" in entry else "")
            )
            out.append(entry)
    return out


def _naive_cell(con, run, data: _Data, cfg: BenchConfig, vname: str, seeds, masks, e2e, engine) -> dict[str, Any]:
    search = run.request.search
    limit = None if (data.name, search, vname) in TARGET_CELLS else cfg.naive_limit_s
    samples, stopped, same, verified = [], 0, 0, []
    speedups_e2e, speedups_engine = [], []
    for i, s in enumerate(seeds[: cfg.naive_repeats]):
        start = time.perf_counter()
        deadline = None if limit is None else start + limit
        try:
            nr = naive_release(con, run, 0, NaiveVerifier(vname, {}), make_source(s)[0], deadline=deadline)
            elapsed = time.perf_counter() - start
            same += int(nr.mask == masks[i])
            verified.append(nr.contexts_verified)
        except NaiveStopped:
            elapsed = time.perf_counter() - start
            stopped += 1
        except PcorError as exc:
            return {"naive_error": str(exc)}
        samples.append(elapsed)
        speedups_e2e.append(elapsed / e2e[i])
        speedups_engine.append(elapsed / engine[i])
    timing = Timing(tuple(samples), stopped)
    return {
        "naive": timing.as_dict(),
        "naive_limit_s": limit,
        "naive_contexts_verified": verified,
        "same_release": same,
        "compared_releases": len(samples) - stopped,
        # Per seed: naive time / engine time on that very seed (same search path when the
        # verdicts agree); the median of those ratios.
        "speedup_end_to_end": statistics.median(speedups_e2e),
        "speedup_engine": statistics.median(speedups_engine),
        "speedup_lower_bound": stopped > 0,
    }


# ---- summary, per-context, direct ------------------------------------------------------


def bench_summary(con: duckdb.DuckDBPyConnection, data: _Data, cfg: BenchConfig) -> dict[str, Any]:
    moments, index = [], []
    for _ in range(cfg.summary_repeats):
        run = pcor_sql.Session(con).prepare(data.request)  # a fresh session: the summary is built again
        moments.append(run.summary.build_seconds)
        t, _ = timed(run.preload)
        index.append(t)
    rows, cells = _rows_and_cells(con, data.run.summary.schema)
    return {
        "dataset": data.name,
        "rows": rows,
        "cells": cells,
        "build_summary": Timing(tuple(moments)).as_dict(),
        "sorted_index": Timing(tuple(index)).as_dict(),
    }


def _rows_and_cells(con: duckdb.DuckDBPyConnection, schema: Any) -> tuple[int, int]:
    """Rows in some population (every attribute non-NULL) and the cells they fill."""
    cols = [ident(name) for name in schema.names]
    (rows, cells), = con.execute(
        f"SELECT coalesce(sum(n), 0), count(*) FROM (SELECT count(*) AS n FROM {schema.relation_sql} "
        f"WHERE {' AND '.join(c + ' IS NOT NULL' for c in cols)} GROUP BY {', '.join(cols)})"
    ).fetchall()
    return int(rows), int(cells)


def bench_per_context(con: duckdb.DuckDBPyConnection, data: _Data, cfg: BenchConfig) -> list[dict[str, Any]]:
    space = data.run.space(0)
    rng = np.random.default_rng(cfg.seed)
    words = rng.integers(0, space.n_admissible, size=cfg.per_context)
    masks = list(dict.fromkeys(space.from_free(int(w)) for w in words))
    out = []
    for vname in cfg.verifiers:
        run = data.prepared(verifier=vname)
        ev = run.oracle(0)
        _cold()
        times, verdicts = [], []
        for m in masks:
            t, ok = timed(lambda: ev.is_valid(m))
            times.append(t)
            verdicts.append(ok)
        entry: dict[str, Any] = {
            "verifier": vname, "dataset": data.name, "record": data.record, "contexts": len(masks),
            "median_us": statistics.median(times) * 1e6, "p90_us": percentile(times, 90) * 1e6,
            "valid_share": sum(verdicts) / len(verdicts),
        }
        if cfg.naive and cfg.per_context_naive > 0:
            try:
                oracle = NaiveOracle(con, run, 0, NaiveVerifier(vname, {}))
            except PcorError as exc:
                entry["naive_error"] = str(exc)
                out.append(entry)
                continue
            k = min(cfg.per_context_naive, len(masks))
            ntimes, agree = [], 0
            for m, ok in zip(masks[:k], verdicts[:k]):
                t, nok = timed(lambda: oracle.is_valid(m))
                ntimes.append(t)
                agree += int(nok == ok)
            entry.update({"naive_contexts": k, "naive_median_us": statistics.median(ntimes) * 1e6,
                          "naive_agreement": agree / k})
        out.append(entry)
    return out


def bench_direct(con: duckdb.DuckDBPyConnection, data: _Data, cfg: BenchConfig, report: Report) -> dict[str, Any]:
    enum_t, release_t, size = [], [], None
    for i in range(cfg.direct_repeats):
        _cold()
        t, res = timed(lambda: pcor_sql.coe(con, data.query, verifier="grubbs", session=data.session))
        enum_t.append(t)
        size, admissible = res[0].size, res[0].admissible
        report(f"direct: exact grubbs COE of {data.name} {data.record}: {seconds(t)}")
        _cold()
        t, _ = timed(lambda: pcor_sql.explain_outlier(con, data.query, search="direct", verifier="grubbs",
                                                      epsilon=cfg.epsilon, seed=cfg.seed + i, session=data.session))
        release_t.append(t)
    return {
        "dataset": data.name, "record": data.record, "admissible": admissible, "coe_size": size,
        "enumeration": Timing(tuple(enum_t)).as_dict(), "direct_release": Timing(tuple(release_t)).as_dict(),
    }


# ---- all ----------------------------------------------------------------------------------


@dataclass
class BenchResult:
    config: dict[str, Any]
    machine: dict[str, Any]
    started: str
    wall_s: float = 0.0
    releases: list[dict[str, Any]] = field(default_factory=list)
    summary: list[dict[str, Any]] = field(default_factory=list)
    per_context: list[dict[str, Any]] = field(default_factory=list)
    direct: dict[str, Any] | None = None
    big: dict[str, Any] | None = None
    targets: list[Target] = field(default_factory=list)
    load: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "targets"}
        d["targets"] = [t.as_dict() for t in self.targets]
        return d


def run_bench(cfg: BenchConfig, report: Report = lambda _m: None) -> BenchResult:
    started = time.perf_counter()
    result = BenchResult(asdict(cfg), machine(), _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    result.load["start"] = load_average()
    con = duckdb.connect()
    try:
        pcor_sql.load_datasets(con)
        for name in cfg.datasets:
            report(f"{name}: building the per-cell summary")
            data = _prepare(con, name, cfg)
            result.summary.append(bench_summary(con, data, cfg))
            if name == "salaries":
                report("salaries: time to verify one context, per verifier")
                result.per_context = bench_per_context(con, data, cfg)
            result.releases.extend(bench_releases(con, data, cfg, report))
            if name == "salaries" and cfg.direct_repeats > 0:
                result.direct = bench_direct(con, data, cfg, report)
    finally:
        con.close()
    if cfg.big:
        with tempfile.TemporaryDirectory(prefix="pcor-bench-") as tmp:
            result.big = bigtable.run_big(Path(tmp), cfg.big_rows, cfg.big_repeats, cfg.seed, report)
    result.targets = evaluate_targets(result)
    result.load["end"] = load_average()
    result.wall_s = time.perf_counter() - started
    return result


def _cell(result: BenchResult, dataset: str, search: str, verifier: str) -> dict[str, Any] | None:
    for e in result.releases:
        if (e["dataset"], e["search"], e["verifier"]) == (dataset, search, verifier) and "error" not in e:
            return e
    return None


def evaluate_targets(result: BenchResult) -> list[Target]:
    lof = _cell(result, "salaries", "bfs", "lof")
    grubbs = _cell(result, "salaries", "bfs", "grubbs")
    targets = [
        at_most("bfs+lof release on salaries, end to end after the summary exists (median)",
                lof["end_to_end"]["median_s"] if lof else None, 0.5, seconds),
        at_least("bfs+lof speed-up over the naive baseline (median per seed, end to end)",
                 lof.get("speedup_end_to_end") if lof else None, 50.0, lambda x: f"{x:,.0f}×",
                 lower_bound=bool(lof and lof.get("speedup_lower_bound"))),
        at_most("bfs+grubbs release on salaries, end to end (median)",
                grubbs["end_to_end"]["median_s"] if grubbs else None, 0.1, seconds),
        at_most("direct: exact grubbs enumeration of salaries record 42 (median)",
                result.direct["enumeration"]["median_s"] if result.direct else None, 30.0, seconds),
    ]
    big = result.big
    targets.append(at_most(
        "bfs+grubbs on the 10M-row table, summary build included (median, end to end)",
        statistics.median(big["end_to_end_s"]) if big else None, 3.0, seconds,
        note=f"{big['rows']:,} rows" if big else ""))
    targets.append(at_most(
        "peak memory of the 10M-row run", float(big["peak_rss_bytes"]) if big else None, 4 * 2**30,
        lambda b: mib(b) if b < 2**30 else f"{b / 2**30:.0f} GiB", strict=True))
    return targets
