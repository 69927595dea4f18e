"""`python -m benchmarks verifiers`: the share of rows each built-in verifier flags among all
rows, on the bundled tables and a tie-heavy synthetic wage table (DESIGN.md §2 "Verifiers"). The work is in
`benchmarks.verifier_shares`; this module parses options, prints and writes tables."""

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


def verifiers(
    tables: Annotated[
        Optional[str],
        typer.Option("--tables", metavar="A,B",
                     help="Among salaries.salary,homicides.victim_age,diamonds.price,diamonds.carat,wages (default all)."),
    ] = None,
    rows: Annotated[int, typer.Option("--rows", metavar="N", help="Rows of the synthetic wage table.")] = 3000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the synthetic wage table.")] = 21,
    out_dir: Annotated[Path, typer.Option("--out-dir", metavar="DIR", help="Where verifiers.md and verifiers.json go.")]
    = DEFAULT_OUT,
    from_json: Annotated[
        Optional[Path],
        typer.Option("--from-json", metavar="FILE", help="Measure nothing: lay out a saved verifiers.json again."),
    ] = None,
    update_benchmarks: UpdateBenchmarks = False,
    benchmarks_file: BenchmarksFile = DEFAULT_BENCHMARKS,
    benchmarks_section: BenchmarksSection = "verifiers",
) -> None:
    """Show the share of rows each verifier (LOF under both rules for duplicates, Grubbs,
    histogram, z-score; default options) calls an outlier among all rows of a table, with the
    time of one check, and the before (plain LOF) / after (distinct LOF) line on tie-heavy data.

    \b
    Example:
        python -m benchmarks verifiers
        python -m benchmarks verifiers --update-benchmarks

    Writes OUT_DIR/verifiers.md and OUT_DIR/verifiers.json; progress goes to stderr.
    """
    from benchmarks.verifier_shares import TABLE_NAMES, VerifiersConfig, before_after, run_verifiers, verifier_tables

    section = section_name(benchmarks_section)
    if rows < 2:
        raise UserError(f"--rows must be at least 2, got {rows}", "pass e.g. --rows 3000")
    cfg = VerifiersConfig(tables=split_list(tables, TABLE_NAMES, "--tables") or TABLE_NAMES, rows=rows, seed=seed)
    command = command_line("verifiers", [
        ("--tables", tables, None), ("--rows", rows, 3000), ("--seed", seed, 21),
        ("--benchmarks-section", benchmarks_section, "verifiers"),
    ])
    if from_json is not None:
        if not from_json.is_file():
            raise UserError(f"--from-json: no such file {str(from_json)!r}", "name a verifiers.json written earlier")
        result = json.loads(from_json.read_text(encoding="utf-8"))
        result["sources"] = [source_of(result, "python -m benchmarks verifiers")]
        command = command_line("verifiers", [("--from-json", from_json, None)])
    else:
        result = run_verifiers(cfg, progress_reporter())
        result["command"] = command
        save_raw(out_dir, "verifiers", result)
    tables_out = verifier_tables(result)
    print_tables(tables_out)
    line = before_after(result)
    if line:
        print(line)
    write_results(out_dir, "verifiers", "python -m benchmarks verifiers", command, result, tables_out,
                  update_benchmarks, benchmarks_file, extra=line, section=section)
