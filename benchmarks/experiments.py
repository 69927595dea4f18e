"""The PCOR paper's experiment groups (§6.3–6.6, Tables 2–11) on the bundled datasets.

Each group varies one thing around the paper's default — BFS, LOF, population utility,
ε = 0.2, n = 50 — and reports, per setting, the runtime of one release (min / max / average)
and the utility ratio (mean and 90 % confidence interval). A *profile* (`profiles.py`) says
how a row runs: `paper` (the paper's algorithms and accounting) or `engine` (the engine's
defaults); a `Cell` is one row under one profile, every setting explicit.

- Records: planted contextual outliers (`planted_outliers`) — all of them, or a seeded
  uniform sample of `records` of them (not the first ones: the list order is arbitrary and a
  prefix could be all easy or all hard cases) — on the full lattice of all three attributes
  (salaries: 2^22 admissible contexts per record); Tables 6–7 on the paper's reduced table
  (every planted outlier it holds).
- Utility ratio = utility of the released context / largest utility in COE(D, V). The
  denominator is exact (`exact.best_first_max`: contexts verified in decreasing utility until
  the first valid one), which keeps LOF tractable on 4.2 million contexts; for grubbs it is
  cross-checked against the full enumeration of the oracle's `coe`.
- Runtime: `OutlierRun.release` (the engine: start search, private search, re-verification)
  with the per-cell summary already built (`Session.prepare`), each release with an empty
  Grubbs critical-value cache. With the paper's start (`profiles.start_up`) the start is
  found before the timer starts and handed to the release as a user start, which the release
  re-verifies.
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
from benchmarks import coe_match
from benchmarks._sql import id_list
from benchmarks.exact import ExactMax, best_first_max, utilities_by_word
from benchmarks.profiles import PROFILE_NAMES, Profile, request_default, start_down, start_up, verifier_of
from pcor_sql.core.search_specs import SEARCH_SPECS
from pcor_sql.core.start import find_start
from pcor_sql.core.verifiers.grubbs import grubbs_critical_one
from pcor_sql.errors import PcorError, UserError

Report = Callable[[str], None]

METRICS = {"salaries": "salary", "homicides": "victim_age"}


@dataclass(frozen=True)
class Cell:
    """One experimental setting: a row of a paper table as one profile runs it. Every field is
    explicit (defaults resolved), so a cell in a result file says exactly what ran."""

    dataset: str
    search: str = "bfs"
    verifier: str = "lof"
    utility: str = "population"
    epsilon: float = 0.2
    samples: int = 50
    accounting: str = "paper"
    descents: int = 0  # BFS's validity-only descents (0: Algorithm 5; other searches: 0)
    start: str = "engine"  # "engine": the release's own start search; "cell" / "descent": `profiles`
    table: str = "full"  # "full" or "reduced" (the paper's 14-value subset, `coe_match.REDUCED`)

    @property
    def code(self) -> int:
        return zlib.crc32(repr(self).encode())

    @property
    def key(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Row:
    label: str
    changes: dict[str, Any]
    paper_runtime: str
    paper_utility: str
    profiles: tuple[str, ...] = PROFILE_NAMES  # the profiles that run this row


@dataclass(frozen=True)
class Group:
    key: str
    tables: str  # "Tables 2–3"
    what: str
    label: str  # first column's header
    rows: tuple[Row, ...]
    fixed: tuple[tuple[str, str], ...]  # constant columns (header, field of Cell)


def _r(label: str, paper_runtime: str, paper_utility: str, profiles: tuple[str, ...] = PROFILE_NAMES,
       **changes: Any) -> Row:
    return Row(label, changes, paper_runtime, paper_utility, profiles)


# The paper's figures (salary dataset, 51,000 records, 132-core machine): T_min / T_max / T_avg,
# and utility mean (90 % CI).
GROUPS: tuple[Group, ...] = (
    Group("sampling", "Tables 2–3", "Sampling methods", "Algorithm", (
        _r("Uniform", "7m / 24h / 97m", "0.65 (0.64, 0.67)", search="uniform"),
        _r("Random Walk", "15s / 109s / 51s", "0.57 (0.55, 0.60)", search="random-walk"),
        _r("DFS", "8m / 80m / 40m", "0.88 (0.85, 0.90)", search="dfs"),
        _r("BFS", "6m / 61m / 37m", "0.90 (0.88, 0.93)", search="bfs"),
        _r("Explore (not in the paper)", "—", "—", ("engine",), search="explore"),
    ), (("ε", "epsilon"), ("Outlier", "verifier"))),
    Group("overlap", "Tables 4–5", "Intersection (overlap) utility", "Algorithm", (
        _r("DFS", "3m / 47m / 19m", "0.88 (0.86, 0.91)", search="dfs", utility="overlap"),
        _r("BFS", "5m / 48m / 20m", "0.97 (0.95, 0.98)", search="bfs", utility="overlap"),
        _r("Explore (not in the paper)", "—", "—", ("engine",), search="explore", utility="overlap"),
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
    Group("deviations", "Ablation", "One deviation from the paper profile at a time (BFS, LOF, ε = 0.2, n = 50)",
          "Change", (
        _r("none (the paper profile)", "6m / 61m / 37m", "0.90 (0.88, 0.93)", ("paper",)),
        _r("start: the engine's top-down search", "—", "—", ("paper",), start="engine"),
        _r("24 validity-only descents", "—", "—", ("paper",), descents=24),
        _r("tight accounting", "—", "—", ("paper",), accounting="tight"),
        _r("all three (the engine's BFS)", "—", "—", ("paper",), start="engine", descents=24, accounting="tight"),
        _r("Grubbs on the reduced table", "0.5m / 1m / 0.8m", "0.86 (0.84, 0.89)", ("paper",), verifier="grubbs",
           table="reduced"),
        _r("Grubbs on the full table", "—", "—", ("paper",), verifier="grubbs"),
        _r("Histogram on the reduced table", "2m / 4m / 3.4m", "0.89 (0.87, 0.91)", ("paper",),
           verifier="histogram", table="reduced"),
        _r("Histogram on the full table", "—", "—", ("paper",), verifier="histogram"),
    ), (("Outlier", "verifier"),)),
    Group("duplicates", "not in the paper", "LOF's rule for duplicates (DESIGN.md §2)", "Rule", (
        _r("distinct (Breunig et al.; the engine's default)", "—", "—", verifier="lof(duplicates='distinct')"),
        _r("plain (k-distance, ties kept)", "—", "—", verifier="lof(duplicates='plain')"),
    ), (("ε", "epsilon"), ("Sampling", "search"))),
    Group("samples", "Tables 10–11", "Effect of the number of samples n", "# Samples", (
        _r("25", "1m / 14m / 7m", "0.85 (0.81, 0.88)", samples=25),
        _r("50", "3m / 29m / 16m", "0.88 (0.85, 0.91)", samples=50),
        _r("100", "6m / 61m / 37m", "0.90 (0.88, 0.93)", samples=100),
        _r("200", "21m / 163m / 99m", "0.84 (0.81, 0.87)", samples=200),
    ), (("Sampling", "search"), ("Outlier", "verifier"))),
)


def cell_of(group: Group, row: Row, dataset: str, prof: Profile) -> Cell | None:
    """The cell `prof` runs for `row` of `group` (None when the row is not the profile's).

    The row's own settings win; the profile fills in the rest. The paper fixes BFS as its
    final search from Table 6 on; the profile's search stands there, except in Tables 10–11,
    whose n is BFS's."""
    if prof.name not in row.profiles:
        return None
    changes = dict(row.changes)
    search = changes.pop("search", "bfs" if group.key in ("samples", "deviations") else prof.search)
    fields = dict(
        search=search,
        samples=default_samples(search),
        accounting=prof.accounting,
        descents=(prof.descents if prof.descents is not None else request_default("descents")) if search == "bfs" else 0,
        start=prof.start,
        table="reduced" if group.key == "verifiers" and prof.reduced_verifiers else "full",
    )
    if group.key == "overlap" and prof.start == "cell":
        fields["start"] = "descent"  # see `profiles`: V's cell would make every context overlap it wholly
    fields.update(changes)
    if fields.get("verifier", "lof") == "lof":
        fields["verifier"] = prof.lof  # the profile's rule for duplicates
    return Cell(dataset, **fields)


def default_samples(search: str) -> int:
    """The request's n for `search` when none is given (the search's own)."""
    return int(getattr(SEARCH_SPECS[search], "default_samples", None) or request_default("samples"))


def cells_of(group: Group, dataset: str, prof: Profile) -> list[tuple[Row, Cell]]:
    return [(row, cell) for row in group.rows if (cell := cell_of(group, row, dataset, prof)) is not None]


@dataclass
class CellResult:
    cell: Cell
    seconds: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    visited_ratios: list[float] = field(default_factory=list)
    failures: int = 0
    records: list[int] = field(default_factory=list)
    checks: list[int] = field(default_factory=list)  # contexts verified per release (owner view)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cell": self.cell.key, "releases": len(self.seconds), "failures": self.failures,
                               "records": self.records, "seconds": self.seconds, "ratios": self.ratios,
                               "visited_ratios": self.visited_ratios, "checks": self.checks}
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
    index: int  # the record's position in its table's prepared runs (`OutlierRun.records`)
    exact: dict[tuple[str, str, str], ExactMax] = field(default_factory=dict)  # (verifier, utility, start)
    starts: dict[tuple[str, str], int | None] = field(default_factory=dict)  # (verifier, start kind) → C_V


