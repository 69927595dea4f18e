"""`pcor-sql coe` against `pcor_sql.coe` on one record, to check the command costs no more than
the call plus what it prints (issue 11: the CLI rendered a predicate for every valid context).

    python benchmarks/timeit_coe_cli.py            # salaries record 42, grubbs: 925,888 valid contexts

Prints, in seconds of wall time: the Python call alone (the same in-memory database the
command makes, datasets loaded, then `pcor_sql.coe`), the command with its default table (20
contexts shown), and the command with `--format json` — until its first line, and until all of
them are written (to /dev/null). Each command runs in a fresh process, as a user runs it.
"""

from __future__ import annotations

import subprocess
import sys
import time

import duckdb

import pcor_sql

QUERY = "SELECT salary FROM salaries WHERE id = 42"
ARGS = ["coe", QUERY, "--verifier", "grubbs"]


def python_call() -> tuple[float, int]:
    started = time.perf_counter()
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    [result] = pcor_sql.coe(con, QUERY, verifier="grubbs")
    return time.perf_counter() - started, result.size


def command(*extra: str) -> tuple[float, float]:
    """(seconds to the first line of stdout, seconds to the end) of `pcor-sql coe ...`."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pcor_sql", *ARGS, *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    first = None
    for _ in proc.stdout:
        if first is None:
            first = time.perf_counter() - started
    proc.wait()
    if proc.returncode:
        raise SystemExit(f"pcor-sql {' '.join(ARGS + list(extra))} failed with exit code {proc.returncode}")
    return first or 0.0, time.perf_counter() - started


def main() -> None:
    seconds, size = python_call()
    print(f"pcor_sql.coe (load + enumerate, {size:,} valid contexts): {seconds:.1f} s")
    _, table = command()
    print(f"pcor-sql coe (table, 20 shown): {table:.1f} s")
    first, end = command("--format", "json")
    print(f"pcor-sql coe --format json: first line {first:.1f} s, all {size:,} lines {end:.1f} s")


if __name__ == "__main__":
    main()
