"""The paper's Figures 1–5 as PNGs, from a `reproduce` result, when matplotlib is installed
(`pip install 'pcor-sql[plot]'`). Without it nothing is drawn and the reason is returned, so
the command can say so.

Like the paper's appendix, each figure shows per setting of one experiment group a histogram
of the utility ratios of the releases (top row) and of their runtimes (bottom row): Figure 1
the sampling methods (Tables 2–3), 2 the overlap utility (4–5), 3 the outlier detection
algorithms (6–7), 4 the privacy parameter ε (8–9), 5 the number of samples n (10–11). The
paper profile and the engine profile are drawn over each other; the paper's own mean is a
dashed line.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

from benchmarks.experiments import GROUPS, cell_of
from benchmarks.profiles import profile

FIGURES = {"sampling": 1, "overlap": 2, "verifiers": 3, "epsilon": 4, "samples": 5}
COLOURS = {"paper": "tab:blue", "engine": "tab:orange"}


def matplotlib_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def _paper_mean(text: str) -> float | None:
    m = re.match(r"\s*\(?(?:Table \d+: )?([0-9.]+)", text)
    return float(m.group(1)) if m else None


def write_figures(result: dict[str, Any], folder: Path) -> tuple[list[Path], str]:
    """(files written, reason when none): `figure<k>_<dataset>.png` per group and dataset."""
    if not matplotlib_available():
        return [], "matplotlib is not installed; pip install 'pcor-sql[plot]'"
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    names = list(dict.fromkeys(n for by_ds in result.get("profiles", {}).values() for n in by_ds))
    for name in names:
        for g in GROUPS:
            if g.key not in FIGURES:
                continue
            columns = []
            for row in g.rows:
                found = {}
                for prof in ("paper", "engine"):
                    cell = cell_of(g, row, name, profile(prof))
                    cells = result.get("profiles", {}).get(prof, {}).get(name, {}).get("cells", [])
                    hit = next((c for c in cells if cell is not None and c["cell"] == cell.key), None)
                    if hit and hit.get("ratios"):
                        found[prof] = hit
                if found:
                    columns.append((row, found))
            if not columns:
                continue
            fig, axes = plt.subplots(2, len(columns), figsize=(3.2 * len(columns), 5.2), squeeze=False)
            for j, (row, found) in enumerate(columns):
                ax_u, ax_t = axes[0][j], axes[1][j]
                ms = [s * 1e3 for c in found.values() for s in c["seconds"]]
                t_range = (min(ms), max(ms) * 1.0001) if ms else None  # one set of bins for both profiles
                for prof, c in found.items():
                    label = f"{prof} profile ({len(c['ratios'])})"
                    ax_u.hist(c["ratios"], bins=20, range=(0, 1.0001), histtype="step", linewidth=1.5,
                              color=COLOURS[prof], label=label)
                    ax_t.hist([s * 1e3 for s in c["seconds"]], bins=20, range=t_range, histtype="step", linewidth=1.5,
                              color=COLOURS[prof], label=label)
                paper = _paper_mean(row.paper_utility)
                if paper is not None and not row.paper_utility.startswith("("):
                    ax_u.axvline(paper, color="black", linestyle="--", linewidth=1, label=f"paper mean {paper:g}")
                ax_u.set_title(f"{g.label} = {row.label}" if g.label in ("ε", "# Samples") else row.label, fontsize=10)
                ax_u.set_xlabel("utility ratio")
                ax_t.set_xlabel("runtime per release (ms)")
                ax_u.legend(fontsize=7, loc="upper left")
            axes[0][0].set_ylabel("releases")
            axes[1][0].set_ylabel("releases")
            fig.suptitle(f"Figure {FIGURES[g.key]} ({name}): {g.what} ({g.tables}) — utility (top), performance (bottom)",
                         fontsize=11)
            fig.tight_layout()
            path = folder / f"figure{FIGURES[g.key]}_{name}.png"
            fig.savefig(path, dpi=100)
            plt.close(fig)
            written.append(path)
    return written, ""
