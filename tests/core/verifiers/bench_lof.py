"""Per-check time of the LOF verifier under both rules for duplicates: N = 50,000 values, k = 20,
V drawn from the population.

Run from the repository root: python -m tests.core.verifiers.bench_lof [--n 50000] [--checks 3000]
Prints, for a few seeded value distributions, the median and 90th percentile over V of one
timed check ("single"), and of the best of --repeat runs of the same check ("best of r"),
which filters out preemption when the machine is shared (it also runs with warm caches).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.lof import Lof


def _populations(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "normal": rng.normal(size=n),
        "uniform": rng.uniform(size=n),
        "lognormal salaries, rounded to 100": np.round(rng.lognormal(10.5, 0.5, size=n), -2),
        "integers 0..99": rng.integers(0, 100, size=n).astype(np.float64),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--checks", type=int, default=3_000)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--duplicates", choices=("distinct", "plain", "both"), default="both")
    args = parser.parse_args()
    rules = ("distinct", "plain") if args.duplicates == "both" else (args.duplicates,)
    rng = np.random.default_rng(2024)
    cases = [(label, values, rng.choice(values, args.checks)) for label, values in _populations(args.n, rng).items()]
    for (label, values, vs), rule in ((case, rule) for case in cases for rule in rules):
        lof = Lof(k=args.k, duplicates=rule)
        label = f"{label} [{rule}]"
        sorted_values = np.sort(values)
        pops = [ArrayPopulation(sorted_values, float(v)) for v in vs]
        for pop in pops[:50]:  # warm caches
            lof.check(pop)
        single = np.empty(len(pops))
        best = np.full(len(pops), np.inf)
        for i, pop in enumerate(pops):
            for r in range(args.repeat):
                t0 = time.perf_counter()
                lof.check(pop)
                t = time.perf_counter() - t0
                if r == 0:
                    single[i] = t
                best[i] = min(best[i], t)
        print(
            f"{label:47s} single: median {np.median(single) * 1e6:6.1f} µs, p90 {np.percentile(single, 90) * 1e6:6.1f}"
            f"   best of {args.repeat}: median {np.median(best) * 1e6:6.1f} µs, p90 {np.percentile(best, 90) * 1e6:6.1f}"
        )


if __name__ == "__main__":
    main()
