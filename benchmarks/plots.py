"""PNG figures of the reproduced experiment groups (the paper's Figures 1–5), when matplotlib is
installed (`pip install 'pcor-sql[plot]'`). Without it nothing is drawn and the reason is
returned, so the command can say so.

One figure per dataset and group: left, the utility ratio (mean with its 90 % CI) per setting
under both accountings; right, the runtime per release (average, with min–max whiskers).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from benchmarks.experiments import GROUPS, cells_of


def matplotlib_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def write_figures(result: dict[str, Any], folder: Path) -> tuple[list[Path], str]:
    """(files written, reason when none)."""
    if not matplotlib_available():
        return [], "matplotlib is not installed; pip install 'pcor-sql[plot]'"
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in result["datasets"].items():
        index = {tuple(sorted(c["cell"].items())): c for c in data["cells"]}
        for g in GROUPS:
            if g.key not in result["config"]["groups"]:
                continue
            rows = []
            for row, by_acc in cells_of(g, name):
                found = {acc: index.get(tuple(sorted(cell.__dict__.items()))) for acc, cell in by_acc.items()}
                if any(found.values()):
                    rows.append((row.label, found))
            if not rows:
                continue
            fig, (ax_u, ax_t) = plt.subplots(1, 2, figsize=(10, 3.6))
            xs = list(range(len(rows)))
            for k, (acc, color) in enumerate((("paper", "tab:blue"), ("tight", "tab:orange"))):
                means, lows, highs = [], [], []
                for _, found in rows:
                    c = found.get(acc) or {}
                    m = c.get("utility_mean", float("nan"))
                    lo, hi = c.get("ci90", [m, m])
                    means.append(m)
                    lows.append(m - lo)
                    highs.append(hi - m)
                off = [x + (k - 0.5) * 0.3 for x in xs]
                ax_u.errorbar(off, means, yerr=[lows, highs], fmt="o", color=color, capsize=3,
                              label=f"{acc} accounting")
                avg = [(found.get(acc) or {}).get("t_avg", float("nan")) * 1e3 for _, found in rows]
                tmin = [(found.get(acc) or {}).get("t_min", float("nan")) * 1e3 for _, found in rows]
                tmax = [(found.get(acc) or {}).get("t_max", float("nan")) * 1e3 for _, found in rows]
                ax_t.errorbar(off, avg, yerr=[[a - b for a, b in zip(avg, tmin)], [b - a for a, b in zip(avg, tmax)]],
                              fmt="s", color=color, capsize=3, label=f"{acc} accounting")
            for ax in (ax_u, ax_t):
                ax.set_xticks(xs)
                ax.set_xticklabels([label for label, _ in rows])
                ax.set_xlabel(g.label)
            ax_u.set_ylabel("utility ratio (mean, 90% CI)")
            ax_u.set_ylim(0, 1.05)
            ax_t.set_ylabel("runtime per release (ms)")
            ax_u.legend(loc="lower right", fontsize=8)
            fig.suptitle(f"{name}: {g.what} ({g.tables})")
            fig.tight_layout()
            path = folder / f"{name}_{g.key}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    return written, ""
