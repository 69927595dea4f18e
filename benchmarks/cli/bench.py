"""`python -m benchmarks bench`: release timings against a naive baseline, the summary build, the direct
enumeration, a 10-million-row table, each next to its target. The work is in `benchmarks`;
this module parses options and prints."""

from __future__ import annotations

import re
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Optional, Sequence

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from pcor_sql.errors import UserError

DEFAULT_OUT = Path("bench-results")
DEFAULT_BENCHMARKS = Path("BENCHMARKS.md")


# ---- helpers shared with `reproduce` ------------------------------------------------------


# The options that write a command's section of BENCHMARKS.md (bench and reproduce share them).
UpdateBenchmarks = Annotated[
    bool, typer.Option("--update-benchmarks", help="Regenerate this command's section of BENCHMARKS.md.")
]
BenchmarksFile = Annotated[
    Path, typer.Option("--benchmarks-file", metavar="PATH", help="The file --update-benchmarks writes.")
]
BenchmarksSection = Annotated[
    str,
    typer.Option(
        "--benchmarks-section", metavar="NAME",
        help="The section of BENCHMARKS.md that --update-benchmarks replaces (default: the command's name).",
    ),
]

class progress_reporter:
    """The library's `report(message)` callback: dim timestamped lines on stderr and, used as
    a context manager on a terminal, a spinner under them with the latest step and the time
    it has run (a benchmark step can take minutes)."""

    def __init__(self) -> None:
        self.console = Console(file=sys.stderr, highlight=False, soft_wrap=True)
        self.started = time.perf_counter()
        self._live: Any = None
        self._task: Any = None

    def __call__(self, message: str) -> None:
        self.console.print(f"[dim]\\[{time.perf_counter() - self.started:7.1f} s] {escape(message)}[/dim]", markup=True)
        if self._live is not None:
            self._live.update(self._task, description=message, completed=0)
            self._live.reset(self._task)

    def __enter__(self) -> "progress_reporter":
        if sys.stderr.isatty():
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._live = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                  console=self.console, transient=True)
            self._live.start()
            self._task = self._live.add_task("starting", total=None)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def print_tables(tables: Sequence[Any]) -> None:
    from pcor_sql.cli.console import stdout_console

    console = stdout_console()
    for t in tables:
        rt = RichTable(title=t.title, title_justify="left", show_lines=False)
        for c in t.columns:
            rt.add_column(c, overflow="fold")
        for row in t.rows:
            styled = [("[bold red]" + c + "[/bold red]") if c == "MISSED" else c for c in row]
            rt.add_row(*styled)
        console.print(rt)
        for n in t.notes:
            console.print(f"  • {n}", markup=False, highlight=False)
        console.print()


def split_list(text: Optional[str], allowed: Sequence[str], option: str) -> Optional[tuple[str, ...]]:
    if text is None:
        return None
    items = tuple(x.strip() for x in text.split(",") if x.strip())
    if not items:
        raise UserError(f"{option} is empty", f"name at least one of: {', '.join(allowed)}")
    for x in items:
        if x not in allowed:
            raise UserError(f"unknown value {x!r} in {option}", f"use some of: {', '.join(allowed)}")
    return items


def command_line(name: str, params: Sequence[tuple[str, Any, Any]]) -> str:
    """`python -m benchmarks NAME --opt value ...` with the options that differ from their defaults."""
    parts = ["python", "-m", "benchmarks", name]
    for flag, value, default in params:
        if value == default or value is None:
            continue
        if isinstance(value, bool):
            parts.append(flag if value else "--no-" + flag.removeprefix("--"))
        else:
            parts.extend([flag, str(value)])
    return shlex.join(parts)


def save_raw(out_dir: Path, stem: str, result: dict[str, Any]) -> None:
    """OUT_DIR/STEM.json right after the measurements, before any rendering."""
    from benchmarks.report import write_json

    write_json(out_dir / f"{stem}.json", result)


