"""`python -m benchmarks reproduce`: the PCOR paper's experiment groups on the bundled data,
under the paper profile and the engine profile (`profiles.py`), as tables shaped like the
paper's (Tables 2–13), with the paper's own figures alongside.

`run_reproduce` runs them (`experiments.py`: Tables 2–11; `coe_match.py`: Tables 12–13 and
the §6.7 check) and `reproduce_tables` (module `reproduce_tables`) lays the results out.
Nothing here prints.
"""

from __future__ import annotations

import datetime as _dt
import json
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Sequence

import duckdb
import numpy as np

import pcor_sql
from benchmarks import coe_match
from benchmarks.experiments import GROUPS, Cell, DatasetRun, cells_of, run_cell
from benchmarks.measure import load_average, machine
from benchmarks.profiles import PROFILE_NAMES, profile, repeats_for
from benchmarks.report import source_of
from benchmarks.reproduce_tables import reproduce_targets

Report = Callable[[str], None]



@dataclass(frozen=True)
class ReproduceConfig:
    quick: bool = False
    profiles: tuple[str, ...] = PROFILE_NAMES
    datasets: tuple[str, ...] = ("salaries", "homicides")
    records: int | None = None  # a seeded sample of k planted outliers per dataset; None: all of them
    record_ids: tuple[int, ...] | None = None  # exactly these records (of every dataset run) instead
    runs: int = 200  # releases per cell (the paper's 200), spread evenly over the records
    repeats: int | None = None  # releases per record per cell instead of `runs`
    seed: int = 2024
    groups: tuple[str, ...] = tuple(g.key for g in GROUPS)
    max_checks: int = 2_000_000  # cap of the exact-max scan per record and verifier
    match: bool = True
    match_datasets: tuple[str, ...] = ("salaries", "homicides")
    match_verifiers: tuple[str, ...] = ("grubbs", "lof", "histogram", "zscore")
    match_deltas: tuple[int, ...] = (1, 5, 10, 25)
    match_outliers: int = 40
    match_neighbours: int = 20
    epsilon: float = 0.2

    @classmethod
    def preset(cls, quick: bool, **overrides: Any) -> "ReproduceConfig":
        base = cls(quick=True, datasets=("salaries",), records=3, repeats=4, match_outliers=5,
                   match_neighbours=3, max_checks=400_000) if quick else cls()
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})

    def repeats_for(self, records: int) -> int:
        return self.repeats if self.repeats is not None else repeats_for(self.runs, records)


