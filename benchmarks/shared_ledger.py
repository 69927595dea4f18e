"""Several `pcor-sql serve` processes on one PostgreSQL ledger (DESIGN.md §11 "Several
services, one ledger"), for the `ledger-services` benchmark and the tests with real processes:
a data file registered against a PostgreSQL ledger, its copies (one per host), and a service on
each copy started with `--db COPY --ledger URL`.

A copy of the file carries the file's marker naming the ledger (DESIGN.md §11 "One data file,
one ledger"), so every copy is served from the one ledger; each copy's content is checked
against the registered fingerprint when its service starts.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence

import duckdb

from benchmarks.service_process import ServedProcess, start

DATASET = "staff"


def make_data(path: Path, rows: int, outliers: int = 24) -> None:
    """A DuckDB file with table `staff` (id, dept, year, pay): `outliers` planted outliers first."""
    con = duckdb.connect(str(path))
    try:
        con.execute("CREATE TYPE dept AS ENUM ('a', 'b', 'c', 'd'); CREATE TYPE yr AS ENUM ('2020', '2021', '2022')")
        con.execute(
            f"CREATE TABLE staff AS SELECT i AS id, (['a', 'b', 'c', 'd'])[i % 4 + 1]::dept AS dept,"
            f" (['2020', '2021', '2022'])[i % 3 + 1]::yr AS year,"
            f" CASE WHEN i < {outliers} THEN 9000.0 + i ELSE 100.0 + (hash(i) % 1000) / 10.0 END AS pay"
            f" FROM range({rows}) t(i)")
    finally:
        con.close()


def register(path: Path, ledger: str, *, analysts: int, limit: float | None, quota: float | None = None,
             releasable: Sequence[int] = tuple(range(24))) -> dict[str, str]:
    """Register `staff` of the file at `path` in `ledger` (a URL, or None: the file's own), with
    `limit` per notion on its unit, and name `analysts` analysts; their tokens by name."""
    import pcor_sql

    con = duckdb.connect(str(path))
    try:
        owner = pcor_sql.Owner(con, ledger, warn=lambda message: None)
        try:
            owner.register(DATASET, "staff", key="id", metric="pay", by="dept,year", limit=limit,
                           releasable=list(releasable))
            return {f"analyst{i}": owner.add_analyst(f"analyst{i}", quota=quota) for i in range(analysts)}
        finally:
            owner.ledger.close()  # before the file: a service opens it next
    finally:
        con.close()


def copies(path: Path, count: int) -> list[Path]:
    """`count` copies of the data file beside it (one per host)."""
    out = []
    for i in range(count):
        copy = path.with_name(f"{path.stem}-host{i}{path.suffix}")
        shutil.copyfile(path, copy)
        out.append(copy)
    return out


def serve_all(files: Sequence[Path], ledger: str | None, *, workers: int = 2, args: Sequence[str] = (),
              env: dict[str, str] | None = None) -> list[ServedProcess]:
    """A `pcor-sql serve` on each file (with `--ledger URL` when given); all stopped if one fails."""
    started: list[ServedProcess] = []
    try:
        for file in files:
            extra = ["--ledger", ledger] if ledger else []
            started.append(start(file, args=[*extra, "--workers", str(workers), *args], env=env))
    except BaseException:
        for service in started:
            service.stop()
        raise
    return started
