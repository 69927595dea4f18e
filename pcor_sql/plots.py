"""Pictures for the data owner (the `plot` extra: matplotlib, drawn with the Agg backend, so no
display is needed).

`explanation_figure` draws a released explanation against the data: the record's value, the
distribution of its released context and of the whole table. It shows data that the release
does not — the other rows' values — so it is the owner's alone, and every picture says so in
itself ("NOT FOR RELEASE"). `budget_figure` draws the ledger: a bar per privacy unit, ε spent
against its limit.
"""

from __future__ import annotations

from typing import Any, Sequence

NOT_FOR_RELEASE = "NOT FOR RELEASE — owner only: shows the data"
#: Pixels of a saved picture: 10 × 5 inches at 100 dpi.
SIZE = (10.0, 5.0)
DPI = 100


def require_pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend, or a UserError naming the extra."""
    try:
        import matplotlib
    except ImportError:
        from pcor_sql.errors import UserError

        raise UserError("pictures need matplotlib", "pip install 'pcor-sql[plot]'") from None
    matplotlib.use("Agg", force=False)  # a file or a notebook's inline image: never a window
    import matplotlib.pyplot as plt

    return plt


def _finite(values: Sequence[Any]) -> list[float]:
    out = []
    for v in values:
        if v is None:
            continue
        x = float(v)
        if x == x and abs(x) != float("inf"):
            out.append(x)
    return out


def explanation_figure(metric: str, value: float, context_values: Sequence[Any], all_values: Sequence[Any],
                       title: str, path: Any = None) -> Any:
    """The record's `value` (a vertical line) over two histograms on shared bins: the released
    context's values and the whole table's. Saved to `path` when given; returns the Figure."""
    plt = require_pyplot()
    import numpy as np

    whole = np.asarray(_finite(all_values), dtype=np.float64)
    context = np.asarray(_finite(context_values), dtype=np.float64)
    fig, ax = plt.subplots(figsize=SIZE, dpi=DPI)
    lo = min([float(value), *(whole.min(initial=value),)])
    hi = max([float(value), *(whole.max(initial=value),)])
    bins = np.linspace(lo, hi, 41) if hi > lo else np.linspace(lo - 0.5, hi + 0.5, 41)
    ax.hist(whole, bins=bins, color="#bbbbbb", label=f"whole table ({len(whole):,} rows)")
    ax.hist(context, bins=bins, color="#3b75af", alpha=0.85, label=f"released context ({len(context):,} rows)")
    ax.axvline(float(value), color="#d62728", linewidth=2.5, label=f"the record: {metric} = {float(value):,.6g}")
    ax.set_xlabel(metric)
    ax.set_ylabel("rows")
    ax.set_title(title, fontsize=10, wrap=True)
    ax.legend(loc="upper right", fontsize=9)
    _mark(fig)
    return _saved(fig, path)


def budget_figure(rows: Sequence[dict[str, Any]], path: Any = None) -> Any:
    """A bar per unit and notion: ε spent, and its limit (a bar's outline) where one is set."""
    plt = require_pyplot()
    fig, ax = plt.subplots(figsize=SIZE, dpi=DPI)
    labels = [f"{r['unit']} ({r['notion']})" for r in rows]
    spent = [float(r.get("spent") or 0.0) for r in rows]
    limits = [r.get("limit") for r in rows]
    y = list(range(len(rows)))
    ax.barh(y, [float(v) if v is not None else 0.0 for v in limits], color="none", edgecolor="#555555",
            linewidth=1.2, height=0.6, label="limit")
    ax.barh(y, spent, color=["#d62728" if lim is not None and s > float(lim) else "#3b75af"
                             for s, lim in zip(spent, limits)], height=0.6, label="spent")
    for i, (s, lim) in enumerate(zip(spent, limits)):
        ax.text(max(s, float(lim or 0.0)), i, f"  {s:.6g} of {'no limit' if lim is None else f'{float(lim):.6g}'}",
                va="center", fontsize=9)
    top = max([*spent, *(float(v) for v in limits if v is not None), 1e-9])
    ax.set_xlim(0, top * 1.3)  # room for the "spent of limit" labels
    ax.set_yticks(y, labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("ε")
    ax.set_title("privacy budget per unit: spent / limit", fontsize=11)
    if rows:
        ax.legend(loc="lower right", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no unit has been charged", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    return _saved(fig, path)


def _mark(fig: Any) -> None:
    """The owner-only label, in the picture itself: a cropped or forwarded copy still says it."""
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.text(0.5, 0.012, NOT_FOR_RELEASE, ha="center", va="bottom", color="#d62728", fontsize=12, weight="bold")


def _saved(fig: Any, path: Any) -> Any:
    if path is not None:
        fig.savefig(path, dpi=DPI)
        import matplotlib.pyplot as plt

        plt.close(fig)  # saved: not also shown by a notebook's inline backend
    return fig
