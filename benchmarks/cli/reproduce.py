"""`python -m benchmarks reproduce`: the PCOR paper's experiments (§6, Tables 2–13) on the bundled data.
The work is in `benchmarks`; this module parses options and prints."""

from __future__ import annotations

import dataclasses
import json
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
    profile: Annotated[
        str,
        typer.Option(
            "--profile", metavar="P",
            help="paper (the paper's algorithms: Alg. 5 BFS without descents, paper accounting, a start up from "
            "V's cell, Tables 6–7 on the reduced table), engine (the engine's defaults) or both.",
        ),
    ] = "both",
    runs: Annotated[
        Optional[int],
        typer.Option(
            "--runs", metavar="N",
            help="Releases per setting, spread evenly over the records (default 200, the paper's).",
        ),
    ] = None,
    repeats: Annotated[
        Optional[int],
        typer.Option(
            "--repeats", metavar="N",
            help="Releases per record per setting instead of --runs (--quick 4).",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Keep the settings already measured in OUT_DIR/reproduce.partial.json (left by an interrupted "
            "run of the same command) and run only the others.",
        ),
    ] = False,
    exact_cache: Annotated[
        Optional[Path],
        typer.Option(
            "--exact-cache", metavar="FILE",
            help="A JSON file of exact maxima (dataset|table|record|verifier|utility|start → utility, checks): read "
            "if it exists, written back with the maxima this run computes. They depend on the data and the "
            "verifiers only; delete the file when either changes.",
        ),
    ] = None,
    from_json: Annotated[
        Optional[str],
        typer.Option(
            "--from-json", metavar="FILE,...",
            help="Measure nothing: lay out the tables (and figures) of saved reproduce.json files, merged "
            "(e.g. the shards of a run split with --groups).",
        ),
    ] = None,
    groups: Annotated[
        Optional[str],
        typer.Option(
            "--groups", metavar="G,...",
            help="Among sampling,overlap,verifiers,epsilon,deviations,duplicates,samples (default all).",
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
    figures_dir: Annotated[
        Optional[Path],
        typer.Option(
            "--figures-dir", metavar="DIR",
            help="Where the PNG figures go (default OUT_DIR/figures). With --update-benchmarks, a folder next to "
            "BENCHMARKS.md (e.g. docs/benchmarks) lets the section show them.",
        ),
    ] = None,
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
    from benchmarks.report import write_json
    from benchmarks.reproduce import ReproduceConfig, merge_results, run_reproduce
    from benchmarks.reproduce_tables import reproduce_tables

    section = section_name(benchmarks_section)
    for value, flag in ((records, "--records"), (repeats, "--repeats"), (runs, "--runs"),
                        (match_outliers, "--match-outliers"), (match_neighbours, "--match-neighbours")):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}", f"pass e.g. {flag} 3")
    if profile not in ("paper", "engine", "both"):
        raise UserError(f"unknown profile {profile!r}", "use --profile paper, engine or both")
    ids = None
    if record_ids is not None:
        try:
            ids = tuple(int(x) for x in record_ids.split(",") if x.strip())
        except ValueError:
            raise UserError(f"--record-ids must be integers separated by commas, got {record_ids!r}", "pass e.g. --record-ids 42,171") from None
        if not ids:
            raise UserError("--record-ids names no record", "pass e.g. --record-ids 42")
    cfg = ReproduceConfig.preset(
        quick, record_ids=ids, profiles=("paper", "engine") if profile == "both" else (profile,),
        datasets=split_list(datasets, ("salaries", "homicides"), "--datasets"),
        records=records, runs=runs, repeats=repeats,
        groups=split_list(groups, tuple(g.key for g in GROUPS), "--groups"),
        match=match, match_datasets=split_list(match_datasets, ("salaries", "homicides"), "--match-datasets"),
        match_outliers=match_outliers, match_neighbours=match_neighbours, seed=seed,
    )
    command = command_line("reproduce", [
        ("--quick", quick, False), ("--profile", profile, "both"), ("--datasets", datasets, None),
        ("--records", records, None), ("--record-ids", record_ids, None), ("--runs", runs, None),
        ("--repeats", repeats, None), ("--groups", groups, None), ("--match", match, True),
        ("--match-datasets", match_datasets, None), ("--match-outliers", match_outliers, None),
        ("--match-neighbours", match_neighbours, None), ("--seed", seed, 2024),
        ("--figures", figures, True), ("--figures-dir", figures_dir, None), ("--exact-cache", exact_cache, None),
        ("--from-json", from_json, None),
        ("--benchmarks-section", benchmarks_section, "reproduce"),
    ])
    with progress_reporter() as report:
        partial = out_dir / "reproduce.partial.json"
        if from_json is not None:
            files = [Path(x.strip()) for x in from_json.split(",") if x.strip()]
            missing = [f for f in files if not f.is_file()]
            if not files or missing:
                raise UserError(f"--from-json: no such file {str(missing[0]) if missing else from_json!r}",
                                "name reproduce.json files written by earlier runs")
            result = merge_results([json.loads(f.read_text(encoding="utf-8")) for f in files])
        else:
            earlier = None
            if resume:
                if not partial.is_file():
                    raise UserError(f"--resume: {partial} does not exist", "run without --resume first")
                earlier = json.loads(partial.read_text(encoding="utf-8"))
                if earlier.get("config") != json.loads(json.dumps(dataclasses.asdict(cfg))):
                    raise UserError(f"--resume: {partial} was written by a run with other settings",
                                    "resume with the options of that run, or run without --resume")
            cache = json.loads(exact_cache.read_text(encoding="utf-8")) if exact_cache and exact_cache.is_file() else None
            if exact_cache is not None and cache is None:
                cache = {}

            def checkpoint(r: dict) -> None:
                write_json(partial, r)
                if exact_cache is not None:
                    write_json(exact_cache, cache)

            result = run_reproduce(cfg, report, checkpoint, earlier, cache).as_dict()
            if exact_cache is not None:
                write_json(exact_cache, cache)
            result["command"] = command
            save_raw(out_dir, "reproduce", result)  # the figures survive whatever happens below
            partial.unlink(missing_ok=True)
    tables = reproduce_tables(result)
    print_tables(tables)
    extra = ""
    if figures:
        folder = figures_dir or out_dir / "figures"
        written, why = write_figures(result, folder)
        result["figures"] = [str(p) for p in written]
        extra = figure_text(written, why, benchmarks_file.resolve().parent)
        report(extra)
    write_results(out_dir, "reproduce", "python -m benchmarks reproduce", command, result, tables, update_benchmarks,
                  benchmarks_file, extra, section=section)


def figure_text(written: list[Path], why: str, benchmarks_dir: Path) -> str:
    """The figures as Markdown images when they sit under BENCHMARKS.md's folder (paths relative
    to it), else as a list of files."""
    if not written:
        return f"Figures: none ({why})."
    try:
        rel = [p.resolve().relative_to(benchmarks_dir) for p in written]
    except ValueError:
        return f"Figures: {', '.join(p.name for p in written)} (in {written[0].parent})."
    return "Figures (the paper's Figures 1–5: per-release histograms of utility and runtime):\n\n" + "\n\n".join(
        f"![{p.stem}]({p.as_posix()})" for p in rel)
