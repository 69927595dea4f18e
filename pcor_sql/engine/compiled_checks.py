"""Compiled validity checks on the per-cell summary: context bitset → (verdict, population size).

`compiled_check` returns a function of a context (its bitset) for the built-in verifiers whose
kernels live in `core.verifiers.moment_kernel` (Grubbs, z-score),
`core.verifiers.histogram_kernel` (histogram) and `core.verifiers.lof_kernel` (LOF, both rules
for duplicates, through `engine.lof_checks`), or None, and then the evaluator takes the
reference path (`SummaryPopulation` and `verifier.check`). Only the exact built-in types are
compiled: a subclass may override `check`. A summary that serves values through per-cell
windows (Spark) has no sorted runs here, so it keeps the reference path too.

Each kernel does the membership (`jit.member_cells`, as `CellSummary.member`), the population's
moments and the verdict in one call; the kernels' docstrings show why their verdicts are the reference's. When
a kernel cannot decide exactly (Grubbs between two tabulated critical values, a histogram bin
whose edges need the reference's bisection), the reference decides that context.

Measured with `PYTHONPATH=. python -m benchmarks.per_check --rows 10000000 --contexts 3000`
(1,200 cells, CPU µs per check, at load 6.4 on 2 cores): Grubbs 4.1 (reference 28.8), z-score
3.9 (23.9), histogram 5.6 (84.7). A process pays numba's import and first call once: about
0.5-1 s with the compiled code cached, and some seconds more on the machine's first run, which
compiles it (`core.jit`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from pcor_sql.core.space import ContextSpace
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.engine.summary import CellSummary
from pcor_sql.errors import InternalError

Check = Callable[[int], tuple[bool, int]]


def compiled_check(summary: CellSummary, space: ContextSpace, verifier: Any, v: float) -> Check | None:
    """(context → (verdict, n)) for `verifier` on `summary`, or None when it is not compiled."""
    kind = type(verifier)
    if kind is Lof and summary.windows is None:
        # LOF's kernel (`engine.lof_checks`, `core.verifiers.lof_kernel`) reads the sorted runs.
        from pcor_sql.engine import lof_checks

        # Membership is compiled too; the check itself refuses an empty population.
        return lof_checks.lof_check(summary, space, verifier, v)
    if kind not in (Grubbs, ZScore, Histogram) or summary.windows is not None:
        return None
    # The kernels import numba (0.4-1 s): only a run that uses them pays for it.
    from pcor_sql.core.jit import context_words, flat_bits
    from pcor_sql.core.verifiers.histogram_kernel import FALLBACK, histogram_kernel
    from pcor_sql.core.verifiers.moment_kernel import (
        TRUE, UNDECIDED, cell_stats, grubbs_kernel, grubbs_table, table_rows, zscore_kernel,
    )

    # The record's own value of attribute 0 is in every context checked (admissible contexts).
    flat = flat_bits(summary.coords, space.offsets, space.offsets[0] + space.anchor[0])
    n_words = (space.t + 63) // 64
    stats = cell_stats(summary.count, summary.s1, summary.s2, summary.vmin, summary.vmax)
    v = float(v)

    def reference(mask: int) -> bool:
        return bool(verifier.check(summary.population(summary.member(space, mask), v)))

    if kind is Histogram:
        runs = summary.runs()
        probe = runs.probe(v)  # rungs around v in every run (built once per value, a few kept)
        values, rel = runs.values, float(verifier.rel)
        neg_a, rungs, A, B = probe.neg_a, probe.b, probe.A, probe.B

        def histogram(mask: int) -> tuple[bool, int]:
            x, words = context_words(mask, n_words)
            code, n = histogram_kernel(x, words, flat, stats, values, neg_a, rungs, A, B, v, rel)
            _nonempty(n)
            return (code == TRUE if code != FALLBACK else reference(mask)), int(n)

        return histogram
    shift = float(summary.shift)
    if kind is ZScore:
        z = float(verifier.z)

        def zscore(mask: int) -> tuple[bool, int]:
            x, words = context_words(mask, n_words)
            code, n = zscore_kernel(x, words, flat, stats, shift, v, z)
            _nonempty(n)
            return code == TRUE, int(n)

        return zscore
    table = table_rows(grubbs_table(float(verifier.alpha), max(summary.n_rows, 3)))

    def grubbs(mask: int) -> tuple[bool, int]:
        x, words = context_words(mask, n_words)
        code, n = grubbs_kernel(x, words, flat, stats, shift, v, table)
        _nonempty(n)
        if code == UNDECIDED:
            return reference(mask), int(n)
        return code == TRUE, int(n)

    return grubbs


def _nonempty(n: int) -> None:
    if n == 0:
        raise InternalError("an admissible context has an empty population")
