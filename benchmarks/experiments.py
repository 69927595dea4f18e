"""The PCOR paper's experiment groups (§6.3–6.6, Tables 2–11) on the bundled datasets.

Each group varies one thing around the paper's default — BFS, LOF, population utility,
ε = 0.2, n = 50 — and reports, per setting, the runtime of one release (min / max / average)
and the utility ratio (mean and 90 % confidence interval), under both accountings:
`paper` (ε = (2n+2)ε1 for dfs/bfs, 2ε1 otherwise) and `tight` ((n+1)ε1, ε1).

- Records: planted contextual outliers (`planted_outliers`) — all of them, or a seeded
  uniform sample of `records` of them (not the first ones: the list order is arbitrary and a
  prefix could be all easy or all hard cases) — on the full lattice of all three attributes
  (salaries: 2^22 admissible contexts per record).
- Utility ratio = utility of the released context / largest utility in COE(D, V). The
  denominator is exact (`exact.best_first_max`: contexts verified in decreasing utility until
  the first valid one), which keeps LOF tractable on 4.2 million contexts; for grubbs it is
  cross-checked against the full enumeration of the oracle's `coe`.
- Runtime: `OutlierRun.release` (the engine: start search, private search, re-verification)
  with the per-cell summary already built (`Session.prepare`), each release with an empty
  Grubbs critical-value cache.
- Seeds: release r of record V in a cell uses numpy's `default_rng([seed, cell, V, r])` with
  `cell` the CRC-32 of the cell's description, so every figure can be re-run alone.
- CI: mean ± t(0.95, R − 1)·s/√R over the R releases (Student t; releases of several
  records are pooled, as the paper pools its 200 runs).
"""

from __future__ import annotations

import math
import statistics
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import duckdb
import numpy as np

import pcor_sql
from benchmarks.exact import ExactMax, best_first_max, utilities_by_word
from pcor_sql.core.start import find_start
from pcor_sql.core.verifiers.grubbs import grubbs_critical_one
from pcor_sql.errors import PcorError, UserError

Report = Callable[[str], None]

METRICS = {"salaries": "salary", "homicides": "victim_age"}
ACCOUNTINGS = ("paper", "tight")


@dataclass(frozen=True)
class Cell:
    """One experimental setting (a row of a paper table, under one accounting)."""

    dataset: str
    search: str = "bfs"
    verifier: str = "lof"
    utility: str = "population"
    epsilon: float = 0.2
    samples: int = 50
    accounting: str = "paper"

    @property
    def code(self) -> int:
        return zlib.crc32(repr(self).encode())


@dataclass(frozen=True)
class Row:
    label: str
    changes: dict[str, Any]
    paper_runtime: str
    paper_utility: str


@dataclass(frozen=True)
class Group:
    key: str
    tables: str  # "Tables 2–3"
    what: str
    label: str  # first column's header
    rows: tuple[Row, ...]
    fixed: tuple[tuple[str, str], ...]  # constant columns (header, field of Cell)


def _r(label: str, paper_runtime: str, paper_utility: str, **changes: Any) -> Row:
    return Row(label, changes, paper_runtime, paper_utility)


