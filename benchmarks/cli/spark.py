"""`python -m benchmarks spark-scale`: one release on a large Parquet file on DuckDB and on Spark,
with the rows Spark sent to the driver at each size. The work is in `benchmarks.spark_scale`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmarks.cli.bench import (
    DEFAULT_BENCHMARKS, DEFAULT_OUT, BenchmarksFile, UpdateBenchmarks, command_line, print_tables,
    progress_reporter, save_raw, split_list, write_results,
)
from benchmarks.report import source_of
from pcor_sql.errors import UserError


def spark_scale(
    rows: Annotated[str, typer.Option("--rows", help="Table sizes, comma-separated (at least two).")] = "1000000,10000000",
    verifiers: Annotated[str, typer.Option("--verifiers", help="Verifiers, comma-separated.")] = "grubbs,lof",
    master: Annotated[str, typer.Option("--master", help="Spark master.")] = "local[2]",
    directory: Annotated[Path, typer.Option("--dir", help="Where the Parquet files are made (and reused).")] = Path("/tmp"),
    seed: Annotated[int, typer.Option("--seed")] = 7,
    values: Annotated[str, typer.Option("--values", help="cents (rounded: tie-heavy) or fine (few ties).")] = "cents",
    out_dir: Annotated[Path, typer.Option("--out-dir")] = DEFAULT_OUT,
    update_benchmarks: UpdateBenchmarks = False,
    benchmarks_file: BenchmarksFile = DEFAULT_BENCHMARKS,
    from_json: Annotated[Path | None, typer.Option(
        "--from-json", metavar="FILE",
        help="Measure nothing: lay out a spark-scale.json written by an earlier run (e.g. one run without "
        "--update-benchmarks).")] = None,
) -> None:
    """One seeded BFS release on N-row Parquet files, DuckDB vs Spark, and Spark's rows to the driver.

    \b
    Example:
        nice python -m benchmarks spark-scale --rows 1000000,10000000 --master 'local[2]'
        nice python -m benchmarks spark-scale --rows 10000000,100000000 --update-benchmarks
        python -m benchmarks spark-scale --from-json bench-results/spark-scale.json --update-benchmarks

    Needs pip install 'pcor-sql[spark]' and Java. Writes OUT_DIR/spark-scale.md and .json.
    """
    if from_json is not None:
        result, command = _laid_out(from_json)
    else:
        result, command = _measured(rows, verifiers, master, directory, seed, values)
        save_raw(out_dir, "spark-scale", result)
    tables = [_table(result)]
    print_tables(tables)
    write_results(out_dir, "spark-scale", "python -m benchmarks spark-scale", command, result, tables,
                  update_benchmarks, benchmarks_file)


def _measured(rows: str, verifiers: str, master: str, directory: Path, seed: int,
              values: str = "cents") -> tuple[dict[str, Any], str]:
    from benchmarks.spark_scale import VALUES, run

    try:
        sizes = [int(x) for x in rows.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--rows {rows!r} is not a list of integers", "pass e.g. --rows 1000000,10000000") from None
    if len(sizes) < 2 or min(sizes) < 1000:
        raise UserError("--rows needs two sizes or more, each ≥ 1000", "pass e.g. --rows 1000000,10000000")
    names = split_list(verifiers, ("grubbs", "lof", "histogram", "zscore"), "--verifiers") or ()
    if values not in VALUES:
        raise UserError(f"--values {values!r} is not one of {', '.join(VALUES)}", "pass --values cents or --values fine")
    command = command_line("spark-scale", [
        ("--rows", rows, "1000000,10000000"), ("--verifiers", verifiers, "grubbs,lof"),
        ("--master", master, "local[2]"), ("--dir", str(directory), "/tmp"), ("--seed", seed, 7),
        ("--values", values, "cents"),
    ])
    result = run(sizes, names, directory, master, seed, progress_reporter(), values)
    result["command"] = command
    return result, command


def _laid_out(path: Path) -> tuple[dict[str, Any], str]:
    """A saved result, with a header naming the run that measured it and this layout."""
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
        runs = result["runs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"--from-json: {path} is not a spark-scale.json ({exc.__class__.__name__})",
                        "name the spark-scale.json an earlier run wrote") from None
    # Results saved before the command was recorded: rebuild it from what the run measured.
    measured = result.get("command") or command_line("spark-scale", [
        ("--rows", ",".join(str(n) for n in dict.fromkeys(r["rows"] for r in runs)), "1000000,10000000"),
        ("--verifiers", ",".join(dict.fromkeys(r["verifier"] for r in runs)), "grubbs,lof"),
        ("--master", result.get("master", "local[2]"), "local[2]"),
    ])
    result["sources"] = [source_of(result, measured)]
    return result, command_line("spark-scale", [("--from-json", str(path), None)])


def _table(result: dict[str, Any]) -> Any:
    from benchmarks.scale_goals import load_text
    from benchmarks.tables import make_table, seconds

    def versus_sort(r: dict[str, Any]) -> str:
        sort = r.get("spark_sort")  # runs saved before the sort was measured have none
        if not sort:
            return "—"
        loads = [x for x in (sort.get("load"), r["spark"].get("load")) if x is not None]
        return (f"{r['spark']['seconds'] / sort['seconds']:.2f}× of {seconds(sort['seconds'])} "
                f"({load_text((min(loads), max(loads)) if loads else None)})")

    rows = [
        (f"{r['rows']:,}", r["verifier"], seconds(r["duckdb"]["seconds"]), seconds(r["spark"]["seconds"]),
         versus_sort(r), f"{r['spark']['rows_pulled']:,}", str(r["spark"]["queries"]),
         "yes" if r["same_context"] else "NO")
        for r in result["runs"]
    ]
    return make_table(
        f"One release (BFS, ε = 0.2, seed 7, 1,200 cells, amounts {result.get('values', 'cents')}): DuckDB vs Spark",
        ("rows", "verifier", "DuckDB (embedded)", f"Spark {result['master']}", "Spark / Spark's sort of the metric",
         "rows to the Spark driver", "Spark queries", "same context"),
        rows,
        (f"Times are one fresh release each (a new Session: schema, record, per-cell summary, search, ledger); "
         f"Spark's session start ({seconds(result['spark_start_s'])}) is not included.",
         "Spark's sort: `SELECT amount FROM parquet.`…` ORDER BY amount` run to the end into Spark's no-op sink, "
         "measured just before the Spark release; the ratio carries the 1-minute load read before both.",
         "Rows to the driver: the record, one row per cell (the summary) and, for LOF/histogram, the per-cell "
         "windows around the record's value; DuckDB reads in-process (LOF: every row's value)."),
    )
