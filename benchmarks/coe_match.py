"""COE match under neighbouring datasets (paper §6.7, Tables 12–13) and the privacy check.

OCDP assumes COE(D1, V) = COE(D2, V) on neighbouring datasets. This measures how often that
holds for real verifiers: for sampled outliers V and datasets D' that differ from D in ΔD
rows, the share of (V, D') pairs whose COE is exactly the same set of contexts. Then the
§6.7 check: where the two COEs differ, the direct mechanism's exact laws (EM over each COE,
`em_probabilities`) are compared on the contexts both contain; the largest ratio of selection
probabilities is set against e^(ΔD·ε) (e^ε for ΔD = 1, the DP bound the paper checks).

As in the paper, the datasets are reduced so that the exact COE of every pair is cheap:
salaries to 14 attribute values (4 job titles × 5 employers × 5 years, ~12,800 rows,
2^11 admissible contexts), homicides to 12 (4 agency types × 2 states × 6 weapons, ~28,600
rows, 2^9). D' removes ΔD rows drawn uniformly (seeded) from the rows that are not sampled
outliers (removal is one direction of the add/remove neighbour relation). Outliers are drawn
uniformly (seeded) among the records that are outliers in their own cell under the verifier
— so COE(D, V) is never empty.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import duckdb
import numpy as np

from pcor_sql.engine.evaluator import Evaluator
from pcor_sql.engine.quoting import quote_identifier, quote_literal
from pcor_sql.engine.release import prepare_space
from pcor_sql.engine.schema import resolve_schema
from pcor_sql.engine.summary import build_summary
from pcor_sql.core.verifiers.registry import default_registry

Report = Callable[[str], None]

# dataset → (metric, {attribute: kept values}); see the module docstring.
REDUCED: dict[str, tuple[str, dict[str, tuple[str, ...]]]] = {
    "salaries": ("salary", {
        "job_title": ("Director", "Engineer", "Firefighter", "Registered Nurse"),
        "employer": ("City of Toronto", "Ontario Power Generation", "Toronto Police Service",
                     "University Health Network", "University of Toronto"),
        "year": ("2015", "2016", "2017", "2018", "2019"),
    }),
    "homicides": ("victim_age", {
        "agency_type": ("County Police", "Municipal Police", "Sheriff", "State Police"),
        "state": ("Florida", "Pennsylvania"),
        "weapon": ("Blunt Object", "Handgun", "Knife", "Rifle", "Shotgun", "Strangulation"),
    }),
}
PAPER_MATCH = {  # Tables 12 and 13: % of matching COEs for ΔD = 1, 5, 10, 25
    "salaries": {
        "grubbs": (99.8, 96.9, 94.5, 91.9), "lof": (89, 87.9, 86.7, 85.7), "histogram": (95.5, 82.1, 70.8, 58.8),
    },
    "homicides": {
        "grubbs": (100, 100, 100, 97.8), "lof": (99.9, 99.5, 98.7, 97.7), "histogram": (98.5, 85.2, 69.3, 53.3),
    },
}


def reduced_table(dataset: str) -> str:
    return f"pcor_bench_{dataset}_reduced"


def create_reduced(con: duckdb.DuckDBPyConnection, dataset: str) -> tuple[str, Any]:
    """Create the reduced table (keeping the ENUM types) and its schema with the kept values as
    declared domains."""
    metric, keep = REDUCED[dataset]
    table = reduced_table(dataset)
    where = " AND ".join(
        f"{quote_identifier(a)} IN ({', '.join(quote_literal(v) for v in vals)})" for a, vals in keep.items()
    )
    # The attributes become VARCHAR with the kept values declared as domains. (Keeping the
    # ENUM columns with a declared sub-domain trips the summary's sorted-index load, which
    # looks up every ENUM label — also the dropped ones — in the declared domain.)
    cols = ", ".join(
        f"CAST({quote_identifier(a)} AS VARCHAR) AS {quote_identifier(a)}" for a in keep
    )
    con.execute(
        f"CREATE OR REPLACE TABLE {quote_identifier(table)} AS SELECT id, {cols}, {quote_identifier(metric)} "
        f"FROM {quote_identifier(dataset)} WHERE {where}"
    )
    schema = resolve_schema(con, quote_identifier(table), quote_identifier(metric), by=list(keep),
                            domains={a: list(v) for a, v in keep.items()})
    return table, schema


@dataclass
class Pair:
    """One (outlier V, neighbour D') comparison."""

    record: int
    delta: int
    neighbour: int
    match: bool
    jaccard: float
    shared: int
    max_log_ratio: dict[str, float | None]  # accounting → max |log p_D(c) − log p_D'(c)| over shared c


@dataclass
class MatchResult:
    dataset: str
    verifier: str
    rows: int
    admissible: int
    outliers: list[int]
    pairs: list[Pair] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "verifier": self.verifier, "rows": self.rows, "admissible": self.admissible,
                "outliers": self.outliers, "pairs": [p.__dict__ for p in self.pairs]}


