"""The naive baseline the benchmarks compare against: one DuckDB query per context.

`NaiveOracle` implements the searches' `Oracle` protocol the straightforward way, as the
PCOR paper's own implementation does: for every context it runs the population query with
the compiled WHERE clause (`OutlierRun.population_sql`, the engine's plain path) in DuckDB,
fetches the metric values and computes the verifier on them with numpy / SciPy /
scikit-learn — no per-cell summary, no sorted index, no vectorised lattice. The only memory
it has is a dict of per-context answers (verdict and population size), so each context costs
at most one query; that makes the baseline *faster* than one that re-queries, and every
speed-up measured against it a lower bound.

The verifiers are written here independently of `pcor_sql.core.verifiers`:
- grubbs: mean / sample std (ddof 1) with numpy, the critical value from `scipy.stats.t.ppf`;
- zscore: numpy mean and sample std;
- histogram: `numpy.histogram` with ⌈√N⌉ bins; V's bin is found by histogramming the
  population with and without one copy of V over the same range (numpy's own bin arithmetic);
- lof: `sklearn.neighbors.LocalOutlierFactor(n_neighbors=min(k, N−1))`, V's
  `-negative_outlier_factor_`. That is the plain rule for duplicates, with scikit-learn breaking
  ties at a k-distance arbitrarily; the engine's default is Breunig et al.'s distinct rule
  (DESIGN.md §2) and includes every tied point. Without ties all three agree; on metrics with
  duplicates some verdicts differ from the engine's, and the benchmark reports how often the
  two releases coincide.

Privacy: this is a measuring instrument for the data owner; the searches it feeds are the
library's own (`run_search`), so a release made with it has the same cost as the engine's.
"""

from __future__ import annotations

import importlib.util
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import duckdb
import numpy as np

from pcor_sql.core.search_specs import run_search, search_spec
from pcor_sql.core.start import find_start
from pcor_sql.errors import InternalError, NoValidContext, UserError

NAIVE_VERIFIERS = ("grubbs", "lof", "histogram", "zscore")


def _grubbs(x: np.ndarray, v: float, alpha: float = 0.05) -> bool:
    from scipy import stats

    n = x.size
    if n < 3:
        return False
    s = float(np.std(x, ddof=1))
    if not s > 0 or x.min() == x.max():
        return False
    g = abs(v - float(np.mean(x))) / s
    t = float(stats.t.ppf(1.0 - alpha / (2.0 * n), n - 2))
    crit = (n - 1) / math.sqrt(n) * math.sqrt(t * t / (n - 2 + t * t))
    return g > crit


def _zscore(x: np.ndarray, v: float, z: float = 3.0) -> bool:
    n = x.size
    if n < 2 or x.min() == x.max():
        return False
    s = float(np.std(x, ddof=1))
    return s > 0 and abs(v - float(np.mean(x))) / s > z


def _histogram(x: np.ndarray, v: float, rel: float = 0.0025) -> bool:
    n = x.size
    bins = math.isqrt(n - 1) + 1 if n > 1 else 1  # ⌈√n⌉
    rng = (float(x.min()), float(x.max()))
    counts, _ = np.histogram(x, bins=bins, range=rng)
    i = int(np.flatnonzero(x == v)[0])
    without, _ = np.histogram(np.delete(x, i), bins=bins, range=rng)
    b = int(np.flatnonzero(counts != without)[0])
    return counts[b] < rel * n


def _lof(x: np.ndarray, v: float, k: int = 20, threshold: float = 1.5) -> bool:
    from sklearn.neighbors import LocalOutlierFactor

    n = x.size
    if n < 2:
        return False
    model = LocalOutlierFactor(n_neighbors=min(k, n - 1))
    with warnings.catch_warnings():
        # "Duplicate values are leading to incorrect results": scikit-learn's tie rule, see above.
        warnings.simplefilter("ignore", UserWarning)
        model.fit(x.reshape(-1, 1))
    i = int(np.flatnonzero(x == v)[0])
    return float(-model.negative_outlier_factor_[i]) > threshold


_CHECKS: dict[str, Callable[..., bool]] = {
    "grubbs": _grubbs,
    "zscore": _zscore,
    "histogram": _histogram,
    "lof": _lof,
}


