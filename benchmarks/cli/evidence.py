"""`python -m benchmarks anomaly-evidence`: the sensitive-privacy paper's central claim on the bundled data
(or any relation) — at equal ε, the (ε, k)-sensitively private mechanism errs far less on true
(β, r)-anomalies than the pareto-optimal ε-DP mechanism.

The rates are exact expectations over every record (`benchmarks.anomaly_evidence`); with
`--trials` seeded simulated rates come alongside. This module parses options and prints.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Callable, Optional, Sequence

import typer
from rich.table import Table
from rich.text import Text

from pcor_sql.cli import parameters as o
from pcor_sql.cli.console import make_warn, stdout_console, write_line
from pcor_sql.owner import Owner
from pcor_sql.cli.render import json_text
from pcor_sql.errors import UserError


class EvidenceFormat(str, Enum):
    table = "table"
    markdown = "markdown"
    json = "json"


@dataclass(frozen=True)
class EvidenceRun:
    """One relation's grid: every (ε, β, r, k) with k ≤ ⌊β⌋ + 1 becomes a row."""

    relation: str
    columns: tuple[str, ...]
    epsilons: tuple[float, ...]
    betas: tuple[float, ...]
    radii: tuple[float, ...]
    ks: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.relation}.{','.join(self.columns)}"


# Grids for the bundled tables: radii in the column's units (dollars, years), β around the sparse tail.
DEFAULT_RUNS = (
    EvidenceRun("salaries", ("salary",), (0.1, 0.5, 1.0), (5, 20), (500.0, 2000.0), (1, 3)),
    EvidenceRun("homicides", ("victim_age",), (0.1, 0.5, 1.0), (50, 150), (0.0, 1.0), (1, 5)),
)
# Grid of a --relation run for the options left out.
_EPSILONS, _BETAS, _RADII, _KS = (0.1, 0.5, 1.0), (5.0, 20.0), (1.0,), (1,)


# ---- turning option text into grids ------------------------------------------------------


def _items(text: str, flag: str, example: str) -> list[str]:
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise UserError(f"{flag} {text!r} has an empty item", f"write a comma-separated list, e.g. {flag} {example}")
    return items


def number_list(text: str, flag: str, example: str) -> tuple[float, ...]:
    """`"0.1, 0.5,1"` → (0.1, 0.5, 1.0); finite numbers only (ranges are the library's to check)."""
    values = []
    for item in _items(text, flag, example):
        try:
            value = float(item)
        except ValueError:
            raise UserError(f"{flag}: {item!r} is not a number", f"write e.g. {flag} {example}") from None
        if not math.isfinite(value):
            raise UserError(f"{flag}: {item!r} is not a finite number", f"write e.g. {flag} {example}")
        values.append(value)
    return tuple(values)


def integer_list(text: str, flag: str, example: str) -> tuple[int, ...]:
    values = []
    for item in _items(text, flag, example):
        try:
            values.append(int(item))
        except ValueError:
            raise UserError(f"{flag}: {item!r} is not an integer", f"write e.g. {flag} {example}") from None
    return tuple(values)


def check_ks(run: EvidenceRun, warn: Callable[[str], None]) -> None:
    """k lives in 1..⌊β⌋+1. A k that fits no β of the grid would silently add no row: an error.
    A k that fits only some β is skipped for the others (the library's rule), with a warning."""
    largest = max((math.floor(b) for b in run.betas if b >= 1), default=None)
    if largest is None:
        return  # every β < 1: the library reports β, the actual mistake
    for k in run.ks:
        if not 1 <= k <= largest + 1:
            raise UserError(
                f"k = {k} is outside 1..⌊β⌋+1 for every β of {run.name} (largest β {largest})",
                f"pass --ks between 1 and {largest + 1}",
            )
        skipped = sorted({f"{b:g}" for b in run.betas if 1 <= b and k > math.floor(b) + 1})
        if skipped:
            warn(f"k = {k} exceeds ⌊β⌋+1 for β = {', '.join(skipped)} of {run.name}: those cells are skipped")


