"""Compiled validity checks on the per-cell summary: context bitset → (verdict, population size).

`compiled_check` returns a function of a context (its bitset) for the built-in verifiers whose
kernels live in `core.verifiers.moment_kernel` (Grubbs, z-score) and
`core.verifiers.histogram_kernel` (histogram), or None, and then the evaluator takes the
reference path (`SummaryPopulation` and `verifier.check`). Only the exact built-in types are
compiled: a subclass may override `check`. A summary that serves values through per-cell
windows (Spark) has no sorted runs here, so it keeps the reference path too.

Each kernel does the membership (`CellSummary.member`), the population's moments and the
verdict in one call; the kernels' docstrings show why their verdicts are the reference's. When
a kernel cannot decide exactly (Grubbs between two tabulated critical values, a histogram bin
whose edges need the reference's bisection), the reference decides that context.

Measured (`python -m benchmarks.per_check --rows 10000000 --contexts 3000`, 1,200 cells): see
BENCHMARKS.md and the module doc of `benchmarks.per_check`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from pcor_sql.core.jit import flat_bits, mask_words
from pcor_sql.core.space import ContextSpace
from pcor_sql.core.verifiers.grubbs import Grubbs, grubbs_critical_one
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.histogram_kernel import FALLBACK, histogram_kernel
from pcor_sql.core.verifiers.moment_kernel import TRUE, UNDECIDED, grubbs_kernel, grubbs_table, zscore_kernel
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.engine.summary import CellSummary
from pcor_sql.errors import InternalError

Check = Callable[[int], tuple[bool, int]]


def compiled_check(summary: CellSummary, space: ContextSpace, verifier: Any, v: float) -> Check | None:
    """(context → (verdict, n)) for `verifier` on `summary`, or None when it is not compiled."""
    kind = type(verifier)
    if kind not in (Grubbs, ZScore, Histogram) or summary.windows is not None:
        return None
    flat = flat_bits(summary.coords, space.offsets)
    n_words = (space.t + 63) // 64
    scratch = np.empty(len(summary.count), dtype=np.int64)
    count = np.ascontiguousarray(summary.count, dtype=np.int64)
    vmin = np.ascontiguousarray(summary.vmin, dtype=np.float64)
    vmax = np.ascontiguousarray(summary.vmax, dtype=np.float64)
    v = float(v)

    def reference(mask: int) -> bool:
        return bool(verifier.check(summary.population(summary.member(space, mask), v)))

    if kind is Histogram:
        runs = summary.runs()
        values, starts, rel = runs.values, np.ascontiguousarray(runs.starts, dtype=np.int64), float(verifier.rel)

        def histogram(mask: int) -> tuple[bool, int]:
            code, n = histogram_kernel(mask_words(mask, n_words), flat, count, vmin, vmax, values, starts, v, rel, scratch)
            _nonempty(n)
            return (code == TRUE if code != FALLBACK else reference(mask)), int(n)

        return histogram
    s1 = np.ascontiguousarray(summary.s1, dtype=np.float64)
    s2 = np.ascontiguousarray(summary.s2, dtype=np.float64)
    shift = float(summary.shift)
    if kind is ZScore:
        z = float(verifier.z)

        def zscore(mask: int) -> tuple[bool, int]:
            code, n = zscore_kernel(mask_words(mask, n_words), flat, count, s1, s2, vmin, vmax, shift, v, z, scratch)
            _nonempty(n)
            return code == TRUE, int(n)

        return zscore
    alpha = float(verifier.alpha)
    table = grubbs_table(alpha, max(summary.n_rows, 3))
    table_n, table_crit = table.n, table.crit

    def grubbs(mask: int) -> tuple[bool, int]:
        code, n = grubbs_kernel(mask_words(mask, n_words), flat, count, s1, s2, vmin, vmax, shift, v,
                                table_n, table_crit, scratch)
        _nonempty(n)
        if code == UNDECIDED:
            return reference(mask), int(n)
        return code == TRUE, int(n)

    return grubbs


def _nonempty(n: int) -> None:
    if n == 0:
        raise InternalError("an admissible context has an empty population")