@dataclass(frozen=True)
class NaiveVerifier:
    """A built-in verifier re-implemented on a fetched numpy array (see the module docstring)."""

    name: str
    options: Mapping[str, Any]

    def __post_init__(self) -> None:
        if self.name not in _CHECKS:
            raise UserError(
                f"the naive baseline has no verifier {self.name!r}",
                f"use one of: {', '.join(NAIVE_VERIFIERS)}",
            )
        if self.name == "lof" and importlib.util.find_spec("sklearn") is None:
            raise UserError(
                "the naive baseline's LOF needs scikit-learn, which is not installed",
                "pip install scikit-learn (or pcor-sql[test]) to measure it",
            )

    def check(self, values: np.ndarray, v: float) -> bool:
        return bool(_CHECKS[self.name](values, v, **dict(self.options)))


class NaiveStopped(Exception):
    """A naive run passed its deadline (the benchmark then reports a lower bound)."""


class NaiveOracle:
    """The `Oracle` of the searches for record i of a prepared run, answered by one DuckDB
    query per context (the run only supplies the query text: `OutlierRun.population_sql`).

    With a `deadline` (a `time.perf_counter()` value) a query started after it raises
    `NaiveStopped` instead: the benchmark's way to bound a slow baseline."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        run: Any,
        i: int,
        verifier: NaiveVerifier,
        *,
        utility: str = "population",
        start: int | None = None,
        deadline: float | None = None,
    ):
        if utility not in ("population", "overlap"):
            raise UserError(f"unknown utility {utility!r}", "use population or overlap")
        if utility == "overlap" and start is None:
            raise InternalError("overlap utility without a starting context")
        self.con = con
        self.run = run
        self.i = i
        self.space = run.space(i)
        self.v = float(run.records[i].value)
        self.verifier = verifier
        self.utility_name = utility
        self.start = start
        self._valid: dict[int, bool] = {}
        self._size: dict[int, int] = {}
        self.queries = 0
        self.deadline = deadline

    def fetch(self, mask: int) -> np.ndarray:
        """The metric values of context `mask`'s population, by one query."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise NaiveStopped()
        self.queries += 1
        sql = self.run.population_sql(self.i, mask)
        return np.asarray(self.con.cursor().execute(sql).fetchnumpy()["m"], dtype=np.float64)

    def is_valid(self, mask: int) -> bool:
        verdict = self._valid.get(mask)
        if verdict is None:
            if not self.space.is_admissible(mask):
                raise InternalError("validity asked of a context that does not contain the record")
            values = self.fetch(mask)
            self._size[mask] = int(values.size)
            verdict = self.verifier.check(values, self.v)
            self._valid[mask] = verdict
        return verdict

    @property
    def n_verified(self) -> int:
        return len(self._valid)

    def population_size(self, mask: int) -> int:
        n = self._size.get(mask)
        if n is None:
            n = int(self.fetch(mask).size)
            self._size[mask] = n
        return n

    def utility(self, mask: int) -> float:
        if self.utility_name == "population":
            return float(self.population_size(mask))
        return float(self.population_size(mask & self.start))


@dataclass(frozen=True)
class NaiveRelease:
    """One release made through the naive oracle (for timing and comparison; never shown)."""

    mask: int
    start_mask: int
    contexts_verified: int
    queries: int


def naive_release(
    con: duckdb.DuckDBPyConnection,
    run: Any,
    i: int,
    verifier: NaiveVerifier,
    source: Any,
    *,
    deadline: float | None = None,
) -> NaiveRelease:
    """What `run.release(i, source)` does, over a `NaiveOracle`: a validity-only start search
    (`find_start`, for the searches that walk from a start), then the library's `run_search`
    with the request's search, its options and ε1, and the same source."""
    request = run.request
    space = run.space(i)
    oracle = NaiveOracle(con, run, i, verifier, deadline=deadline)
    if not search_spec(request.search).graph and request.utility == "population":
        start = space.v_mask  # as the engine: a search that does not walk from a start gets none
    else:
        start, checks = find_start(oracle)
        if start is None:
            raise NoValidContext(f"the naive baseline found no start in {checks:,} contexts", "try another verifier")
    if request.utility != "population":
        oracle = NaiveOracle(con, run, i, verifier, utility=request.utility, start=start, deadline=deadline)
    options = request.search_options()
    if "max_contexts" in options:
        limit = options.pop("max_contexts")
        options["max_admissible"] = limit if limit is not None else 1 << 64
    result = run_search(request.search, oracle, request.budget.epsilon1, source, start=start, **options)
    return NaiveRelease(int(result.mask), int(start), oracle.n_verified, oracle.queries)