# The paper's figures (salary dataset, 51,000 records, 132-core machine): T_min / T_max / T_avg,
# and utility mean (90 % CI).
GROUPS: tuple[Group, ...] = (
    Group("sampling", "Tables 2–3", "Sampling methods", "Algorithm", (
        _r("Uniform", "7m / 24h / 97m", "0.65 (0.64, 0.67)", search="uniform"),
        _r("Random Walk", "15s / 109s / 51s", "0.57 (0.55, 0.60)", search="random-walk"),
        _r("DFS", "8m / 80m / 40m", "0.88 (0.85, 0.90)", search="dfs"),
        _r("BFS", "6m / 61m / 37m", "0.90 (0.88, 0.93)", search="bfs"),
    ), (("ε", "epsilon"), ("Outlier", "verifier"))),
    Group("overlap", "Tables 4–5", "Intersection (overlap) utility", "Algorithm", (
        _r("DFS", "3m / 47m / 19m", "0.88 (0.86, 0.91)", search="dfs", utility="overlap"),
        _r("BFS", "5m / 48m / 20m", "0.97 (0.95, 0.98)", search="bfs", utility="overlap"),
    ), (("ε", "epsilon"), ("Outlier", "verifier"))),
    Group("verifiers", "Tables 6–7", "Outlier detection algorithms", "Algorithm", (
        _r("Grubbs", "0.5m / 1m / 0.8m", "0.86 (0.84, 0.89)", verifier="grubbs"),
        _r("Histogram", "2m / 4m / 3.4m", "0.89 (0.87, 0.91)", verifier="histogram"),
        _r("LOF", "(Table 2: 6m / 61m / 37m)", "(Table 3: 0.90)", verifier="lof"),
        _r("z-score", "—", "—", verifier="zscore"),
    ), (("ε", "epsilon"), ("Sampling", "search"))),
    Group("epsilon", "Tables 8–9", "Effect of the privacy parameter ε", "ε", (
        _r("0.05", "2m / 29m / 15m", "0.67 (0.62, 0.71)", epsilon=0.05),
        _r("0.1", "2m / 29m / 16m", "0.82 (0.78, 0.85)", epsilon=0.1),
        _r("0.2", "3m / 30m / 17m", "0.90 (0.88, 0.93)", epsilon=0.2),
        _r("0.4", "3m / 30m / 17m", "0.92 (0.90, 0.94)", epsilon=0.4),
    ), (("Sampling", "search"), ("Outlier", "verifier"))),
    Group("samples", "Tables 10–11", "Effect of the number of samples n", "# Samples", (
        _r("25", "1m / 14m / 7m", "0.85 (0.81, 0.88)", samples=25),
        _r("50", "3m / 29m / 16m", "0.88 (0.85, 0.91)", samples=50),
        _r("100", "6m / 61m / 37m", "0.90 (0.88, 0.93)", samples=100),
        _r("200", "21m / 163m / 99m", "0.84 (0.81, 0.87)", samples=200),
    ), (("Sampling", "search"), ("Outlier", "verifier"))),
)


@dataclass
class CellResult:
    cell: Cell
    seconds: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    visited_ratios: list[float] = field(default_factory=list)
    failures: int = 0
    records: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cell": self.cell.__dict__, "releases": len(self.seconds), "failures": self.failures,
                               "records": self.records, "seconds": self.seconds, "ratios": self.ratios,
                               "visited_ratios": self.visited_ratios}
        if self.seconds:
            out.update(t_min=min(self.seconds), t_max=max(self.seconds), t_avg=statistics.fmean(self.seconds))
        if self.ratios:
            mean, lo, hi = mean_ci(self.ratios, 0.90)
            out.update(utility_mean=mean, ci90=[lo, hi])
        if self.visited_ratios:
            out["visited_mean"] = statistics.fmean(self.visited_ratios)
        return out


def mean_ci(values: Sequence[float], level: float) -> tuple[float, float, float]:
    """(mean, low, high): Student-t interval; low = high = mean when fewer than two values."""
    from scipy import stats

    xs = list(values)
    mean = statistics.fmean(xs)
    if len(xs) < 2:
        return mean, mean, mean
    half = float(stats.t.ppf(0.5 + level / 2, len(xs) - 1)) * statistics.stdev(xs) / math.sqrt(len(xs))
    return mean, mean - half, mean + half


@dataclass
class Record:
    id: int
    index: int  # the record's position in its dataset's prepared runs (`OutlierRun.records`)
    exact: dict[tuple[str, str], ExactMax] = field(default_factory=dict)


