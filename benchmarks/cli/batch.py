"""`python -m benchmarks batch`: `explain_outliers` of 40 and 400 records with workers=1, 2
(DESIGN.md §10 "Seeded batches"). The work is in `benchmarks.batch`; this module parses options and prints."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from benchmarks.cli.bench import DEFAULT_OUT, command_line, save_raw
from pcor_sql.errors import UserError


def _counts(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise UserError(f"{flag} takes whole numbers ≥ 1 separated by commas, got {text!r}", f"pass e.g. {flag} 1,2")
    return values


def batch(
    rows: Annotated[str, typer.Option("--rows", metavar="N,M", help="Rows of the generated tables.")] = "1000000",
    records: Annotated[str, typer.Option("--records", metavar="N,M", help="Records per batch.")] = "40,400",
    workers: Annotated[str, typer.Option("--workers", metavar="N,M", help="Worker counts; the first should be 1 "
                                                                           "(every ratio is against it).")] = "1,2",
    seed: Annotated[int, typer.Option("--seed", help="The batches' seed (the same outputs for any worker count).")] = 1,
    workdir: Annotated[
        Path, typer.Option("--workdir", metavar="DIR", help="Where the generated tables are kept between runs.")
    ] = Path("/tmp/pcor-scale"),
    out_dir: Annotated[Path, typer.Option("--out-dir", metavar="DIR", help="Where batch.json goes.")] = DEFAULT_OUT,
) -> None:
    """Time explain_outliers (BFS + LOF, ε = 0.2, n = 50, seeded) of N records on a fresh
    Session with each worker count, each run in its own process, and print each time against
    workers=1 measured in the same run, with the peak memory of the process and its workers
    (the sum of PSS: shared pages counted once; and of RSS: counted per process).

    \b
    Example:
        python -m benchmarks batch --rows 1000000,10000000 --records 40,400 --workers 1,2
    """
    from benchmarks.batch import run_batch, table

    n_rows, n_records, n_workers = (_counts(rows, "--rows"), _counts(records, "--records"),
                                    _counts(workers, "--workers"))
    command = command_line("batch", [("--rows", rows, "1000000"), ("--records", records, "40,400"),
                                     ("--workers", workers, "1,2"), ("--seed", seed, 1)])
    result = run_batch(n_rows, n_records, n_workers, seed, workdir, lambda m: sys.stderr.write(m + "\n"))
    result["command"] = command
    save_raw(out_dir, "batch", result)
    machine = result["machine"]
    print(f"{command}\nmachine: {machine}; 1-minute load {result['load']['start']} at the start, "
          f"{result['load']['end']} at the end")
    print("\n".join(table(result)))
