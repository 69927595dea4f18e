"""`python -m benchmarks verifiers`: the share of rows each built-in verifier calls an outlier
"among all rows" — the full context, the whole table as one population — on the bundled tables
and on a heaped, top-coded synthetic wage table, with the time of one check.

Why: a verifier that flags a large share of ordinary rows makes every release say little ("V
is an outlier among all rows" is then true of one row in six). The plain LOF rule does that
on tie-heavy data — a row next to a block of ≥ k copies gets neighbours with lrd ≈ 1e10 — and
Breunig et al.'s rule for duplicates (the default, DESIGN.md §2) does not. Goal:
LOF's share ≤ 3% on tie-heavy data.

How. A verdict depends on a row only through its value, so each verifier is checked once per
distinct value of the metric, over the whole sorted column (`WholeTable`, moments computed once),
and a flagged value counts all its rows. The check time is the mean over those checks (a
population of the table's size, V one of its values), measured in the same run for every
verifier: a ratio between verifiers, under the load the header states.

The synthetic table (`wage_survey`) is shaped like a real hourly-wage survey (a
3,000-row table with ~500 distinct wages and 120 copies of one value): log-normal wages
(median $20, σ = 0.6), reported heaped — 65% to whole dollars, 25% to quarters, 10% to the
cent — and top-coded so that 120 rows share the top code.

Privacy: a measuring instrument for the data owner on the owner's data; nothing is released.
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

from benchmarks._sql import ident
from benchmarks.measure import load_average, machine
from benchmarks.tables import Table, make_table, percent
from pcor_sql.errors import InternalError

Report = Callable[[str], None]

#: (label, verifier name, options): the rows of the table.
VERIFIERS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("lof (distinct: default)", "lof", {}),
    ("lof (duplicates='plain')", "lof", {"duplicates": "plain"}),
    ("grubbs", "grubbs", {}),
    ("histogram", "histogram", {}),
    ("zscore", "zscore", {}),
)
#: Bundled tables and the metric read from each: (table, metric).
BUNDLED: tuple[tuple[str, str], ...] = (
    ("salaries", "salary"), ("homicides", "victim_age"), ("diamonds", "price"), ("diamonds", "carat"),
)
SYNTHETIC = "wage survey (synthetic)"
TABLE_NAMES = tuple(f"{t}.{m}" for t, m in BUNDLED) + ("wages",)
GOAL = 0.03  # LOF's share on tie-heavy data


@dataclass(frozen=True)
class VerifiersConfig:
    tables: tuple[str, ...] = TABLE_NAMES
    rows: int = 3000  # rows of the synthetic table
    seed: int = 21


class WholeTable:
    """The Population of one whole sorted column with V's value `v`: moments computed once for
    the table (not per check), ranges answered by binary search."""

    __slots__ = ("sorted_values", "v", "n", "mean", "m2", "min", "max")

    def __init__(self, sorted_values: np.ndarray, v: float, mean: float, m2: float):
        self.sorted_values, self.v = sorted_values, float(v)
        self.n = int(sorted_values.size)
        self.mean, self.m2 = mean, m2
        self.min, self.max = float(sorted_values[0]), float(sorted_values[-1])

    def values(self) -> np.ndarray:
        return self.sorted_values

    def between(self, lo: float, hi: float) -> np.ndarray:
        w = self.sorted_values
        return w[w.searchsorted(lo, side="left") : w.searchsorted(hi, side="right")]

    def count_between(self, lo: float, hi: float, right_closed: bool) -> int:
        w = self.sorted_values
        return int(max(0, w.searchsorted(hi, side="right" if right_closed else "left") - w.searchsorted(lo, side="left")))

    def around(self, count: int) -> tuple[float, float]:
        w = self.sorted_values
        first, past = int(w.searchsorted(self.v, side="left")), int(w.searchsorted(self.v, side="right"))
        return float(w[max(first - count, 0)]), float(w[min(past + count, w.size) - 1])


def moments(sorted_values: np.ndarray) -> tuple[float, float]:
    """(mean, m2) as `ArrayPopulation` computes them (m2 exactly 0 for a constant column)."""
    if sorted_values[0] == sorted_values[-1]:
        return float(sorted_values[0]), 0.0
    mean = float(sorted_values.mean())
    d = sorted_values - mean
    return mean, float(d @ d)


def wage_survey(rows: int, seed: int) -> np.ndarray:
    """The synthetic wage table's metric (see the module doc), sorted."""
    rng = np.random.default_rng(seed)
    wages = np.exp(rng.normal(np.log(20.0), 0.6, rows))
    step = rng.choice([1.0, 0.25, 0.01], size=rows, p=[0.65, 0.25, 0.10])
    wages = np.round(np.round(wages / step) * step, 2)
    top = np.sort(wages)[max(0, rows - 120)]  # top-coded: the 120 largest report the top code
    return np.sort(np.minimum(wages, top))


