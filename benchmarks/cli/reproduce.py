"""`python -m benchmarks reproduce`: the PCOR paper's experiments (§6, Tables 2–13) on the bundled data.
The work is in `benchmarks`; this module parses options and prints."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from benchmarks.cli.bench import (
    DEFAULT_BENCHMARKS, DEFAULT_OUT, BenchmarksFile, BenchmarksSection, UpdateBenchmarks, command_line, print_tables,
    progress_reporter, save_raw, section_name, split_list, write_results,
)
from pcor_sql.errors import UserError


def reproduce(
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="A run of a few minutes: salaries only, 3 sampled planted outliers × 4 releases per setting, "
            "3 neighbours × 5 outliers for the COE match.",
        ),
    ] = False,
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out-dir", metavar="DIR",
            help="Where reproduce.md, reproduce.json and figures/ go.",
        ),
    ] = DEFAULT_OUT,
    datasets: Annotated[
        Optional[str],
        typer.Option(
            "--datasets", metavar="A,B",
            help="Datasets of Tables 2–11: salaries,homicides (default both; --quick salaries).",
        ),
    ] = None,
    records: Annotated[
        Optional[int],
        typer.Option(
            "--records", metavar="K",
            help="Use K planted outliers of each dataset, drawn uniformly with the seed (default all; --quick 3).",
        ),
    ] = None,
    record_ids: Annotated[
        Optional[str],
        typer.Option(
            "--record-ids", metavar="ID,...",
            help="Use exactly these record ids (e.g. 42) instead of a sample of planted outliers.",
        ),
    ] = None,
    repeats: Annotated[
        Optional[int],
        typer.Option(
            "--repeats", metavar="N",
            help="Releases per record per setting (default 6; --quick 5).",
        ),
    ] = None,
    groups: Annotated[
        Optional[str],
        typer.Option(
            "--groups", metavar="G,...",
            help="Among sampling,overlap,verifiers,epsilon,samples (default all).",
        ),
    ] = None,
    match: Annotated[
        bool,
        typer.Option(
            "--match/--no-match",
            help="Run the COE-match experiment (Tables 12–13, §6.7).",
        ),
    ] = True,
    match_datasets: Annotated[
        Optional[str],
        typer.Option(
            "--match-datasets", metavar="A,B",
            help="Datasets of the COE match: salaries,homicides (default both).",
        ),
    ] = None,
    match_outliers: Annotated[
        Optional[int],
        typer.Option(
            "--match-outliers", metavar="N",
            help="Outliers per verifier in the COE match (default 40; --quick 5).",
        ),
    ] = None,
    match_neighbours: Annotated[
        Optional[int],
        typer.Option(
            "--match-neighbours", metavar="N",
            help="Neighbouring datasets per ΔD (default 20; --quick 3).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Base seed of every release and draw.")] = 2024,
    figures: Annotated[
        bool,
        typer.Option(
            "--figures/--no-figures",
            help="Write PNG figures when matplotlib is installed (extra: plot).",
        ),
    ] = True,
    update_benchmarks: UpdateBenchmarks = False,
    benchmarks_file: BenchmarksFile = DEFAULT_BENCHMARKS,
    benchmarks_section: BenchmarksSection = "reproduce",
) -> None:
    """Reproduce the PCOR paper's experiments (§6, Tables 2–13) on the bundled data: sampling
    methods, overlap utility, verifiers, ε, n — runtime and utility ratio under both accountings
    — and the COE match under neighbouring datasets with the §6.7 privacy check.

    \b
    Example:
        python -m benchmarks reproduce --quick --update-benchmarks
        python -m benchmarks reproduce --groups sampling,epsilon --records 5 --no-match

    The full run (all planted outliers of both datasets, 6 releases each per setting) takes
    over an hour on 2 cores (every run prints an estimate); --quick under two minutes.
    Writes OUT_DIR/reproduce.md and OUT_DIR/reproduce.json.
    """
    from benchmarks.experiments import GROUPS
    from benchmarks.plots import write_figures
    from benchmarks.reproduce import ReproduceConfig, reproduce_tables, run_reproduce

    section = section_name(benchmarks_section)
    for value, flag in ((records, "--records"), (repeats, "--repeats"), (match_outliers, "--match-outliers"),
                        (match_neighbours, "--match-neighbours")):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}", f"pass e.g. {flag} 3")
    ids = None
    if record_ids is not None:
        try:
            ids = tuple(int(x) for x in record_ids.split(",") if x.strip())
        except ValueError:
            raise UserError(f"--record-ids must be integers separated by commas, got {record_ids!r}", "pass e.g. --record-ids 42,171") from None
        if not ids:
            raise UserError("--record-ids names no record", "pass e.g. --record-ids 42")
    cfg = ReproduceConfig.preset(
        quick, record_ids=ids,
        datasets=split_list(datasets, ("salaries", "homicides"), "--datasets"),
        records=records, repeats=repeats,
        groups=split_list(groups, tuple(g.key for g in GROUPS), "--groups"),
        match=match, match_datasets=split_list(match_datasets, ("salaries", "homicides"), "--match-datasets"),
        match_outliers=match_outliers, match_neighbours=match_neighbours, seed=seed,
    )
    command = command_line("reproduce", [
        ("--quick", quick, False), ("--datasets", datasets, None), ("--records", records, None),
        ("--record-ids", record_ids, None), ("--repeats", repeats, None), ("--groups", groups, None), ("--match", match, True),
        ("--match-datasets", match_datasets, None), ("--match-outliers", match_outliers, None),
        ("--match-neighbours", match_neighbours, None), ("--seed", seed, 2024),
        ("--figures", figures, True), ("--benchmarks-section", benchmarks_section, "reproduce"),
    ])
    with progress_reporter() as report:
        result = run_reproduce(cfg, report).as_dict()
    save_raw(out_dir, "reproduce", result)  # the figures survive whatever happens below
    tables = reproduce_tables(result)
    print_tables(tables)
    extra = ""
    if figures:
        written, why = write_figures(result, out_dir / "figures")
        result["figures"] = [str(p) for p in written]
        extra = (f"Figures: {', '.join(p.name for p in written)} (in {out_dir / 'figures'})." if written
                 else f"Figures: none ({why}).")
        report(extra)
    write_results(out_dir, "reproduce", "python -m benchmarks reproduce", command, result, tables, update_benchmarks,
                  benchmarks_file, extra, section=section)
