"""The scale benchmark's goals at the width of real tables (births, flights, 5,000 values): each
row of the goals table against its figure from the same run, and the per-check table by member
cells (`benchmarks.per_check_cells`).

    python -m benchmarks scale --cases births,births-uniform,flights,wide5000,per-check,base
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

#: One check on the largest births context (85,680 cells): LOF and histogram.
CHECK_US = 50.0
RATIO = 10.0
WIDE5000_S = 3.0
UNIFORM_S = 2.0
NARROW_US = {"lof": 12.0, "grubbs": 6.0}
BASE_FRESH = 0.5


def _median(xs: list[float] | None) -> float | None:
    return statistics.median(xs) if xs else None


def _case(result: dict[str, Any], name: str, verifier: str, search: str = "bfs") -> dict[str, Any] | None:
    return next((c for c in result.get("cases", []) if c["name"] == name and c["verifier"] == verifier
                 and c.get("search", "bfs") == search and "error" not in c), None)


def width_targets(result: dict[str, Any]) -> list[Any]:
    """The goals of the default release at width, each with its figure (or not measured)."""
    from benchmarks.scale_goals import load_text, median_ratio, ratio_loads
    from benchmarks.targets import at_most

    x = lambda v: f"{v:.1f}× the sort"  # noqa: E731
    s = lambda v: f"{v:.2f} s"  # noqa: E731
    us = lambda v: f"{v:.1f} µs"  # noqa: E731

    def ratio(name: str, case: dict[str, Any] | None, limit: float = RATIO) -> Any:
        t = at_most(name, median_ratio(case, "fresh_s") if case else None, limit, x)
        return t if t.met is None else replace(t, measured=f"{t.measured} ({load_text(ratio_loads(case, 'fresh_s'))})")

    def seconds(name: str, case: dict[str, Any] | None, limit: float) -> Any:
        value = _median(case.get("fresh_s")) if case else None
        t = at_most(name, value, limit, s)
        if t.met is None:
            return t
        outcomes = sorted(set(case.get("outcomes") or []))
        return replace(t, measured=f"{t.measured} ({load_text(ratio_loads(case, 'fresh_s'))}"
                                   f"{'; ' + ', '.join(outcomes) if outcomes else ''})")

    out = [
        ratio("births shape (372,555 rows, 85,680 cells), default LOF + bfs, ε = 0.5", _case(result, "births", "lof")),
        ratio("births shape, histogram + bfs", _case(result, "births", "histogram")),
        ratio("births shape, grubbs + bfs", _case(result, "births", "grubbs")),
        ratio("births shape, lof + explore", _case(result, "births", "lof", "explore")),
    ]
    rows = ((result.get("per_check") or {}).get("births") or {}).get("rows") or []
    full = max((r["cells"] for r in rows), default=None)
    for name in ("lof", "histogram"):
        r = next((r for r in rows if r["verifier"] == name and r["cells"] == full), None)
        out.append(at_most(f"one {name} check on the 85,680-cell context, tied integer metric (after a move)",
                           r["move_us"] if r else None, CHECK_US, us))
    for verifier in ("lof", "grubbs"):
        out.append(ratio(f"flights shape, {verifier} + bfs (5 attributes, ε = 0.2)", _case(result, "flights", verifier)))
    for verifier in ("zscore", "lof"):
        out.append(seconds(f"5,000-value attribute (100,000 rows), {verifier} + bfs, fresh release",
                           _case(result, "wide5000", verifier), WIDE5000_S))
    out.append(seconds("a search that finds no valid context: births, zscore + uniform on an ordinary day (100,000 draws)",
                       _case(result, "births-uniform", "zscore", "uniform"), UNIFORM_S))
    narrow = (result.get("per_check") or {}).get("narrow") or {}
    for name, limit in NARROW_US.items():
        r = narrow.get(name)
        out.append(at_most(f"no regression: narrow per check {name} (1,200 cells)", r["us"] if r else None, limit, us))
    out.append(ratio("no regression: 10M-row fresh bfs + lof release (--cases base)", _case(result, "base", "lof"),
                     BASE_FRESH))
    return out


def per_check_table(result: dict[str, Any]) -> Any | None:
    """One check by member cells (births), after a move and after a jump, per verifier."""
    from benchmarks.tables import make_table

    births = (result.get("per_check") or {}).get("births")
    if not births or not births.get("rows"):
        return None
    rows = [(r["verifier"], "×".join(map(str, r["values"])), f"{r['cells']:,}", f"{r['move_us']:.1f}",
             f"{r['jump_us']:.1f}", "valid" if r["valid"] else "not valid", f"{r['load']}") for r in births["rows"]]
    return make_table(
        "One check by member cells: births shape (85,680 cells), CPU µs, median", (
            "verifier", "values (state×year×month×weekday)", "member cells", "after a move", "after a jump",
            "verdict", "load"), rows, (
            "python -m benchmarks.per_check_cells: each check timed alone on one Evaluator (`_verify`, no verdict "
            "cache); after a move = right after a check of a neighbour (one value more or less), after a jump = "
            "right after a check of a context of the same size sharing only V's values.",))
