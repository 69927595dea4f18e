"""Evidence for the sensitive-privacy paper's central claim on real data: at equal ε, the
(ε, k)-sensitively private mechanism errs far less on true anomalies than the pareto-optimal
ε-DP mechanism (DESIGN.md §3).

For every record i of a relation, both mechanisms answer "is i a (β, r)-anomaly?" with
Construction 1; record i's error probability is exactly its flip probability p(λ) (Claim 2),
with λ = Δ_G (dp) or λ = λ_k (sp). The table reports the *exact expected* error rates — the mean
of p over the true anomalies, over the other records and over all records — so it needs no
randomness and no repetitions. An optional seeded simulation (one answer per record and trial,
drawn as a binomial count per distinct (x_i, B) group, which has exactly the law of the sum of
the independent per-record flips) shows the realised rates next to the expectations.

Everything is computed per distinct (x_i, B) pair: real columns have few, so the grid of
ε × β × r × k costs one ball-count pass per radius and microseconds per cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import duckdb
import numpy as np

from benchmarks import _anomaly_api as anomaly
from pcor_sql.errors import UserError


@dataclass(frozen=True)
class EvidenceRow:
    """Error rates of the two mechanisms at one (ε, β, r, k). Rates are fractions of records;
    a rate over an empty group (e.g. no true anomalies) is None. `sensitive` counts the records
    with B ≥ β + 1 − k, for which the SP mechanism is exactly as accurate as DP (λ_k = Δ_G)."""

    epsilon: float
    beta: float
    radius: float
    k: int
    norm: str
    records: int
    anomalies: int
    sensitive: int
    dp_error_anomalies: float | None
    sp_error_anomalies: float | None
    dp_error_normal: float | None
    sp_error_normal: float | None
    dp_error_overall: float
    sp_error_overall: float
    sim_dp_error_anomalies: float | None = None
    sim_sp_error_anomalies: float | None = None
    sim_dp_error_overall: float | None = None
    sim_sp_error_overall: float | None = None


def _rate(errors: np.ndarray, weights: np.ndarray, mask: np.ndarray) -> float | None:
    total = weights[mask].sum()
    return None if total == 0 else float((errors[mask] * weights[mask]).sum() / total)


def _grid(values: Sequence[float], name: str) -> list:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise UserError(f"{name} must be a non-empty list", f"pass e.g. {name}=[1, 2]")
    return list(values)


def _check_grid(
    epsilons: Sequence[float], betas: Sequence[float], radii: Sequence[float], ks: Sequence[int]
) -> tuple[list, list, list, list]:
    """The four axes as lists, each value checked (the library's own rules for β, r and ε)."""
    eps_list, beta_list = _grid(epsilons, "epsilons"), _grid(betas, "betas")
    radius_list, k_list = _grid(radii, "radii"), _grid(ks, "ks")
    for b in beta_list:
        for r in radius_list:
            for e in eps_list:
                anomaly.validate_params(b, r, e, "dp", None)
    for k in k_list:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise UserError(f"every k must be an integer ≥ 1, got {k!r}", "pass e.g. ks=[1, 2]")
    return eps_list, beta_list, radius_list, k_list


def _simulated(
    rng: np.random.Generator, trials: np.ndarray, p_dp: np.ndarray, p_sp: np.ndarray, truth: np.ndarray
) -> dict[str, float | None]:
    """Realised error rates of `trials` answers per (x_i, B) group: binomial flip counts."""
    flips_dp = rng.binomial(trials, p_dp)
    flips_sp = rng.binomial(trials, p_sp)
    return {
        "sim_dp_error_anomalies": _rate(flips_dp / trials, trials, truth),
        "sim_sp_error_anomalies": _rate(flips_sp / trials, trials, truth),
        "sim_dp_error_overall": float(flips_dp.sum() / trials.sum()),
        "sim_sp_error_overall": float(flips_sp.sum() / trials.sum()),
    }


def anomaly_error_table(
    con: duckdb.DuckDBPyConnection,
    relation_sql: str,
    columns: Sequence[str],
    *,
    epsilons: Sequence[float],
    betas: Sequence[float],
    radii: Sequence[float],
    ks: Sequence[int],
    norm: str = "l2",
    simulation_trials: int = 0,
    seed: int | None = None,
) -> list[EvidenceRow]:
    """One row per (r, β, ε, k) with k ≤ ⌊β⌋ + 1 (larger k do not exist for that β and are skipped).

    Exact expected error rates of dp (λ = Δ_G) and sp (λ = λ_k) over every record; with
    `simulation_trials` > 0 (needs `seed`) also the realised rates of that many seeded runs.
    Records with NULL/NaN in a column are an input error, as for the queries themselves.
    """
    eps_list, beta_list, radius_list, k_list = _check_grid(epsilons, betas, radii, ks)
    norm_name = anomaly.validate_norm(norm)
    if simulation_trials and seed is None:
        raise UserError("a simulation needs a seed", "pass seed=<int> (the evidence is not a release)")
    if isinstance(simulation_trials, bool) or not isinstance(simulation_trials, int) or simulation_trials < 0:
        raise UserError(f"simulation_trials must be an integer ≥ 0, got {simulation_trials!r}", "pass e.g. 10")
    rng = np.random.default_rng(seed) if simulation_trials else None

    points = anomaly.load_points(con, relation_sql, columns, None)
    rows: list[EvidenceRow] = []
    for r in radius_list:
        counts = anomaly.relation_ball_counts(points, r, norm_name)
        pairs, weights = np.unique(np.stack([counts.multiplicity, counts.ball], axis=1), axis=0, return_counts=True)
        mult, ball = pairs[:, 0], pairs[:, 1]
        n = int(weights.sum())
        for beta_given in beta_list:
            beta = int(math.floor(beta_given))
            truth = anomaly.anomaly_truth(mult, ball, beta)
            delta = anomaly.mdd_dp(mult, ball, beta)
            for eps in eps_list:
                p_dp = anomaly.flip_probability(delta, float(eps))
                for k in k_list:
                    if k > beta + 1:
                        continue
                    p_sp = anomaly.flip_probability(anomaly.lambda_k(mult, ball, beta, int(k)), float(eps))
                    sim = {} if rng is None else _simulated(rng, weights * simulation_trials, p_dp, p_sp, truth)
                    rows.append(
                        EvidenceRow(
                            epsilon=float(eps),
                            beta=float(beta_given),
                            radius=float(r),
                            k=int(k),
                            norm=norm_name,
                            records=n,
                            anomalies=int(weights[truth].sum()),
                            sensitive=int(weights[anomaly.sensitive(ball, beta, int(k))].sum()),
                            dp_error_anomalies=_rate(p_dp, weights, truth),
                            sp_error_anomalies=_rate(p_sp, weights, truth),
                            dp_error_normal=_rate(p_dp, weights, ~truth),
                            sp_error_normal=_rate(p_sp, weights, ~truth),
                            dp_error_overall=float((p_dp * weights).sum() / n),
                            sp_error_overall=float((p_sp * weights).sum() / n),
                            **sim,
                        )
                    )
    return rows


# ---- formatting (pure: text out, nothing printed) -----------------------------------------

_HEADERS = (
    "ε", "β", "r", "k", "anomalies", "DP err (anom.)", "SP err (anom.)", "DP err (other)", "SP err (other)",
    "DP err (all)", "SP err (all)",
)
_SIM_HEADERS = ("sim DP (anom.)", "sim SP (anom.)")


def format_rate(value: float | None) -> str:
    """A rate in 3 significant digits (scientific below 10⁻³); "–" for a rate over an empty group."""
    if value is None:
        return "–"
    return f"{value:.3g}" if value >= 1e-3 or value == 0 else f"{value:.1e}"


def is_simulated(rows: Sequence[EvidenceRow]) -> bool:
    return any(r.sim_dp_error_anomalies is not None or r.sim_dp_error_overall is not None for r in rows)


def evidence_headers(rows: Sequence[EvidenceRow]) -> list[str]:
    """Column names of the evidence table (the simulated columns only when rows carry them)."""
    return list(_HEADERS) + (list(_SIM_HEADERS) if is_simulated(rows) else [])


def evidence_cells(row: EvidenceRow, simulated: bool) -> list[str]:
    """One row of the evidence table as text, in the order of `evidence_headers`."""
    cells = [
        f"{row.epsilon:g}", f"{row.beta:g}", f"{row.radius:g}", str(row.k), str(row.anomalies),
        format_rate(row.dp_error_anomalies), format_rate(row.sp_error_anomalies),
        format_rate(row.dp_error_normal), format_rate(row.sp_error_normal),
        format_rate(row.dp_error_overall), format_rate(row.sp_error_overall),
    ]
    if simulated:
        cells += [format_rate(row.sim_dp_error_anomalies), format_rate(row.sim_sp_error_anomalies)]
    return cells


def evidence_title(relation: str, columns: Sequence[str], rows: Sequence[EvidenceRow]) -> str:
    """`salaries on salary (51000 records, norm l2)`."""
    if not rows:
        return f"{relation} on {', '.join(columns)} (no rows: no k fits any β)"
    return f"{relation} on {', '.join(columns)} ({rows[0].records} records, norm {rows[0].norm})"


def evidence_markdown(relation: str, columns: Sequence[str], rows: Sequence[EvidenceRow]) -> str:
    """The evidence table of one relation as a Markdown section (a `###` title and a table)."""
    simulated = is_simulated(rows)
    head = evidence_headers(rows)
    lines = [f"### {evidence_title(relation, columns, rows)}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(evidence_cells(r, simulated)) + " |" for r in rows]
    return "\n".join(lines)