@dataclass
class ReproduceResult:
    config: dict[str, Any]
    machine: dict[str, Any]
    started: str
    wall_s: float = 0.0
    # profile → dataset → {"cells": [CellResult.as_dict(), ...]}
    profiles: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # dataset → table ("full" / "reduced") → records, exact maxima, notes
    datasets: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    match: list[dict[str, Any]] = field(default_factory=list)
    targets: list[dict[str, Any]] = field(default_factory=list)
    load: dict[str, Any] = field(default_factory=dict)
    match_seconds: dict[str, float] = field(default_factory=dict)
    complete: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def run_reproduce(cfg: ReproduceConfig, report: Report = lambda _m: None,
                  checkpoint: Callable[[dict[str, Any]], None] | None = None,
                  resume: dict[str, Any] | None = None, exact_cache: dict[str, Any] | None = None) -> ReproduceResult:
    """Run the configured groups for every profile and dataset, then the COE match.
    `checkpoint(result)` is called after every cell (so a long run leaves its figures behind);
    `resume`: an earlier, interrupted result of the same configuration whose cells are kept
    and not run again; `exact_cache`: exact maxima already known (`DatasetRun.exact_key` →
    utility, checks), updated with the ones computed here."""
    started = time.perf_counter()
    res = ReproduceResult(asdict(cfg), machine(), _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    res.load["start"] = load_average()
    done: dict[tuple[str, str], dict[str, Any]] = {}
    if resume:
        for prof, by_ds in resume.get("profiles", {}).items():
            for ds, data in by_ds.items():
                for c in data["cells"]:
                    done[(prof, repr(sorted(c["cell"].items())))] = c
        res.match, res.match_seconds = resume.get("match", []), resume.get("match_seconds", {})
        res.started = resume.get("started", res.started)
    groups = [g for g in GROUPS if g.key in cfg.groups]
    con = duckdb.connect()
    try:
        pcor_sql.load_datasets(con)
        for name in cfg.datasets:
            ids = list(cfg.record_ids) if cfg.record_ids else sample_records(name, cfg.records, cfg.seed)
            tables: dict[str, DatasetRun] = {}
            for prof_name in cfg.profiles:
                prof = profile(prof_name)
                cells = list(dict.fromkeys(c for g in groups for _, c in cells_of(g, name, prof)))
                out = res.profiles.setdefault(prof_name, {}).setdefault(name, {"cells": []})
                for table in ("full", "reduced"):
                    todo = [c for c in cells if c.table == table]
                    kept = [done[k] for c in todo if (k := (prof_name, repr(sorted(c.key.items())))) in done]
                    out["cells"].extend(kept)
                    todo = [c for c in todo if (prof_name, repr(sorted(c.key.items()))) not in done]
                    if not todo:
                        continue
                    data = tables.get(table)
                    if data is None:
                        data = tables[table] = DatasetRun.open(con, name, ids if table == "full" else None, table)
                    t0 = time.perf_counter()
                    data.compute_exact(needed_exact(todo), cfg.max_checks, report, exact_cache,
                                       (lambda: checkpoint(res.as_dict())) if checkpoint else None)
                    _dataset_info(res, data, time.perf_counter() - t0)
                    repeats = cfg.repeats_for(len(data.records))
                    for cell in todo:
                        t0 = time.perf_counter()
                        r = run_cell(data, cell, repeats, cfg.seed)
                        out["cells"].append(r.as_dict())
                        mean = statistics.fmean(r.ratios) if r.ratios else float("nan")
                        report(f"[{prof_name}] {name} {cell.table} {cell.search}/{cell.verifier}/{cell.utility} "
                               f"ε={cell.epsilon:g} n={cell.samples}: {len(r.seconds)} releases, utility {mean:.3f}, "
                               f"{time.perf_counter() - t0:.1f} s")
                        if checkpoint:
                            checkpoint(res.as_dict())
        if cfg.match and not res.match:
            for name in cfg.match_datasets:
                t0 = time.perf_counter()
                out = coe_match.run_match(con, name, cfg.match_verifiers, cfg.match_deltas, cfg.match_outliers,
                                          cfg.match_neighbours, cfg.seed, cfg.epsilon, report)
                res.match.extend(m.as_dict() for m in out)
                res.match_seconds[name] = time.perf_counter() - t0
    finally:
        con.close()
    res.targets = [t.as_dict() for t in reproduce_targets(res.as_dict())]
    res.load["end"] = load_average()
    res.wall_s = time.perf_counter() - started + (resume or {}).get("wall_s", 0.0)
    res.complete = True
    return res


def _dataset_info(res: ReproduceResult, data: DatasetRun, exact_s: float) -> None:
    info = res.datasets.setdefault(data.name, {}).setdefault(data.table, {"exact_s": 0.0})
    data.check_against_enumeration()
    info.update(
        records=[r.id for r in data.records],
        exact={str(r.id): {"/".join(k): {"utility": e.utility, "checks": e.checks} for k, e in r.exact.items()}
               for r in data.records},
        exact_notes=list(dict.fromkeys(data.exact_notes)), cross_check=data.cross_check,
    )
    info["exact_s"] += exact_s


def needed_exact(cells: Sequence[Cell]) -> list[tuple[str, str, str]]:
    return list(dict.fromkeys((c.verifier, c.utility, c.start) for c in cells))


def sample_records(name: str, k: int | None, seed: int) -> list[int]:
    """All planted outliers of `name`, or k of them drawn uniformly (seeded), in id order."""
    ids = pcor_sql.planted_outliers(name)
    if k is None or k >= len(ids):
        return list(ids)
    rng = np.random.default_rng([seed, 2, len(ids)])
    return sorted(int(i) for i in rng.choice(ids, size=k, replace=False))


def merge_results(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One result from several (the shards of a run split by --groups or --profile): cells
    and datasets merged, COE match from the first that has one, targets recomputed; machine,
    date and code from the first, wall time summed."""
    out = json.loads(json.dumps(results[0]))
    out["sources"] = [source_of(r, r.get("command") or command_from_config(r["config"])) for r in results]
    cfg = out["config"]
    for other in results[1:]:
        for key in ("profiles", "groups", "datasets"):
            cfg[key] = list(dict.fromkeys([*cfg[key], *other["config"][key]]))
        for prof, by_ds in other.get("profiles", {}).items():
            for name, data in by_ds.items():
                mine = out["profiles"].setdefault(prof, {}).setdefault(name, {"cells": []})["cells"]
                keys = [c["cell"] for c in mine]
                mine.extend(c for c in data["cells"] if c["cell"] not in keys)
        for name, by_table in other.get("datasets", {}).items():
            for table, info in by_table.items():
                out["datasets"].setdefault(name, {}).setdefault(table, info)
        if not out.get("match") and other.get("match"):
            out["match"], out["match_seconds"] = other["match"], other.get("match_seconds", {})
        out["wall_s"] = out.get("wall_s", 0.0) + other.get("wall_s", 0.0)
        out["complete"] = out.get("complete", False) and other.get("complete", False)
    out["targets"] = [t.as_dict() for t in reproduce_targets(out)]
    return out


def command_from_config(cfg: dict[str, Any]) -> str:
    """The `reproduce` command line of a configuration (for results saved without one)."""
    default = json.loads(json.dumps(asdict(ReproduceConfig())))
    flags = {"profiles": "--profile", "datasets": "--datasets", "records": "--records", "runs": "--runs",
             "repeats": "--repeats", "seed": "--seed", "groups": "--groups", "match_outliers": "--match-outliers",
             "match_neighbours": "--match-neighbours"}
    parts = ["python -m benchmarks reproduce"]
    for key, flag in flags.items():
        value = cfg.get(key)
        if value is None or value == default.get(key):
            continue
        parts.append(f"{flag} {','.join(map(str, value)) if isinstance(value, list) else value}")
    if not cfg.get("match", True):
        parts.append("--no-match")
    return " ".join(parts)