@dataclass
class DatasetRun:
    """One dataset's session, the request selecting its records, and their exact maxima."""

    name: str
    session: pcor_sql.Session
    request: pcor_sql.OutlierRequest
    records: list[Record]
    exact_notes: list[str] = field(default_factory=list)
    cross_check: dict[str, Any] | None = None

    @classmethod
    def open(cls, con: duckdb.DuckDBPyConnection, name: str, record_ids: Sequence[int]) -> "DatasetRun":
        session = pcor_sql.Session(con)
        ids = ", ".join(str(int(rid)) for rid in record_ids)
        request = pcor_sql.outlier_request(
            con, f"SELECT {METRICS[name]} FROM {name} WHERE id IN ({ids})", owner_view=True
        )
        run = session.prepare(request)
        run.preload()
        index = {int(r.record["id"]): i for i, r in enumerate(run.records)}
        missing = [int(rid) for rid in record_ids if int(rid) not in index]
        if missing:
            raise UserError(f"{name} has no record with id {missing[0]}", f"pick ids of {name} (e.g. planted outliers)")
        return cls(name, session, request, [Record(int(rid), index[int(rid)]) for rid in record_ids])

    def prepared(self, **changes: Any) -> Any:
        """The OutlierRun of this dataset's records with some request fields changed (the
        session keeps the summary, so only the records are read again)."""
        return self.session.prepare(self.request.replace(**changes))

    def compute_exact(self, needs: Sequence[tuple[str, str]], max_checks: int, report: Report) -> None:
        """The exact max utility over COE for every record and (verifier, utility) in `needs`."""
        runs = {verifier: self.prepared(verifier=verifier) for verifier, _ in needs}
        for rec in self.records:
            sizes = None
            for verifier, utility in needs:
                run = runs[verifier]
                oracle, space = run.oracle(rec.index), run.space(rec.index)
                if sizes is None:
                    sizes = run.lattice_sizes(rec.index)
                start = None
                if utility == "overlap":
                    start, _ = find_start(oracle)  # the release's own start, from validity alone
                    if start is None:
                        rec.exact[(verifier, utility)] = ExactMax(None, None, 0, False)
                        continue
                t0 = time.perf_counter()
                found = best_first_max(oracle, space, utilities_by_word(sizes, utility, space, start), max_checks)
                rec.exact[(verifier, utility)] = found
                what = f"{self.name} {rec.id} {verifier}/{utility}"
                if found.utility is None:
                    why = "COE is empty" if found.exhausted else f"no valid context among the {found.checks:,} largest"
                    self.exact_notes.append(f"{what}: {why}; record left out of those cells")
                report(f"exact max {what}: {found.utility} after {found.checks:,} checks "
                       f"({time.perf_counter() - t0:.1f} s)")

    def check_against_enumeration(self) -> None:
        """For the first record and grubbs: best-first max == max over the enumerated COE."""
        rec = self.records[0]
        found = rec.exact.get(("grubbs", "population"))
        if found is None:
            return
        oracle = self.prepared(verifier="grubbs").oracle(rec.index)
        t0 = time.perf_counter()
        masks, utilities = oracle.coe(1 << 40)
        enum_max = float(utilities.max()) if len(utilities) else None
        self.cross_check = {
            "record": rec.id, "verifier": "grubbs", "best_first": found.utility, "enumeration": enum_max,
            "coe_size": int(len(masks)), "enumeration_s": time.perf_counter() - t0, "equal": found.utility == enum_max,
        }


def _cold() -> None:
    grubbs_critical_one.cache_clear()


def run_cell(data: DatasetRun, cell: Cell, repeats: int, seed: int) -> CellResult:
    res = CellResult(cell)
    run = data.prepared(search=cell.search, verifier=cell.verifier, utility=cell.utility, epsilon=cell.epsilon,
                        samples=cell.samples, accounting=cell.accounting)
    for rec in data.records:
        best = rec.exact.get((cell.verifier, cell.utility))
        if best is None or best.utility is None:
            continue
        res.records.append(rec.id)
        sizes = run.oracle(rec.index)  # population sizes for the diagnostics below, cached
        for r in range(repeats):
            source = np.random.default_rng([seed, cell.code, rec.id, r])
            _cold()
            t0 = time.perf_counter()
            try:
                rel = run.release(rec.index, source)
            except PcorError:
                res.failures += 1
                continue
            res.seconds.append(time.perf_counter() - t0)
            res.ratios.append(rel.owner.utility / best.utility)
            # Diagnostics (owner-side, not part of any release): the best context the search
            # visited, so a low ratio can be split into exploration (best visited is far from the
            # optimum) and selection (the final EM picked far below the best visited).
            overlap = cell.utility == "overlap"
            visited = max(sizes.population_size(m & rel.start_mask if overlap else m) for m in rel.trace.visited)
            res.visited_ratios.append(visited / best.utility)
    return res


def cells_of(group: Group, dataset: str) -> list[tuple[Row, dict[str, Cell]]]:
    out = []
    for row in group.rows:
        out.append((row, {acc: Cell(dataset, **{**row.changes, "accounting": acc}) for acc in ACCOUNTINGS}))
    return out


def needed_exact(groups: Sequence[Group]) -> list[tuple[str, str]]:
    needs: dict[tuple[str, str], None] = {}
    for g in groups:
        for _, cells in cells_of(g, "x"):
            for c in cells.values():
                needs[(c.verifier, c.utility)] = None
    return list(needs)


def run_groups(
    data: DatasetRun, groups: Sequence[Group], repeats: int, seed: int, report: Report
) -> dict[Cell, CellResult]:
    results: dict[Cell, CellResult] = {}
    for g in groups:
        for row, cells in cells_of(g, data.name):
            for acc, cell in cells.items():
                if cell not in results:
                    t0 = time.perf_counter()
                    results[cell] = run_cell(data, cell, repeats, seed)
                    r = results[cell]
                    mean = statistics.fmean(r.ratios) if r.ratios else float("nan")
                    report(f"{data.name} {g.tables} {row.label} [{acc}]: {len(r.seconds)} releases, "
                           f"utility {mean:.3f}, {time.perf_counter() - t0:.1f} s")
    return results
