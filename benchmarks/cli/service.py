"""`python -m benchmarks service`: concurrent analysts on one `pcor-sql serve` — latency,
throughput, and the ledger's invariants under load. The work is in `benchmarks.service_load`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from benchmarks.cli.bench import (
    DEFAULT_BENCHMARKS, DEFAULT_OUT, BenchmarksFile, BenchmarksSection, UpdateBenchmarks, command_line,
    print_tables, progress_reporter, save_raw, section_name, write_results,
)
from pcor_sql.errors import UserError


def service(
    rows: Annotated[int, typer.Option("--rows", metavar="N", help="Rows of the registered table.")] = 1_000_000,
    analysts: Annotated[int, typer.Option("--analysts", metavar="N", help="Concurrent analysts.")] = 8,
    requests: Annotated[int, typer.Option("--requests", metavar="N", help="Requests per analyst.")] = 50,
    workers: Annotated[str, typer.Option(
        "--workers", metavar="N[,N...]", help="The service's --workers; several (e.g. 1,2): measure how answered per "
        "second scales with them instead of the mixed load (benchmarks.service_scaling).")] = "4",
    searches: Annotated[str, typer.Option(
        "--searches", metavar="MODE[,MODE]", help="The serve --searches mode(s): with several --workers, those to "
        "compare (processes, threads); with one, where the maximal requests of --heavy search.")] = "processes",
    clients: Annotated[int, typer.Option("--clients", metavar="N", help="With several --workers: clients (analysts).")] = 8,
    in_flight: Annotated[int, typer.Option(
        "--in-flight", metavar="N", help="With several --workers: requests each client keeps in flight at once "
        "(N threads on its one token; e.g. --clients 1 --in-flight 8: one analyst's concurrent requests).")] = 1,
    clients_as: Annotated[str, typer.Option(
        "--clients-as", metavar="MODE", help="With several --workers: each client a thread of this process on the "
        "analyst client (threads), a process of its own (processes), or a thread on the standard library's "
        "http.client (http: a third of the client CPU). Analysts are other machines; here they share the cores "
        "with the service.")] = "threads",
    burst: Annotated[int, typer.Option(
        "--burst", metavar="N", help="With several --workers: timed requests per run.")] = 32,
    repeats: Annotated[int, typer.Option(
        "--repeats", metavar="N", help="With several --workers: runs per setting, alternating.")] = 2,
    duckdb_threads: Annotated[str, typer.Option(
        "--duckdb-threads", metavar="auto|N[,...]", help="With several --workers: serve with each --duckdb-threads "
        "(auto: serve's default, DuckDB's threads divided among the workers), alternating.")] = "auto",
    samples: Annotated[int, typer.Option(
        "--samples", metavar="N", help="With several --workers: the explain requests' BFS samples (search weight).")]
    = 50,
    heavy: Annotated[int, typer.Option(
        "--heavy", metavar="N", help="Analysts sending maximal requests while a light one is timed (0: skip).")] = 8,
    light: Annotated[int, typer.Option("--light", metavar="N", help="Light requests timed alone and under load.")] = 10,
    reference: Annotated[int, typer.Option(
        "--reference", metavar="N", help="In-process requests timed as the reference, before and after the load.")] = 12,
    workdir: Annotated[Path, typer.Option(
        "--workdir", metavar="DIR", help="Where the database file is made (replaced each run).")]
    = Path("/tmp/pcor-service-bench"),
    out_dir: Annotated[Path, typer.Option("--out-dir", metavar="DIR", help="Where service.md and service.json go.")]
    = DEFAULT_OUT,
    from_json: Annotated[Optional[Path], typer.Option(
        "--from-json", metavar="PATH", help="Render a saved service.json again instead of measuring.")] = None,
    update_benchmarks: UpdateBenchmarks = False,
    benchmarks_file: BenchmarksFile = DEFAULT_BENCHMARKS,
    benchmarks_section: BenchmarksSection = "service",
) -> None:
    """Serve a generated table with `pcor-sql serve` (child process, 127.0.0.1) and send it
    ANALYSTS × REQUESTS requests from concurrent analysts (explain and identify, ε = 0.1
    each, quotas and the table's limit running out on the way); report p50/p95 latency and
    requests per second next to the same requests in-process, and check that no quota or
    limit is exceeded, that spent equals the sum of the history, and that nothing answered 5xx.

    \b
    Example:
        python -m benchmarks service --update-benchmarks

    Exit code 1 if a check fails. Writes OUT_DIR/service.md and OUT_DIR/service.json.
    """
    from benchmarks.service_load import LoadConfig, run_service

    settings = _counts(workers, "--workers")
    if len(settings) > 1:
        return _scaling(rows, settings, searches, clients, burst, repeats, workdir, out_dir, update_benchmarks,
                        benchmarks_file, benchmarks_section, samples, clients_as, duckdb_threads, in_flight)
    workers_n = settings[0]
    section = section_name(benchmarks_section)
    for value, flag in ((rows, "--rows"), (analysts, "--analysts"), (requests, "--requests"), (workers_n, "--workers"),
                        (reference, "--reference"), (light, "--light")):
        if value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}", f"pass e.g. {flag} 4")
    command = command_line("service", [
        ("--rows", rows, 1_000_000), ("--analysts", analysts, 8), ("--requests", requests, 50),
        ("--workers", workers_n, 4), ("--reference", reference, 12), ("--heavy", heavy, 8), ("--light", light, 10),
        ("--benchmarks-section", benchmarks_section, "service"),
    ])
    if from_json is not None:
        import json

        result = json.loads(from_json.read_text(encoding="utf-8"))
        command = result.get("command", command)
    else:
        cfg = LoadConfig(rows=rows, analysts=analysts, requests=requests, workers=workers_n, reference=reference,
                         workdir=workdir)
        with progress_reporter() as report:
            result = run_service(cfg, report)
            if heavy > 0:
                from benchmarks.service_heavy import run_heavy
                from benchmarks.service_load import PLANTED, TABLE

                db = workdir / f"service-{rows}.duckdb"
                if searches not in ("processes", "threads"):
                    raise UserError(f"with one --workers, --searches is processes or threads, got {searches!r}",
                                    "e.g. --searches threads")
                result["under_maximal"] = run_heavy(db, workers_n, heavy, light, TABLE, PLANTED - 1, report,
                                                    searches=searches)
                result["under_maximal"]["searches"] = searches
        result["command"] = command
        save_raw(out_dir, "service", result)
    tables = service_tables(result)
    print_tables(tables)
    write_results(out_dir, "service", "python -m benchmarks service", command, result, tables, update_benchmarks,
                  benchmarks_file, section=section)
    if not all(v["met"] for v in result["verdicts"]):
        raise typer.Exit(1)


def _counts(text: str, flag: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise UserError(f"{flag} takes whole numbers ≥ 1 separated by commas, got {text!r}", f"e.g. {flag} 1,2")
    return values


def _scaling(rows: int, settings: list[int], searches: str, clients: int, burst: int, repeats: int, workdir: Path,
             out_dir: Path, update_benchmarks: bool, benchmarks_file: Path, benchmarks_section: str,
             samples: int = 50, clients_as: str = "threads", duckdb_threads: str = "auto", in_flight: int = 1) -> None:
    from benchmarks.service_scaling import run_scaling, scaling_table

    modes = searches.split(",")
    if any(m not in ("processes", "threads") for m in modes):
        raise UserError(f"--searches takes processes and/or threads, got {searches!r}", "e.g. --searches processes,threads")
    if clients_as not in ("threads", "processes", "http"):
        raise UserError(f"--clients-as takes threads, processes or http, got {clients_as!r}", "e.g. --clients-as http")
    threads = [t.strip() for t in duckdb_threads.split(",")]
    if not all(t == "auto" or (t.isascii() and t.isdigit() and int(t) >= 1) for t in threads):
        raise UserError(f"--duckdb-threads takes auto or whole numbers ≥ 1, got {duckdb_threads!r}",
                        "e.g. --duckdb-threads auto,1")
    for value, flag in ((clients, "--clients"), (burst, "--burst"), (repeats, "--repeats"), (rows, "--rows"),
                        (samples, "--samples"), (in_flight, "--in-flight")):
        if value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}", f"pass e.g. {flag} 2")
    command = command_line("service", [
        ("--rows", rows, 1_000_000), ("--workers", ",".join(map(str, settings)), None),
        ("--searches", searches, "processes"), ("--clients", clients, 8), ("--burst", burst, 32),
        ("--repeats", repeats, 2), ("--samples", samples, 50), ("--clients-as", clients_as, "threads"),
        ("--duckdb-threads", ",".join(threads), "auto"), ("--in-flight", in_flight, 1)])
    with progress_reporter() as report:
        result = run_scaling(rows, settings, modes, clients, burst, repeats, workdir, report, samples, clients_as,
                             threads, in_flight)
    result["command"] = command
    save_raw(out_dir, "service-scaling", result)
    tables = [scaling_table(result)]
    print_tables(tables)
    write_results(out_dir, "service-scaling", "python -m benchmarks service --workers " + ",".join(map(str, settings)),
                  command, result, tables, update_benchmarks, benchmarks_file,
                  section=section_name(benchmarks_section if benchmarks_section != "service" else "service-scaling"))


def service_tables(result: dict[str, Any]) -> list[Any]:
    from benchmarks.report import target_table
    from benchmarks.service_heavy import heavy_table
    from benchmarks.service_load import percentile
    from benchmarks.tables import make_table, seconds

    records, cfg = result["records"], result["config"]
    reference = {kind: [r["seconds"] for r in result["reference"] if r["kind"] == kind]
                 for kind in ("explain", "identify")}

    def row(label: str, chosen: list[dict[str, Any]], kind: str | None) -> tuple[str, ...]:
        xs = sorted(r["seconds"] for r in chosen)
        p50, p95 = percentile(xs, 0.5), percentile(xs, 0.95)
        ref = percentile(sorted(reference.get(kind) or []), 0.5) if kind else None
        return (label, f"{len(xs):,}", seconds(p50) if xs else "—", seconds(p95) if xs else "—",
                seconds(xs[-1]) if xs else "—", seconds(ref) if ref else "—",
                f"{p50 / ref:.2f}×" if ref and p50 else "—")

    answered = [r for r in records if r["status"] == 200]
    refused = [r for r in records if r["status"] == 429]
    other = [r for r in records if r["status"] not in (200, 429)]
    rows = [
        row("explain, answered (Grubbs, 1 key)", [r for r in answered if r["kind"] == "explain"], "explain"),
        row("identify, answered (SP or DP, 1 point)", [r for r in answered if r["kind"] == "identify"], "identify"),
        row("refused: quota or limit reached (429)", refused, None),
        row("other 4xx", other, None),
        row("all requests", records, None),
    ]
    load_s = result["load_s"]
    # One at a time in-process, the reference answers 1 / (its mean latency) requests per second.
    serial = [r["seconds"] for r in result["reference"]]
    serial_rate = len(serial) / sum(serial) if serial else None
    throughput = [(f"{cfg['analysts']} × {cfg['requests']}", f"{len(records):,}", seconds(load_s),
                   f"{len(records) / load_s:.1f}", f"{len(answered) / load_s:.1f}",
                   f"{serial_rate:.1f}" if serial_rate else "—",
                   f"{len(answered) / load_s / serial_rate:.2f}×" if serial_rate else "—")]
    statuses: dict[str, int] = {}
    for r in records:
        statuses[f"{r['kind']} {r['status']}"] = statuses.get(f"{r['kind']} {r['status']}", 0) + 1
    return [
        make_table(
            f"Latency per request, {cfg['analysts']} concurrent analysts on {cfg['rows']:,} rows "
            f"(service --workers {cfg['workers']})",
            ("requests", "count", "p50", "p95", "max", "in-process p50 (reference)", "p50 / reference"), rows, (
                "Latency: from the client's call to its return (pcor_sql.connect over loopback HTTP: JSON, token "
                "check, the worker pool's wait, the release or answer, the ledger's reservation and outcome).",
                f"Reference: the same request mix through the in-process analyst handle (Owner.analyst()), one at a "
                f"time on the same file, {len(result['reference'])} requests: half before the service started, half "
                f"after it stopped.",
                f"Each request costs ε = {cfg['epsilon']}; each analyst has a quota of {cfg['quota']} per notion and "
                f"the table an OCDP limit of {cfg['unit_limit']} for the run, so refusals (429, checked before the "
                "reservation) are part of the load.",
            )),
        make_table("Throughput", ("analysts × requests", "requests", "wall time", "requests / s", "answered / s",
                                  "in-process, one at a time: answered / s (reference)", "answered / s / reference"),
                   throughput, ("Wall time: from the analysts' common start to the last answer. The reference "
                                "answers the same mix one request at a time in-process (no HTTP, no concurrency).",)),
        make_table("Responses by kind and status", ("kind and status", "count"),
                   sorted((k, str(v)) for k, v in statuses.items())),
        target_table([{"name": v["check"], "goal": "holds", "measured": v["measured"], "met": v["met"]}
                      for v in result["verdicts"]]),
        *([heavy_table(result["under_maximal"])] if "under_maximal" in result else []),
    ]
