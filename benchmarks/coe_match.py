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
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import duckdb
import numpy as np

import pcor_sql
from benchmarks._sql import id_list, ident, literal

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


def create_reduced(con: duckdb.DuckDBPyConnection, dataset: str) -> str:
    """Create the reduced table (see the module docstring); its relation text."""
    metric, keep = REDUCED[dataset]
    table = ident(reduced_table(dataset))
    where = " AND ".join(f"{ident(a)} IN ({', '.join(literal(v) for v in vals)})" for a, vals in keep.items())
    # The attributes become VARCHAR with the kept values declared as domains. (Keeping the
    # ENUM columns with a declared sub-domain trips the summary's sorted-index load, which
    # looks up every ENUM label — also the dropped ones — in the declared domain.)
    cols = ", ".join(f"CAST({ident(a)} AS VARCHAR) AS {ident(a)}" for a in keep)
    con.execute(
        f"CREATE OR REPLACE TABLE {table} AS SELECT id, {cols}, {ident(metric)} FROM {ident(dataset)} WHERE {where}"
    )
    return table


def _request(con: duckdb.DuckDBPyConnection, dataset: str, relation: str, ids: Sequence[int] | None,
             verifier: str) -> pcor_sql.OutlierRequest:
    """Records `ids` (None: every row) of `relation`, on the kept values as declared domains."""
    metric, keep = REDUCED[dataset]
    where = "TRUE" if ids is None else f"id IN ({id_list(ids)})"
    return pcor_sql.outlier_request(
        con, f"SELECT {ident(metric)} FROM {relation} WHERE {where}", verifier=verifier, by=list(keep),
        domains={a: list(v) for a, v in keep.items()},
    )


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


def _coes(session: pcor_sql.Session, dataset: str, relation: str, ids: Sequence[int],
          verifier: str) -> dict[int, dict[int, float]]:
    """id → COE(relation, V) of each record `ids` names, as context → utility."""
    if not ids:
        return {}
    run = session.prepare(_request(session.con, dataset, relation, ids, verifier))
    out = {}
    for i, rec in enumerate(run.records):
        masks, utilities = run.oracle(i).coe(1 << 40)
        out[int(rec.record["id"])] = {int(m): float(u) for m, u in zip(masks, utilities)}
    return out


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


def sample_outliers(everyone: Any, want: int, rng: np.random.Generator, max_tries: int) -> list[int]:
    """Up to `want` record ids, drawn uniformly, that are outliers in their own cell
    (`everyone`: the prepared run of every row under one verifier)."""
    index = {int(r.record["id"]): i for i, r in enumerate(everyone.records)}
    out = []
    for rid in rng.permutation(np.asarray(sorted(index)))[:max_tries].tolist():
        i = index[rid]
        if everyone.oracle(i).is_valid(everyone.space(i).v_mask):
            out.append(int(rid))
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
    relation = create_reduced(con, dataset)
    session = pcor_sql.Session(con)
    everyone = {name: session.prepare(_request(con, dataset, relation, None, name)) for name in verifiers}
    ids = sorted(int(r.record["id"]) for r in everyone[verifiers[0]].records)
    rng = np.random.default_rng([seed, 12, len(ids)])
    sampled: dict[str, list[int]] = {}
    for name in verifiers:
        sampled[name] = sample_outliers(everyone[name], outliers, rng, max_tries=len(ids))
        report(f"COE match {dataset}: {len(sampled[name])} {name} outliers sampled")
    protected = {rid for lst in sampled.values() for rid in lst}
    removable = np.asarray([i for i in ids if i not in protected])
    base = {name: _coes(session, dataset, relation, sampled[name], name) for name in verifiers}
    admissible = everyone[verifiers[0]].space(0).n_admissible
    results = {name: MatchResult(dataset, name, len(ids), admissible, list(sampled[name])) for name in verifiers}
    eps1 = {"tight": epsilon, "paper": epsilon / 2}  # direct: ε = ε1 (tight) or 2ε1 (paper)
    for delta in deltas:
        t0 = time.perf_counter()
        for j in range(neighbours):
            drop = rng.choice(removable, size=delta, replace=False)
            neighbour = f"(SELECT * FROM {relation} WHERE id NOT IN ({id_list(drop)}))"
            fresh = pcor_sql.Session(con)  # D' is another dataset: its own summary
            for name in verifiers:
                coes = _coes(fresh, dataset, neighbour, sampled[name], name)
                for rid in sampled[name]:
                    a, b = base[name][rid], coes[rid]
                    union = len(set(a) | set(b))
                    shared = len(set(a) & set(b))
                    match = set(a) == set(b)
                    ratios = {acc: (None if match else max_log_ratio(a, b, e1)) for acc, e1 in eps1.items()}
                    jaccard = shared / union if union else 1.0
                    results[name].pairs.append(Pair(rid, delta, j, match, jaccard, shared, ratios))
        report(f"COE match {dataset} ΔD = {delta}: {neighbours} neighbours in {time.perf_counter() - t0:.1f} s")
    return [results[name] for name in verifiers]