def _coe(con, summary, row, v, verifier) -> dict[int, float]:
    space = prepare_space(summary, row)
    masks, utilities = Evaluator(con, summary, space, v, verifier).coe(1 << 40)
    return {int(m): float(u) for m, u in zip(masks, utilities)}


def _log_em(utilities: dict[int, float], eps1: float) -> tuple[dict[int, float], float]:
    """(ε1·u(c) per context, log Σ exp(ε1·u)): the EM law over a COE in log space, exact where
    `em_probabilities` (same law) underflows to 0 for contexts far below the best."""
    from scipy.special import logsumexp

    logits = {c: eps1 * u for c, u in utilities.items()}
    return logits, float(logsumexp(list(logits.values())))


def max_log_ratio(a: dict[int, float], b: dict[int, float], eps1: float) -> float | None:
    """max over contexts in both COEs of |log Pr[c | D] − log Pr[c | D']| under the direct
    mechanism's EM (None when no context is shared)."""
    shared = set(a) & set(b)
    if not shared:
        return None
    la, za = _log_em(a, eps1)
    lb, zb = _log_em(b, eps1)
    return max(abs((la[c] - za) - (lb[c] - zb)) for c in shared)


def load_rows(con: duckdb.DuckDBPyConnection, schema: Any) -> dict[int, tuple[dict, float]]:
    """id → (row as a dict, metric value) for every row of the (reduced) relation."""
    cur = con.cursor().execute(
        f"SELECT *, CAST({schema.metric_sql} AS DOUBLE) AS __pcor_v FROM {schema.relation_sql} ORDER BY id"
    )
    names = [d[0] for d in cur.description]
    out = {}
    for values in cur.fetchall():
        d = dict(zip(names, values))
        v = float(d.pop("__pcor_v"))
        out[int(d["id"])] = (d, v)
    return out


def sample_outliers(con, summary, verifier, rows: dict[int, tuple[dict, float]], want: int,
                    rng: np.random.Generator, max_tries: int) -> list[tuple[int, dict, float]]:
    """Up to `want` records, drawn uniformly, that are outliers in their own cell."""
    ids = np.asarray(sorted(rows))
    out = []
    for rid in rng.permutation(ids)[:max_tries].tolist():
        row, v = rows[rid]
        space = prepare_space(summary, row)
        if Evaluator(con, summary, space, v, verifier).is_valid(space.v_mask):
            out.append((int(rid), row, v))
            if len(out) >= want:
                break
    return out


def run_match(
    con: duckdb.DuckDBPyConnection,
    dataset: str,
    verifiers: Sequence[str],
    deltas: Sequence[int],
    outliers: int,
    neighbours: int,
    seed: int,
    epsilon: float,
    report: Report,
) -> list[MatchResult]:
    table, schema = create_reduced(con, dataset)
    summary = build_summary(con, schema)
    registry = default_registry()
    rows = load_rows(con, schema)
    rng = np.random.default_rng([seed, 12, len(rows)])
    vobjs = {name: registry.make(name) for name in verifiers}
    sampled: dict[str, list[tuple[int, dict, float]]] = {}
    for name, ver in vobjs.items():
        sampled[name] = sample_outliers(con, summary, ver, rows, outliers, rng, max_tries=len(rows))
        report(f"COE match {dataset}: {len(sampled[name])} {name} outliers sampled")
    protected = {rid for lst in sampled.values() for rid, _, _ in lst}
    removable = np.asarray([i for i in sorted(rows) if i not in protected])
    base = {name: {rid: _coe(con, summary, row, v, vobjs[name]) for rid, row, v in sampled[name]} for name in verifiers}
    space = prepare_space(summary, sampled[verifiers[0]][0][1]) if sampled[verifiers[0]] else None
    results = {name: MatchResult(dataset, name, summary.n_rows, space.n_admissible if space else 0,
                                 [rid for rid, _, _ in sampled[name]]) for name in verifiers}
    eps1 = {"tight": epsilon, "paper": epsilon / 2}  # direct: ε = ε1 (tight) or 2ε1 (paper)
    for delta in deltas:
        t0 = time.perf_counter()
        for j in range(neighbours):
            drop = rng.choice(removable, size=delta, replace=False)
            rel = (f"(SELECT * FROM {quote_identifier(table)} WHERE id NOT IN "
                   f"({', '.join(quote_literal(int(i)) for i in drop)}))")
            nsum = build_summary(con, replace(schema, relation_sql=rel))
            for name in verifiers:
                for rid, row, v in sampled[name]:
                    a, b = base[name][rid], _coe(con, nsum, row, v, vobjs[name])
                    union = len(set(a) | set(b))
                    shared = len(set(a) & set(b))
                    match = set(a) == set(b)
                    ratios = {acc: (None if match else max_log_ratio(a, b, e1)) for acc, e1 in eps1.items()}
                    jaccard = shared / union if union else 1.0
                    results[name].pairs.append(Pair(rid, delta, j, match, jaccard, shared, ratios))
        report(f"COE match {dataset} ΔD = {delta}: {neighbours} neighbours in {time.perf_counter() - t0:.1f} s")
    return [results[name] for name in verifiers]
