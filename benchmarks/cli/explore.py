"""`python -m benchmarks explore`: the `explore` search against BFS in the same run — utility
ratio and time per release on every planted outlier, next to its targets (DESIGN.md §7 "The explore search"). The work
is in `benchmarks.explore_targets`; this module parses options and prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from benchmarks.cli.bench import (
    DEFAULT_BENCHMARKS, DEFAULT_OUT, BenchmarksFile, BenchmarksSection, UpdateBenchmarks, command_line, print_tables,
    progress_reporter, save_raw, section_name, split_list, write_results,
)
from benchmarks.report import source_of
from pcor_sql.errors import UserError


def explore(
    quick: Annotated[
        bool, typer.Option("--quick", help="A run of minutes: the first 3 planted outliers of each dataset, 1 release each.")
    ] = False,
    out_dir: Annotated[Path, typer.Option("--out-dir", metavar="DIR", help="Where explore.md and explore.json go.")]
    = DEFAULT_OUT,
    datasets: Annotated[
        Optional[str], typer.Option("--datasets", metavar="A,B", help="salaries,homicides (default both).")
    ] = None,
    verifiers: Annotated[
        Optional[str], typer.Option("--verifiers", metavar="V,...", help="Among lof,grubbs,histogram (default all).")
    ] = None,
    records: Annotated[
        Optional[int],
        typer.Option("--records", metavar="K", help="The first K planted outliers of each dataset (default all)."),
    ] = None,
    repeats: Annotated[
        Optional[int], typer.Option("--repeats", metavar="N", help="Releases per record per search (default 2).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Base seed of every release.")] = 2024,
    leakage: Annotated[
        bool, typer.Option("--leakage/--no-leakage", help="Measure the §6.7 table (the longest part of a run).")
    ] = True,
    exact_cache: Annotated[
        Optional[Path],
        typer.Option("--exact-cache", metavar="FILE",
                     help="Exact maxima to reuse (the file `reproduce --exact-cache` writes); read only."),
    ] = None,
    from_json: Annotated[
        Optional[Path],
        typer.Option("--from-json", metavar="FILE", help="Measure nothing: lay out a saved explore.json again."),
    ] = None,
    update_benchmarks: UpdateBenchmarks = False,
    benchmarks_file: BenchmarksFile = DEFAULT_BENCHMARKS,
    benchmarks_section: BenchmarksSection = "explore",
) -> None:
    """Measure the explore search against BFS on every planted outlier of salaries and
    homicides, for LOF, Grubbs and histogram at ε = 0.2 and 0.05: utility ratio against the
    exact optimum and time per release, both searches in the same run, next to the targets.

    \b
    Example:
        python -m benchmarks explore --quick
        python -m benchmarks explore --exact-cache bench-results/exact-cache.json --update-benchmarks

    Writes OUT_DIR/explore.md and OUT_DIR/explore.json; progress goes to stderr.
    """
    from benchmarks.explore_targets import VERIFIERS, explore_tables, preset, run_explore

    section = section_name(benchmarks_section)
    for value, flag in ((records, "--records"), (repeats, "--repeats")):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}", f"pass e.g. {flag} 2")
    cache = None
    if exact_cache is not None:
        if not exact_cache.is_file():
            raise UserError(f"--exact-cache: no such file {str(exact_cache)!r}", "name a file reproduce wrote")
        cache = json.loads(exact_cache.read_text(encoding="utf-8"))
    cfg = preset(quick, datasets=split_list(datasets, ("salaries", "homicides"), "--datasets"),
                 verifiers=split_list(verifiers, VERIFIERS, "--verifiers"), records=records, repeats=repeats,
                 seed=seed, leakage=None if leakage else False)
    command = command_line("explore", [
        ("--quick", quick, False), ("--datasets", datasets, None), ("--verifiers", verifiers, None),
        ("--records", records, None), ("--repeats", repeats, None), ("--seed", seed, 2024),
        ("--no-leakage", not leakage, False),
        ("--exact-cache", exact_cache, None), ("--benchmarks-section", benchmarks_section, "explore"),
    ])
    if from_json is not None:
        if not from_json.is_file():
            raise UserError(f"--from-json: no such file {str(from_json)!r}", "name an explore.json written earlier")
        result = json.loads(from_json.read_text(encoding="utf-8"))
        result["sources"] = [source_of(result, "python -m benchmarks explore")]
        command = command_line("explore", [("--from-json", from_json, None)])
    else:
        result = run_explore(cfg, progress_reporter(), dict(cache) if cache is not None else None)
        result["command"] = command
        save_raw(out_dir, "explore", result)
    tables = explore_tables(result)
    print_tables(tables)
    write_results(out_dir, "explore", "python -m benchmarks explore", command, result, tables, update_benchmarks,
                  benchmarks_file, section=section)
