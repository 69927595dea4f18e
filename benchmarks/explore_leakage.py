"""§6.7 for `explore`: how far its output law moves between neighbouring datasets whose COEs
differ (where OCDP promises nothing), next to `direct`'s, on the paper's reduced tables.

For sampled outliers V and datasets D' that lack ΔD rows of D (as `coe_match`), on every pair
with COE(D, V) ≠ COE(D', V):
- direct: the exact EM laws over the two COEs (`coe_match.max_log_ratio`);
- explore: Pr[c | D] = E_S[EM_ε1 over S](c), S the collected set. The collection reads
  validity only, so it is simulated exactly on the two COEs (`collect` on a set oracle) —
  no data is read — and the expectation is taken over `runs` seeds, the same seeds for D and
  D' (common random numbers: the two collections differ only where the COEs make them). The
  EM over each S is exact (log space); the maximum runs over every context both estimated
  laws hold, as direct's runs over every context both COEs hold. Where S is all of COE on
  both sides (a lattice within the check budget) the estimate is exact and equals direct's.

Explore runs with its own defaults (n = 10,000, 4,000 checks) and with n = 50 (a small S, so
that the collection's randomness matters). BFS (the engine's defaults) is estimated the same
way — its path depends on EM draws too, so its runs diverge more — for comparison: every
search that walks or samples makes what it looks at depend on COE, where direct does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import duckdb
import numpy as np
from scipy.special import logsumexp

import pcor_sql
from benchmarks import coe_match
from benchmarks._sql import id_list
from pcor_sql.core.accounting import derive_budget
from pcor_sql.core.exploration import collect
from pcor_sql.core.searches import DEFAULT_EXPLORE_CHECKS, DEFAULT_EXPLORE_SAMPLES, DEFAULT_SAMPLES
from pcor_sql.core.search_specs import run_search
from pcor_sql.core.start import DEFAULT_DESCENTS, find_start
from pcor_sql.core.space import ContextSpace

Report = Callable[[str], None]


@dataclass(frozen=True)
class SetOracle:
    """Validity as membership in a known COE (all `collect` reads), and the utilities of its
    contexts (which BFS's EM steps read; never those of invalid contexts)."""

    space: ContextSpace
    valid: frozenset[int]
    utilities: dict[int, float] | None = None

    def is_valid(self, mask: int) -> bool:
        return mask in self.valid

    def utility(self, mask: int) -> float:
        return self.utilities[mask]


def bfs_log_law(space: ContextSpace, coe: dict[int, float], eps: float, runs: int, seed: int) -> dict[int, float]:
    """log Pr[BFS releases c] with the engine's defaults (n = 50, its descents, its start,
    tight: ε1 = ε/51), estimated over `runs` seeded runs on the COE, each run's final EM law
    exact given what it visited (so the randomness estimated is the path's)."""
    oracle = SetOracle(space, frozenset(coe), coe)
    start, _ = find_start(oracle)
    if start is None:
        return {}
    eps1 = derive_budget(eps, "bfs", DEFAULT_SAMPLES, "tight").epsilon1
    terms: dict[int, list[float]] = {}
    for r in range(runs):
        visited = list(dict.fromkeys(run_search("bfs", oracle, eps1, np.random.default_rng([seed, r]), start=start,
                                                samples=DEFAULT_SAMPLES, descents=DEFAULT_DESCENTS).trace.visited))
        logits = np.array([eps1 * coe[c] for c in visited])
        for c, lp in zip(visited, logits - logsumexp(logits)):
            terms.setdefault(c, []).append(float(lp))
    return {c: float(logsumexp(ts)) - math.log(runs) for c, ts in terms.items()}


def explore_log_law(space: ContextSpace, coe: dict[int, float], eps1: float, runs: int, seed: int, samples: int,
                    max_checks: int) -> dict[int, float]:
    """log Pr[explore releases c], estimated over `runs` collections (seeds [seed, r]), each
    followed by the exact EM law over what it collected; in log space throughout, so that
    contexts far below the best keep their (tiny) probabilities, as in `coe_match`."""
    oracle = SetOracle(space, frozenset(coe))
    terms: dict[int, list[float]] = {}
    for r in range(runs):
        found = list(collect(oracle, np.random.default_rng([seed, r]), samples=samples, max_checks=max_checks).valid)
        if not found:
            continue
        logits = np.array([eps1 * coe[c] for c in found])
        for c, lp in zip(found, logits - logsumexp(logits)):
            terms.setdefault(c, []).append(float(lp))
    return {c: float(logsumexp(ts)) - math.log(runs) for c, ts in terms.items()}


def max_log_ratio(a: dict[int, float], b: dict[int, float]) -> float | None:
    """max over contexts both laws hold of |log Pr_a − log Pr_b| (log laws in, as above)."""
    return max((abs(a[c] - b[c]) for c in set(a) & set(b)), default=None)


def run_leakage(con: duckdb.DuckDBPyConnection, dataset: str, verifiers: Sequence[str], deltas: Sequence[int],
                outliers: int, neighbours: int, seed: int, epsilon: float, runs: int,
                report: Report) -> list[dict[str, Any]]:
    relation = coe_match.create_reduced(con, dataset)
    session = pcor_sql.Session(con)
    out = []
    for verifier in verifiers:
        everyone = session.prepare(coe_match._request(con, dataset, relation, None, verifier))
        ids = sorted(int(r.record["id"]) for r in everyone.records)
        rng = np.random.default_rng([seed, 67, len(ids)])
        sampled = coe_match.sample_outliers(everyone, outliers, rng, max_tries=len(ids))
        removable = np.asarray([i for i in ids if i not in set(sampled)])
        base = coe_match._coes(session, dataset, relation, sampled, verifier)
        run = session.prepare(coe_match._request(con, dataset, relation, sampled, verifier))
        spaces = {int(r.record["id"]): run.space(i) for i, r in enumerate(run.records)}
        for delta in deltas:
            for j in range(neighbours):
                drop = rng.choice(removable, size=delta, replace=False)
                other = coe_match._coes(pcor_sql.Session(con), dataset,
                                        f"(SELECT * FROM {relation} WHERE id NOT IN ({id_list(drop)}))", sampled, verifier)
                for rid in sampled:
                    a, b = base[rid], other[rid]
                    if set(a) == set(b) or not a or not b:
                        continue
                    row = {"dataset": dataset, "verifier": verifier, "delta": delta, "record": rid, "neighbour": j,
                           "direct": coe_match.max_log_ratio(a, b, epsilon)}
                    for label, n in (("explore", DEFAULT_EXPLORE_SAMPLES), ("explore_n50", 50)):
                        la = explore_log_law(spaces[rid], a, epsilon, runs, seed + rid, n, DEFAULT_EXPLORE_CHECKS)
                        lb = explore_log_law(spaces[rid], b, epsilon, runs, seed + rid, n, DEFAULT_EXPLORE_CHECKS)
                        row[label] = max_log_ratio(la, lb)
                    row["bfs"] = max_log_ratio(bfs_log_law(spaces[rid], a, epsilon, runs, seed + rid),
                                               bfs_log_law(spaces[rid], b, epsilon, runs, seed + rid))
                    out.append(row)
        report(f"§6.7 explore {dataset} {verifier}: {sum(r['verifier'] == verifier for r in out)} non-matching pairs")
    return out
