"""Pictures for the data owner (the `plot` extra: matplotlib; each picture is its own Figure,
drawn without pyplot, so no display is needed and a notebook's backend is left alone).

`explanation_figure` draws a released explanation against the data: the record's value on the
distribution of its released context (zoomed, as shares of its rows) and on the whole table. It shows data that the release
does not — the other rows' values — so it is the owner's alone, and every picture says so in
itself ("NOT FOR RELEASE"). `budget_figure` draws the ledger: a bar per privacy unit, ε spent
against its limit.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO, Sequence, Union

#: Where a picture is saved: a path (its suffix names the format: .png, .svg, ...) or an open file.
SavePath = Union[str, "os.PathLike[str]", BinaryIO]

NOT_FOR_RELEASE = "NOT FOR RELEASE — owner only: shows the data"
#: Pixels of a saved picture: 10 × 5 inches at 100 dpi.
SIZE = (10.0, 5.0)
DPI = 100


def require_pyplot() -> Any:
    """matplotlib, or a UserError naming the extra. (Pictures are drawn on their own `Figure`s,
    never through pyplot's global state: a notebook's or a script's backend is left as it is.)"""
    try:
        import matplotlib
        import matplotlib.figure  # noqa: F401
    except ImportError:
        from pcor_sql.errors import UserError

        raise UserError("pictures need matplotlib", "pip install 'pcor-sql[plot]'") from None
    return matplotlib


class Picture:
    """A drawn Figure that a notebook shows inline (`_repr_png_`) in any kernel, whatever the
    backend; everything else is the Figure's (`.savefig`, `.axes`, `.texts`)."""

    def __init__(self, figure: Any):
        self.figure = figure

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["figure"], name)

    def __repr__(self) -> str:
        return f"<pcor-sql picture: {self.figure!r}>"

    def _repr_png_(self) -> bytes:
        import io

        out = io.BytesIO()
        self.figure.savefig(out, format="png", dpi=DPI)
        return out.getvalue()


def _finite(values: Sequence[Any]) -> Any:
    import numpy as np

    out = []
    for v in values:
        if v is None:
            continue
        x = float(v)
        if x == x and abs(x) != float("inf"):
            out.append(x)
    return np.asarray(out, dtype=np.float64)


def _span(*arrays: Any, floor: float | None = None) -> tuple[float, float]:
    """The range the values cover, widened by a twentieth on each side (never empty), never
    below `floor`: a metric whose values are all ≥ 0 (a count, an amount) gets no bin below 0."""
    lo = min(float(a.min()) for a in arrays if len(a))
    hi = max(float(a.max()) for a in arrays if len(a))
    pad = (hi - lo) / 20 if hi > lo else max(abs(lo) / 20, 0.5)
    low = lo - pad if floor is None else max(lo - pad, floor)
    return low, hi + pad


def _floor(*arrays: Any) -> float | None:
    """0 when every value drawn is ≥ 0 (the metric's smallest possible value is then taken to be
    0: rows, counts, amounts), else None (no clip)."""
    present = [a for a in arrays if len(a)]
    return 0.0 if present and all(float(a.min()) >= 0 for a in present) else None


def explanation_figure(metric: str, value: float, context_values: Sequence[Any], all_values: Sequence[Any],
                       title: str, path: SavePath | None = None) -> Picture:
    """The record's `value` in its released context (left: the context's histogram on an axis
    zoomed to the context and the record, as a share of its rows, the whole table's over the same
    bins as a faint outline) and in the whole table (right: where the context's range and the
    record sit). Saved to `path` when given; returns a `Picture`."""
    require_pyplot()
    import numpy as np
    from matplotlib.figure import Figure

    whole, context = _finite(all_values), _finite(context_values)
    value = float(value)
    record = np.asarray([value])
    fig = Figure(figsize=SIZE, dpi=DPI)
    near, far = fig.subplots(1, 2, gridspec_kw={"width_ratios": (3, 2)})
    floor = _floor(whole, context, record)
    lo, hi = _span(context if len(context) else whole, record, floor=floor)
    bins = np.linspace(lo, hi, 41)
    if len(whole):
        inside = whole[(whole >= lo) & (whole <= hi)]
        near.hist(inside, bins=bins, weights=np.full(len(inside), 1 / len(whole)), histtype="step", color="#999999",
                  linewidth=1.2, label=f"whole table ({len(whole):,} rows), share of all its rows")
    if len(context):
        near.hist(context, bins=bins, weights=np.full(len(context), 1 / len(context)), color="#3b75af", alpha=0.85,
                  label=f"released context ({len(context):,} rows), share of its rows")
    near.axvline(value, color="#d62728", linewidth=2.5, label=f"the record: {metric} = {value:,.6g}")
    near.set_xlim(lo, hi)
    near.set_xlabel(f"{metric} (zoomed to the context and the record)")
    near.set_ylabel("share of rows per bin")
    near.legend(loc="best", fontsize=8)
    if len(whole):
        far.hist(whole, bins=np.linspace(*_span(whole, record, floor=floor), 41), color="#bbbbbb")
        far.set_xlim(*_span(whole, record, floor=floor))
    if len(context):
        far.axvspan(float(context.min()), float(context.max()), color="#3b75af", alpha=0.2,
                    label="the released context's range")
        far.legend(loc="upper right", fontsize=8)
    far.axvline(value, color="#d62728", linewidth=2.5)
    far.set_title("the whole table", fontsize=9)
    far.set_xlabel(metric)
    far.set_ylabel("rows")
    fig.suptitle(title, fontsize=10, wrap=True)
    _mark(fig)
    return _saved(fig, path)


def budget_figure(rows: Sequence[dict[str, Any]], path: SavePath | None = None) -> Picture:
    """A bar per unit and notion: ε spent, and its limit (a bar's outline) where one is set;
    the legend names only what is drawn."""
    require_pyplot()
    from matplotlib.figure import Figure

    fig = Figure(figsize=SIZE, dpi=DPI)
    ax = fig.subplots()
    labels = [f"{r['unit']} ({r['notion']})" for r in rows]
    spent = [float(r.get("spent") or 0.0) for r in rows]
    limits = [r.get("limit") for r in rows]
    y = list(range(len(rows)))
    limited = [i for i, lim in enumerate(limits) if lim is not None]
    if limited:
        ax.barh(limited, [float(limits[i]) for i in limited], color="none", edgecolor="#555555", linewidth=1.2,
                height=0.6, label="limit")
    ax.barh(y, spent, color=["#d62728" if lim is not None and s > float(lim) else "#3b75af"
                             for s, lim in zip(spent, limits)], height=0.6, label="spent")
    for i, (s, lim) in enumerate(zip(spent, limits)):
        words = f"  {s:.6g} spent, no limit" if lim is None else f"  {s:.6g} of {float(lim):.6g}"
        ax.text(max(s, float(lim or 0.0)), i, words, va="center", fontsize=9)
    top = max([*spent, *(float(v) for v in limits if v is not None), 1e-9])
    ax.set_xlim(0, top * 1.3)  # room for the "spent of limit" labels
    ax.set_yticks(y, labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("ε")
    ax.set_title("privacy budget per unit: spent / limit" if limited else "privacy budget per unit: spent (no limit set)",
                 fontsize=11)
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


def _saved(fig: Any, path: SavePath | None) -> Picture:
    if path is not None:
        fig.savefig(path, dpi=DPI)
    return Picture(fig)