def plan_runs(
    relation: str | None, columns: str | None, epsilons: str | None, betas: str | None, radii: str | None, ks: str | None
) -> list[EvidenceRun]:
    """The --relation run, or the default runs with any grid option given replacing that axis."""
    eps = number_list(epsilons, "--epsilons", "0.1,0.5,1") if epsilons is not None else None
    bet = number_list(betas, "--betas", "5,20") if betas is not None else None
    rad = number_list(radii, "--radii", "500,2000") if radii is not None else None
    kk = integer_list(ks, "--ks", "1,3") if ks is not None else None
    if relation is None:
        if columns is not None:
            raise UserError("--columns needs --relation", "name the relation too, e.g. --relation salaries --columns salary")
        return [
            dataclasses.replace(
                run, epsilons=eps or run.epsilons, betas=bet or run.betas, radii=rad or run.radii, ks=kk or run.ks
            )
            for run in DEFAULT_RUNS
        ]
    if not relation.strip():
        raise UserError("--relation is empty", "give a table name or text usable after FROM, e.g. --relation salaries")
    if columns is None:
        raise UserError("--relation needs --columns", "name the numeric column(s), e.g. --columns salary")
    cols = tuple(_items(columns, "--columns", "salary"))
    return [EvidenceRun(relation, cols, eps or _EPSILONS, bet or _BETAS, rad or _RADII, kk or _KS)]


# ---- output ------------------------------------------------------------------------------


def _footnote(rows: int, seconds: float, trials: int, seed: int | None) -> str:
    text = f"{rows} row{'' if rows == 1 else 's'} in {seconds:.2f} s; rates are exact expectations over every record"
    if trials:
        text += f"; simulated: {trials} seeded run(s), seed {seed}"
    return text


def _print_table(title: str, rows: Sequence, footnote: str) -> None:
    from benchmarks.anomaly_evidence import evidence_cells, evidence_headers, is_simulated

    console = stdout_console()
    table = Table(title=Text(title), title_justify="left")
    for header in evidence_headers(rows):
        table.add_column(Text(header), justify="right")
    simulated = is_simulated(rows)
    for row in rows:
        table.add_row(*[Text(c) for c in evidence_cells(row, simulated)])
    console.print(table)
    console.print(Text(f"  {footnote}", style="dim"))
    console.print()