@dataclass
class DatasetRun:
    """One table's session (the dataset itself or the paper's reduced subset of it), the request
    selecting its records, and their exact maxima."""

    name: str
    table: str
    session: pcor_sql.Session
    request: pcor_sql.OutlierRequest
    records: list[Record]
    exact_notes: list[str] = field(default_factory=list)
    cross_check: dict[str, Any] | None = None

    @classmethod
    def open(cls, con: duckdb.DuckDBPyConnection, name: str, record_ids: Sequence[int] | None,
             table: str = "full") -> "DatasetRun":
        """`record_ids` of dataset `name`; on the reduced table, None takes every planted
        outlier the reduced table holds."""
        session = pcor_sql.Session(con)
        metric, relation, options = METRICS[name], name, {}
        if table == "reduced":
            relation = coe_match.create_reduced(con, name)
            keep = coe_match.REDUCED[name][1]
            options = {"by": list(keep), "domains": {a: list(v) for a, v in keep.items()}}
            if record_ids is None:
                planted = id_list(pcor_sql.planted_outliers(name))
                record_ids = [int(r[0]) for r in con.execute(
                    f"SELECT id FROM {relation} WHERE id IN ({planted}) ORDER BY id").fetchall()]
        ids = id_list(record_ids or [])
        request = pcor_sql.outlier_request(
            con, f"SELECT {metric} FROM {relation} WHERE id IN ({ids})", owner_view=True, **options
        )
        run = session.prepare(request)
        run.preload()
        index = {int(r.record["id"]): i for i, r in enumerate(run.records)}
        missing = [int(rid) for rid in record_ids or [] if int(rid) not in index]
        if missing:
            raise UserError(f"{name} has no record with id {missing[0]}", f"pick ids of {name} (e.g. planted outliers)")
        return cls(name, table, session, request, [Record(int(rid), index[int(rid)]) for rid in record_ids or []])

    def prepared(self, **changes: Any) -> Any:
        """The OutlierRun of this table's records with some request fields changed (the
        session keeps the summary, so only the records are read again); a verifier as its text."""
        if isinstance(changes.get("verifier"), str):
            changes["verifier"] = verifier_of(changes["verifier"])
        return self.session.prepare(self.request.replace(**changes))

    def start(self, rec: Record, verifier: str, kind: str) -> int | None:
        """Record `rec`'s start C_V of kind `kind` (validity only, so the same for every utility)."""
        key = (verifier, kind)
        if key not in rec.starts:
            oracle = self.prepared(verifier=verifier).oracle(rec.index)
            if kind == "cell":
                rec.starts[key] = start_up(oracle)[0]
            elif kind == "descent":
                rec.starts[key] = start_down(oracle, rec.id)
            else:
                rec.starts[key] = find_start(oracle)[0]
        return rec.starts[key]

    def compute_exact(self, needs: Sequence[tuple[str, str, str]], max_checks: int, report: Report,
                      cache: dict[str, Any] | None = None, saved: Callable[[], None] | None = None) -> None:
        """The exact max utility over COE for every record and (verifier, utility, start) in
        `needs` (the start matters for the overlap utility only). `cache` (updated in place):
        maxima already known, by `exact_key` — they depend on the data and the verifier only;
        `saved()` is called after each record (to write the cache out)."""
        runs = {verifier: self.prepared(verifier=verifier) for verifier, _, _ in needs}
        for rec in self.records:
            sizes = None
            done: dict[tuple[str, str, int | None], ExactMax] = {}
            for verifier, utility, kind in needs:
                run = runs[verifier]
                oracle, space = run.oracle(rec.index), run.space(rec.index)
                if sizes is None:
                    sizes = run.lattice_sizes(rec.index)
                if (verifier, utility, kind) in rec.exact:
                    continue
                start = self.start(rec, verifier, kind) if utility == "overlap" else None
                if utility == "overlap" and start is None:
                    rec.exact[(verifier, utility, kind)] = ExactMax(None, None, 0, False)
                    continue
                t0 = time.perf_counter()
                key = (verifier, utility, start)
                cached = None if cache is None else cache.get(self.exact_key(rec, verifier, utility, start))
                if key not in done and cached is not None:
                    done[key] = ExactMax(cached["utility"], None, cached["checks"], False)
                if key not in done and utility == "overlap" and oracle.is_valid(start):
                    # |D_C ∩ D_{C_V}| ≤ |D_{C_V}|, and C_V itself is valid: no scan needed.
                    done[key] = ExactMax(float(oracle.population_size(start)), start, 1, False)
                if key not in done:
                    sizes = run.lattice_sizes(rec.index) if sizes is None else sizes
                    done[key] = best_first_max(oracle, space, utilities_by_word(sizes, utility, space, start),
                                               max_checks)
                    if cache is not None and done[key].utility is not None:
                        cache[self.exact_key(rec, verifier, utility, start)] = {
                            "utility": done[key].utility, "checks": done[key].checks}
                found = rec.exact[(verifier, utility, kind)] = done[key]
                what = f"{self.name}{'' if self.table == 'full' else ' (reduced)'} {rec.id} {verifier}/{utility}"
                if found.utility is None:
                    why = "COE is empty" if found.exhausted else f"no valid context among the {found.checks:,} largest"
                    self.exact_notes.append(f"{what}: {why}; record left out of those cells")
                report(f"exact max {what} (start {kind}): {found.utility} after {found.checks:,} checks "
                       f"({time.perf_counter() - t0:.1f} s)")
            if saved is not None:
                saved()

    def exact_key(self, rec: Record, verifier: str, utility: str, start: int | None) -> str:
        """`dataset|table|record|verifier|utility|start mask` (start '-' for population); bare `lof`
        spelled with its rule, so a cache from when it meant the plain rule never answers."""
        verifier = "lof(duplicates='distinct')" if verifier == "lof" else verifier
        return f"{self.name}|{self.table}|{rec.id}|{verifier}|{utility}|{'-' if start is None else start}"

    def check_against_enumeration(self) -> None:
        """For the first record and grubbs: best-first max == max over the enumerated COE."""
        if not self.records:
            return
        rec = self.records[0]
        found = next((e for (v, u, _), e in rec.exact.items() if (v, u) == ("grubbs", "population")), None)
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
    fields = dict(search=cell.search, verifier=cell.verifier, utility=cell.utility, epsilon=cell.epsilon,
                  samples=cell.samples, accounting=cell.accounting, descents=cell.descents)
    shared = data.prepared(**fields)
    needs_start = cell.start != "engine" and (SEARCH_SPECS[cell.search].graph or cell.utility == "overlap")
    for rec in data.records:
        best = rec.exact.get((cell.verifier, cell.utility, cell.start))
        if best is None or best.utility is None:
            continue
        run = shared
        if needs_start:
            # The paper's start: the record's own C_V, given to the release as the user's start.
            start = data.start(rec, cell.verifier, cell.start)
            if start is None:
                res.failures += repeats
                continue
            run = data.prepared(**fields, start=shared.space(rec.index).values(start))
        res.records.append(rec.id)
        sizes = shared.oracle(rec.index)  # population sizes for the diagnostics below, cached
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
            res.checks.append(rel.owner.contexts_verified)
    return res