def section_name(name: str) -> str:
    """A BENCHMARKS.md section name: letters, digits, '-' and '_' (it goes into marker comments)."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", name or ""):
        raise UserError(f"invalid section name {name!r}", "use letters, digits, '-' and '_', e.g. reproduce-all")
    return name


def write_results(out_dir: Path, stem: str, title: str, command: str, result: dict[str, Any], tables: Sequence[Any],
                  update_benchmarks: bool, benchmarks: Path, extra: str = "", section: str | None = None) -> None:
    from benchmarks.report import document, update_section, write_outputs

    text = document(title, command, result, tables, extra)
    md, js = write_outputs(out_dir, stem, text, result)
    err = Console(file=sys.stderr, highlight=False, soft_wrap=True)
    err.print(f"wrote {md} and {js}", markup=False)
    if update_benchmarks:
        update_section(benchmarks, section or stem, text)
        err.print(f"updated the {section or stem} section of {benchmarks}", markup=False)


# ---- the command ----------------------------------------------------------------------------


def bench(
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="A run of a few minutes: 5 repeats, the naive baseline once per cell (stopped after "
            "--naive-limit s outside the target cells).",
        ),
    ] = False,
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out-dir", metavar="DIR",
            help="Where bench.md and bench.json go.",
        ),
    ] = DEFAULT_OUT,
    repeats: Annotated[
        Optional[int],
        typer.Option(
            "--repeats", metavar="N",
            help="Timed releases per cell (default 20; --quick 5).",
        ),
    ] = None,
    naive_repeats: Annotated[
        Optional[int],
        typer.Option(
            "--naive-repeats", metavar="N",
            help="Naive-baseline runs per cell, ≥ 1 (default 3; --quick 1).",
        ),
    ] = None,
    naive_limit: Annotated[
        Optional[float],
        typer.Option(
            "--naive-limit", metavar="SECONDS",
            help="Stop a naive run after this long and report a lower bound (default: none; --quick 10; 0 "
            "= none). Never applied to the target cells.",
        ),
    ] = None,
    naive: Annotated[bool, typer.Option("--naive/--no-naive", help="Measure the naive baseline.")] = True,
    datasets: Annotated[
        Optional[str],
        typer.Option(
            "--datasets", metavar="A,B",
            help="salaries,homicides (default both).",
        ),
    ] = None,
    searches: Annotated[
        Optional[str],
        typer.Option(
            "--searches", metavar="S,...",
            help="Among uniform,random-walk,dfs,bfs (default all).",
        ),
    ] = None,
    verifiers: Annotated[
        Optional[str],
        typer.Option(
            "--verifiers", metavar="V,...",
            help="Among grubbs,lof,histogram,zscore (default all).",
        ),
    ] = None,
    seed: Annotated[
        int,
        typer.Option(
            "--seed",
            help="First seed; repeat i uses seed + i (engine and naive alike).",
        ),
    ] = 2024,
    big_rows: Annotated[
        int,
        typer.Option(
            "--big-rows", metavar="N",
            help="Rows of the large generated table.",
        ),
    ] = 10_000_000,
    big: Annotated[bool, typer.Option("--big/--no-big", help="Run the large-table release (two subprocesses).")] = True,
    direct: Annotated[
        bool,
        typer.Option(
            "--direct/--no-direct",
            help="Time the exact grubbs enumeration of salaries record 42.",
        ),
    ] = True,
    update_benchmarks: UpdateBenchmarks = False,
    benchmarks_file: BenchmarksFile = DEFAULT_BENCHMARKS,
    benchmarks_section: BenchmarksSection = "bench",
) -> None:
    """Time releases on salaries and homicides for every search × verifier against a naive
    baseline (one DuckDB query per context), the per-cell summary build, the exact direct
    enumeration and a 10-million-row release, each next to its target.

    \b
    Example:
        python -m benchmarks bench --quick --update-benchmarks
        python -m benchmarks bench --datasets salaries --searches bfs --verifiers lof,grubbs --no-big

    Writes OUT_DIR/bench.md and OUT_DIR/bench.json; progress goes to stderr.
    """
    from benchmarks.report import bench_tables
    from benchmarks.suite import DATASETS, SEARCHES, VERIFIERS, BenchConfig, run_bench

    section = section_name(benchmarks_section)
    for value, flag in ((repeats, "--repeats"), (naive_repeats, "--naive-repeats")):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}", f"pass e.g. {flag} 3")
    if big_rows < 1:
        raise UserError(f"--big-rows must be positive, got {big_rows}", "pass e.g. --big-rows 10000000")
    if naive_limit is not None and naive_limit < 0:
        raise UserError(f"--naive-limit must be ≥ 0, got {naive_limit}", "pass e.g. --naive-limit 10 (0: no limit)")
    overrides: dict[str, Any] = dict(
        repeats=repeats, naive_repeats=naive_repeats,
        datasets=split_list(datasets, tuple(DATASETS), "--datasets"),
        searches=split_list(searches, SEARCHES, "--searches"),
        verifiers=split_list(verifiers, VERIFIERS, "--verifiers"),
        seed=seed, big_rows=big_rows,
    )
    cfg = BenchConfig.preset(quick, **overrides)
    if naive_limit is not None:
        cfg = replace(cfg, naive_limit_s=naive_limit or None)
    cfg = replace(cfg, naive=naive, big=big,
                  direct_repeats=cfg.direct_repeats if direct and "salaries" in cfg.datasets else 0)
    command = command_line("bench", [
        ("--quick", quick, False), ("--repeats", repeats, None), ("--naive-repeats", naive_repeats, None),
        ("--naive-limit", naive_limit, None), ("--naive", naive, True), ("--datasets", datasets, None),
        ("--searches", searches, None), ("--verifiers", verifiers, None), ("--seed", seed, 2024),
        ("--big-rows", big_rows, 10_000_000), ("--big", big, True), ("--direct", direct, True),
        ("--benchmarks-section", benchmarks_section, "bench"),
    ])
    with progress_reporter() as report:
        result = run_bench(cfg, report).as_dict()
    save_raw(out_dir, "bench", result)  # the figures survive whatever happens below
    tables = bench_tables(result)
    print_tables(tables)
    write_results(out_dir, "bench", "python -m benchmarks bench", command, result, tables, update_benchmarks,
                  benchmarks_file, section=section)