def flagged_shares(values: np.ndarray, verifiers: Sequence[Any]) -> list[dict[str, Any]]:
    """For each verifier: rows flagged among all rows of `values` (their share), and the mean
    time of one check. One check per distinct value; its verdict holds for all its rows."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    distinct, counts = np.unique(x, return_counts=True)
    mean, m2 = moments(x)
    pops = [WholeTable(x, float(v), mean, m2) for v in distinct]
    verdicts, best = [], [math.inf] * len(verifiers)
    # Two rounds, the verifiers in opposite orders, the faster round kept: a change of load
    # during the run then hits every verifier alike.
    for order in (range(len(verifiers)), reversed(range(len(verifiers)))):
        for i in order:
            t0 = time.perf_counter()
            got = np.fromiter((verifiers[i].check(p) for p in pops), dtype=bool, count=len(pops))
            best[i] = min(best[i], time.perf_counter() - t0)
            if len(verdicts) < len(verifiers):
                verdicts.append(got)
            elif not np.array_equal(verdicts[i], got):
                raise InternalError(f"{verifiers[i]!r} gave other verdicts on the same data")
    out = []
    for i in range(len(verifiers)):
        flagged = int(counts[verdicts[i]].sum())
        out.append({"flagged_rows": flagged, "share": flagged / x.size, "checks": len(pops),
                    "check_us": best[i] / len(pops) * 1e6})
    return out


def table_values(con: Any, name: str, cfg: VerifiersConfig) -> tuple[str, np.ndarray]:
    """(label, metric values) of table `name` (a TABLE_NAMES entry)."""
    if name == "wages":
        return SYNTHETIC, wage_survey(cfg.rows, cfg.seed)
    table, metric = name.split(".")
    t, m = ident(table), ident(metric)
    got = con.execute(f"SELECT {m}::DOUBLE AS m FROM {t} WHERE {m} IS NOT NULL").fetchnumpy()
    return f"{table} ({metric})", np.asarray(got["m"], dtype=np.float64)


def run_verifiers(cfg: VerifiersConfig, report: Report) -> dict[str, Any]:
    import duckdb

    import pcor_sql
    from pcor_sql.core.verifiers.registry import default_registry

    started = time.perf_counter()
    out: dict[str, Any] = {"config": asdict(cfg), "machine": machine(), "load": {"start": load_average()},
                           "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                           "tables": []}
    registry = default_registry()
    verifiers = [registry.make(name, **options) for _, name, options in VERIFIERS]
    con = duckdb.connect()
    try:
        pcor_sql.load_datasets(con)
        for name in cfg.tables:
            label, values = table_values(con, name, cfg)
            distinct, counts = np.unique(values, return_counts=True)
            report(f"{label}: {values.size:,} rows, {distinct.size:,} distinct values")
            entry = {"name": name, "label": label, "rows": int(values.size), "distinct": int(distinct.size),
                     "largest_copies": int(counts.max()), "verifiers": []}
            for (vlabel, _, _), got in zip(VERIFIERS, flagged_shares(values, verifiers)):
                entry["verifiers"].append({"verifier": vlabel, **got})
                report(f"  {vlabel}: {percent(got['share'])} of rows, {got['check_us']:.0f} µs per check")
            out["tables"].append(entry)
    finally:
        con.close()
    out["load"]["end"] = load_average()
    out["wall_s"] = time.perf_counter() - started
    out["targets"] = targets(out)
    return out


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """LOF's share on the tie-heavy synthetic table ≤ 3%."""
    wages = next((t for t in result["tables"] if t["name"] == "wages"), None)
    share = None if wages is None else wages["verifiers"][0]["share"]
    return [{"name": f"LOF (default rule) share of rows flagged among all rows, {SYNTHETIC}", "goal": f"≤ {percent(GOAL)}",
             "measured": percent(share), "met": None if share is None else share <= GOAL}]


def before_after(result: dict[str, Any]) -> str:
    """The before (plain rule) / after (distinct rule) line for each tie-heavy table."""
    lines = []
    for t in result["tables"]:
        plain, distinct = t["verifiers"][1]["share"], t["verifiers"][0]["share"]
        if t["distinct"] < t["rows"]:
            lines.append(f"- {t['label']}, LOF rows flagged among all rows: before (plain rule) {percent(plain)} → "
                         f"after (distinct rule, the default) {percent(distinct)}")
    return "\n".join(lines)


def verifier_tables(result: dict[str, Any]) -> list[Table]:
    labels = [t["label"] for t in result["tables"]]
    rows = []
    for i, (vlabel, _, _) in enumerate(VERIFIERS):
        cells = []
        for t in result["tables"]:
            v = t["verifiers"][i]
            cells.append(f"{percent(v['share'])} ({v['flagged_rows']:,} rows), {v['check_us']:.0f} µs")
        rows.append((vlabel, *cells))
    shapes = [(t["label"], f"{t['rows']:,}", f"{t['distinct']:,}", f"{t['largest_copies']:,}") for t in result["tables"]]
    from benchmarks.report import target_table

    return [
        make_table("Rows flagged among all rows (rows), mean time of one check", ("verifier", *labels), rows, (
            "Share = rows whose value the verifier flags with the whole table as the population (the full "
            "context), default options: lof(k=20, threshold=1.5), grubbs(alpha=0.05), histogram(rel=0.0025), "
            "zscore(z=3). One check per distinct value (a verdict depends on the value only); its rows all count.",
            "Check time: mean over those checks, each over the whole column (moments computed once per table); "
            "the faster of two rounds, the verifiers in opposite orders (compare them within a column). The plain rule's "
            "few-µs checks on tie-heavy columns are its shortcut (V has > k copies: LOF = 1 from one count); the "
            "distinct rule computes LOF there, from distinct values with their counts.",
            "A value with more than k rows is never flagged by the plain rule: its k nearest are its own copies, "
            "LOF = 1 (homicides: all but a few of the 98 ages). The distinct rule sees the grid of values; its "
            "end values have k-distinct-distances up to twice their neighbours' (homicides: ages 0–3, LOF "
            "1.5–1.74).",
        )),
        make_table("Tables", ("table", "rows", "distinct values", "copies of the most common value"), shapes, (
            f"{SYNTHETIC}: benchmarks/verifier_shares.py `wage_survey` (log-normal hourly wages, heaped to whole "
            f"dollars / quarters / cents, top-coded so that 120 rows share the top code), seed "
            f"{result['config']['seed']}.",
        )),
        target_table(result["targets"]),
    ]
