"""`python -m benchmarks scale`: releases on 10M–100M-row tables and on context spaces past 64
free bits, each next to DuckDB sorting the metric into numpy on the same table.
The work is in `benchmarks.scale` (the plan and the run), `scale_measure` (what one case's process
measures) and `scale_goals`; this module parses options, prints and writes tables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from benchmarks.cli.bench import (
    DEFAULT_BENCHMARKS, DEFAULT_OUT, BenchmarksFile, BenchmarksSection, UpdateBenchmarks, command_line,
    print_tables, progress_reporter, save_raw, section_name, split_list, write_results,
)
from pcor_sql.errors import UserError


def scale(
    rows: Annotated[int, typer.Option("--rows", metavar="N", help="Rows of the base and 70-value tables.")] = 10_000_000,
    repeats: Annotated[
        int, typer.Option("--repeats", metavar="N", help="Fresh, warm and reference timings of the base case.")
    ] = 5,
    wide_repeats: Annotated[
        int, typer.Option("--wide-repeats", metavar="N", help="The same for each wide-space case.")
    ] = 3,
    wide500_rows: Annotated[
        int, typer.Option("--wide500-rows", metavar="N", help="Rows of the 500-value table.")
    ] = 1_000_000,
    huge_rows: Annotated[int, typer.Option("--huge-rows", metavar="N", help="Rows of the huge case.")] = 100_000_000,
    cases: Annotated[
        Optional[str],
        typer.Option("--cases", metavar="A,B", help="Among base,base-grubbs,wide70,wide500,flights,wide5000,births,"
                     "births-uniform,per-check,huge (default: base,wide70,wide500). Each runs alone too, e.g. "
                     "--cases births."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="First seed; release i uses seed + i.")] = 1,
    workdir: Annotated[
        Path, typer.Option("--workdir", metavar="DIR", help="Where the generated tables are kept between runs.")
    ] = Path("/tmp/pcor-scale"),
    out_dir: Annotated[Path, typer.Option("--out-dir", metavar="DIR", help="Where scale.md and scale.json go.")]
    = DEFAULT_OUT,
    from_json: Annotated[
        Optional[Path],
        typer.Option("--from-json", metavar="PATH", help="Render a saved scale.json again instead of measuring."),
    ] = None,
    update_benchmarks: UpdateBenchmarks = False,
    benchmarks_file: BenchmarksFile = DEFAULT_BENCHMARKS,
    benchmarks_section: BenchmarksSection = "scale",
    force: Annotated[
        bool, typer.Option("--force", help="Write BENCHMARKS.md even when the 1-minute load exceeded 1.5 (the "
                           "section then says so).")
    ] = False,
) -> None:
    """Time BFS releases (ε = 0.2, n = 50) on generated tables: 10M rows of 1,200 cells with
    LOF (fresh: summary included; warm: Session reused), 70- and 500-value context spaces with
    Grubbs and LOF, and — with --cases huge — one niced 100M-row release with its peak RSS.
    Each case runs in its own process, next to DuckDB's `SELECT v FROM t ORDER BY v` into
    numpy on the same table.

    \b
    Example:
        python -m benchmarks scale --update-benchmarks
        python -m benchmarks scale --cases huge --update-benchmarks --benchmarks-section scale-huge

    Writes OUT_DIR/scale.md and OUT_DIR/scale.json; progress goes to stderr. Every ratio is
    shown with the 1-minute load average read before its samples; --update-benchmarks refuses
    to write BENCHMARKS.md when the load exceeds 1.5 (before measuring, and if it did during the
    run) unless --force, and a forced section says so.
    """
    from benchmarks.scale import CASE_NAMES, ScaleConfig, run_scale
    from benchmarks.scale_goals import MAX_LOAD, busiest_load
    from benchmarks.scale_measure import load_now

    section = section_name(benchmarks_section)
    for value, flag in ((rows, "--rows"), (repeats, "--repeats"), (wide_repeats, "--wide-repeats"),
                        (wide500_rows, "--wide500-rows"), (huge_rows, "--huge-rows")):
        if value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}", f"pass e.g. {flag} 3")
    chosen = split_list(cases, CASE_NAMES, "--cases") or ("base", "wide70", "wide500")
    cfg = ScaleConfig(rows=rows, repeats=repeats, wide_repeats=wide_repeats, wide500_rows=wide500_rows,
                      huge_rows=huge_rows, cases=chosen, seed=seed, workdir=workdir)
    command = command_line("scale", [
        ("--rows", rows, 10_000_000), ("--repeats", repeats, 5), ("--wide-repeats", wide_repeats, 3),
        ("--wide500-rows", wide500_rows, 1_000_000), ("--huge-rows", huge_rows, 100_000_000),
        ("--cases", cases, None), ("--seed", seed, 1), ("--benchmarks-section", benchmarks_section, "scale"),
    ])
    if from_json is not None:
        import json

        result = json.loads(from_json.read_text(encoding="utf-8"))
        command = result.get("command", command)
    else:
        now = load_now()
        if update_benchmarks and not force and now is not None and now > MAX_LOAD:
            raise UserError(f"the 1-minute load average is {now:.2f}, above {MAX_LOAD}: ratios measured now are not "
                            "comparable with a quiet machine's",
                            "wait until the machine is quieter, or pass --force (the BENCHMARKS.md section then says so)")
        result = run_scale(cfg, progress_reporter())
        result["command"] = command
        save_raw(out_dir, "scale", result)
    tables = scale_tables(result)
    print_tables(tables)
    busiest = busiest_load(result)
    busy = busiest is not None and busiest > MAX_LOAD
    extra = (f"**Written with --force at a busy machine: the 1-minute load average reached {busiest:.2f} during the "
             f"run (above {MAX_LOAD}).** The ratios below are not comparable with a quiet machine's.\n"
             if busy and force else "")
    write_results(out_dir, "scale", "python -m benchmarks scale", command, result, tables,
                  update_benchmarks and (force or not busy), benchmarks_file, extra=extra, section=section)
    if update_benchmarks and busy and not force:
        raise UserError(f"BENCHMARKS.md not written: the 1-minute load average reached {busiest:.2f} during the run "
                        f"(above {MAX_LOAD})",
                        f"measure again on a quieter machine, or write this run with --from-json "
                        f"{out_dir / 'scale.json'} --update-benchmarks --force (the section then says so)")


def width_tables(result: dict[str, Any]) -> list[Any]:
    """The goals at width (births, flights, 5,000 values) and the per-check table by member cells."""
    from benchmarks.report import target_table
    from benchmarks.scale_width import width_targets
    from benchmarks.scale_width import per_check_table

    goals = result.get("width_targets")
    if goals is None:
        goals = [t.as_dict() for t in width_targets(result)]
    table = target_table(goals)
    table = type(table)("Goals at the width of real tables (births, flights, 5,000 values)", table.columns,
                        table.rows, ("Ratios: fresh release (new Session, summary included) over DuckDB's sort of the "
                                     "metric into numpy, medians, measured in the same child process.",))
    per_check = per_check_table(result)
    return [table, *([per_check] if per_check is not None else [])]


def scale_tables(result: dict[str, Any]) -> list[Any]:
    from benchmarks.report import target_table
    from benchmarks.scale_goals import load_text, median, ratio_loads
    from benchmarks.tables import make_table, mib, seconds

    def t(xs: list[float]) -> str:
        if not xs:
            return "—"
        return f"{seconds(median(xs))} ({seconds(min(xs))}–{seconds(max(xs))})"

    # The huge case's reference ran in its own process (so that the release's RSS is its own).
    separate = {c["name"].removesuffix("-reference"): c.get("reference_s") or [] for c in result["cases"]
                if c["name"].endswith("-reference")}

    separate_cases = {c["name"].removesuffix("-reference"): c for c in result["cases"] if c["name"].endswith("-reference")}

    def r(case: dict[str, Any], key: str) -> str:
        """The ratio of medians, with the 1-minute load read before the samples it divides."""
        ref = median(case.get("reference_s") or separate.get(case["name"]) or [])
        x = median(case.get(key) or [])
        if not ref or x is None:
            return "—"
        reference = None if case.get("reference_s") else separate_cases.get(case["name"])
        return f"{x / ref:.2f}× ({load_text(ratio_loads(case, key, reference))})"

    def without_start(case: dict[str, Any]) -> str:
        missed = case.get("other_records_without_start") or []
        return f" ({len(missed)} of {len(case.get('other_records') or [])} records without a valid context)" \
            if missed else ""

    rows, memory = [], []
    for c in result["cases"]:
        name = c["name"] if c.get("search", "bfs") == "bfs" else f"{c['name']}, {c['search']}"
        label = f"{name} ({c['rows']:,} rows, {c.get('cells', '—'):,} cells, {c['free_bits']} free bits)" \
            if isinstance(c.get("cells"), int) else f"{name} ({c['rows']:,} rows)"
        if "error" in c:
            rows.append((label, c["verifier"], "error: " + c["error"], *[""] * 14))
            continue

        def checks(key: str) -> str:
            xs = c.get(key) or []
            return f"{int(median(xs)):,}" if xs else "—"

        warm = [x for key in ("warm_same_s", "warm_s", "warm_other_s") for x in (t(c.get(key) or []), r(c, key))]
        rows.append((label, c["verifier"], t(c["reference_s"]), t(c["fresh_s"]), r(c, "fresh_s"), *warm,
                     t(c["summary_build_s"]), *(t((c.get("summary_threads_s") or {}).get(k) or []) for k in ("1", "2")),
                     checks("start_checks"), checks("contexts_verified"),
                     checks("warm_other_contexts_verified") + without_start(c)))
        if c.get("fresh_s"):
            n = c["rows"]
            memory.append((label, c["verifier"], mib(c.get("summary_bytes")),
                           f"{c['summary_bytes'] / n:.1f}" if c.get("summary_bytes") else "—",
                           mib(c["peak_rss_bytes"]), f"{c['peak_rss_bytes'] / n:.0f}"))
    lattice = [(x["shape"], str(x["free_bits"]), f"{x['neighbours_us']:.1f} µs", f"{x['neighbours_per_bit_ns']:.0f} ns",
                f"{x['from_free_us']:.1f} µs") for x in result["lattice"]]
    return [
        make_table("Releases: BFS (forced), ε = 0.2, n = 50, seeded; reference = DuckDB `SELECT v FROM t ORDER BY v` "
                   "into numpy", ("case", "verifier", "reference", "fresh release", "fresh / ref",
                                  "warm, same request", "/ ref", "warm, new seeds", "/ ref",
                                  "warm, another record", "/ ref", "summary build (in fresh)",
                                  "summary build, threads = 1", "threads = 2", "start-search checks", "contexts verified", "contexts verified (other records)"), rows, (
            "Times: median (min–max) over the repeats, all measured in the same child process; fresh and reference "
            "alternate. fresh = `explain_outlier` end to end on a new Session (parse, schema, record, per-cell "
            "summary with the sorted runs, start search, search, in-memory ledger charge). warm = the same on one "
            "Session after one untimed release (seed s − 1), in this order: *same request* repeats it, seed "
            "included, so every verdict comes from the Session's verdict cache (pcor_sql/engine/verdicts.py); "
            "*new seeds* (s, s + 1, ...) draw other coins and reach contexts not checked before, so only part of "
            "the verdicts are cached (those of every release before it); *another record* releases each of the "
            "rows furthest above their cell's mean (benchmarks/scale.py: other_records) once — the summary is "
            "reused, its verdicts are not. summary build (in fresh) = `CellSummary.build_seconds` in the fresh "
            "releases, at DuckDB's default `threads` (every core); threads = 1, 2 = the same build on a new "
            "Session after `SET threads = 1` or `2`, alternating (the build follows that setting: DESIGN.md §10 'Building the summary').",
            "Each ratio (median over median) carries the 1-minute load average read just before its samples and "
            "the reference's (lowest–highest): the reference uses both cores and halves when one is free, a "
            "release uses one, so a ratio depends on the load. start-search checks: the contexts the "
            "deterministic start search checked in a fresh release (`OwnerView.start_checks`), within contexts "
            "verified.",
            "Tables generated by DuckDB SQL (benchmarks/scale_tables.py: generation_sql) into a DuckDB file, ATTACHed "
            "read-only to an in-memory connection; row 0 is the planted record (v = 120 in cell 0).",
            "The huge case runs once under nice 10; its reference runs in a separate process (its ratio divides "
            "by that run).",
        )),
        target_table(result["targets"]),
        *width_tables(result),
        make_table("Memory", ("case", "verifier", "summary held", "bytes per row", "peak RSS of the process",
                              "peak RSS per row (bytes)"), memory, (
            "summary held = the per-cell sorted runs (8 bytes per row) plus the per-cell arrays; peak RSS = VmHWM "
            "of the child process: interpreter, DuckDB's buffers during the GROUP BY, the Arrow result and numpy "
            "copies while the summary is built, and the reference's sorted array in the same process (not in the "
            "huge case).",
        )),
        make_table("Lattice operations by width (Python ints, no cap)", ("shape", "free bits", "neighbours()",
                                                                       "per free bit", "from_free()"), lattice, (
            "Best of 7 rounds over 200 random contexts; a compiled verifier check costs 4-15 µs "
            "(python -m benchmarks per-check), a search's own step per check about as much: on 500-value spaces "
            "the lattice operations are a share of a check worth watching.",
        )),
    ]