def draw_plot(path: Path, results: Sequence[tuple[str, Sequence]]) -> bool:
    """Error on true anomalies against ε (log scale), SP solid and DP dashed, one panel per
    relation. False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4), squeeze=False)
    try:
        for ax, (title, rows) in zip(axes[0], results):
            for beta, radius, k in sorted({(r.beta, r.radius, r.k) for r in rows if r.anomalies}):
                sel = sorted((r for r in rows if (r.beta, r.radius, r.k) == (beta, radius, k)), key=lambda r: r.epsilon)
                eps = [r.epsilon for r in sel]
                line = ax.plot(eps, [r.sp_error_anomalies for r in sel], marker="o", label=f"SP β={beta:g} r={radius:g} k={k}")
                ax.plot(eps, [r.dp_error_anomalies for r in sel], linestyle="--", color=line[0].get_color(),
                        label=f"DP β={beta:g} r={radius:g}")
            ax.set_title(title)
            ax.set_xlabel("ε")
            ax.set_ylabel("error rate on true anomalies")
            ax.set_yscale("log")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return True


# ---- the command -------------------------------------------------------------------------


def anomaly_evidence(
    relation: Annotated[
        Optional[str],
        typer.Option("--relation", metavar="FROM-TEXT",
                     help="Text usable after FROM, e.g. salaries or \"read_parquet('x.parquet')\". "
                     "Default: salaries.salary and homicides.victim_age, each with its own grid."),
    ] = None,
    columns: Annotated[
        Optional[str], typer.Option("--columns", metavar="A,B", help="Numeric column(s), comma-separated (with --relation).")
    ] = None,
    epsilons: Annotated[
        Optional[str], typer.Option("--epsilons", metavar="E,...", help="ε values (> 0). Default 0.1,0.5,1.")
    ] = None,
    betas: Annotated[
        Optional[str],
        typer.Option("--betas", metavar="B,...", help="β values (≥ 1): anomaly means at most β records in the ball. "
                     "Default with --relation: 5,20."),
    ] = None,
    radii: Annotated[
        Optional[str],
        typer.Option("--radii", metavar="R,...", help="Ball radii (≥ 0) in the columns' units. Default with --relation: 1."),
    ] = None,
    ks: Annotated[
        Optional[str],
        typer.Option("--ks", metavar="K,...", help="k of (ε, k)-sensitive privacy, 1 ≤ k ≤ ⌊β⌋+1 (larger k skipped "
                     "for that β). Default with --relation: 1."),
    ] = None,
    norm: Annotated[str, typer.Option("--norm", help="l1, l2 or linf, for several columns.")] = "l2",
    trials: Annotated[
        int, typer.Option("--trials", metavar="N", help="Seeded simulation runs shown next to the exact rates (needs --seed).")
    ] = 0,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed of the --trials simulation.")] = None,
    db: o.Db = None,
    fmt: Annotated[
        EvidenceFormat,
        typer.Option("--format", help="table (for a terminal), markdown, or json (JSON Lines, one object per grid cell)."),
    ] = EvidenceFormat.table,
    plot: Annotated[
        Optional[Path],
        typer.Option("--plot", metavar="PATH",
                     help="Also draw error on true anomalies against ε as a PNG (needs matplotlib: pip install 'pcor-sql[plot]'; "
                     "without it, a warning)."),
    ] = None,
) -> None:
    """Show the error rates of the SP and DP anomaly mechanisms over every record, on true
    anomalies, on the other records and on all, for a grid of ε, β, r and k.

    \b
    Example:
        python -m benchmarks anomaly-evidence
        python -m benchmarks anomaly-evidence --relation salaries --columns salary --epsilons 0.5 --betas 20 --radii 500 --ks 1,3
        python -m benchmarks anomaly-evidence --format markdown --plot evidence.png > evidence.md

    The owner's evaluation, not a release: it reads the data exactly, charges no budget, and
    its anomaly counts are true statistics of the data.
    """
    from benchmarks.anomaly_evidence import anomaly_error_table, evidence_markdown, evidence_title

    warn = make_warn()
    if trials < 0:
        raise UserError(f"--trials must be at least 0, got {trials}", "pass e.g. --trials 10 --seed 7")
    if trials and seed is None:
        raise UserError("--trials needs --seed (the simulation is seeded: it is an evaluation, not a release)",
                        f"pass e.g. --trials {trials} --seed 7")
    if plot is not None and not plot.parent.is_dir():
        raise UserError(f"--plot {str(plot)!r}: the folder {str(plot.parent)!r} does not exist", "create it or pick another path")
    runs = plan_runs(relation, columns, epsilons, betas, radii, ks)
    for run in runs:
        check_ks(run, warn)
    results = []
    with Owner.open(db, reads=" ".join(r.relation for r in runs), lazy_ledger=True) as owner:
        con = owner.con
        for run in runs:
            started = time.perf_counter()
            rows = anomaly_error_table(
                con, run.relation, list(run.columns), epsilons=list(run.epsilons), betas=list(run.betas),
                radii=list(run.radii), ks=list(run.ks), norm=norm, simulation_trials=trials, seed=seed,
            )
            results.append((run, rows, time.perf_counter() - started))
    for i, (run, rows, seconds) in enumerate(results):
        footnote = _footnote(len(rows), seconds, trials, seed)
        if fmt is EvidenceFormat.json:
            for row in rows:
                write_line(json_text({"relation": run.relation, "columns": list(run.columns), **dataclasses.asdict(row)}))
        elif fmt is EvidenceFormat.markdown:
            write_line(("\n" if i else "") + evidence_markdown(run.relation, run.columns, rows) + f"\n\n({footnote})")
        else:
            _print_table(evidence_title(run.relation, run.columns, rows), rows, footnote)
    if plot is not None and not draw_plot(plot, [(run.name, rows) for run, rows, _ in results]):
        warn(f"matplotlib is not installed: no plot written to {str(plot)!r} (pip install 'pcor-sql[plot]')")
