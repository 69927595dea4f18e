"""`pcor-sql budget status|history|set-limit`: the privacy budget ledger of a database file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from pcor_sql.cli import options as o
from pcor_sql.cli.console import make_warn, stdout_console, write_line
from pcor_sql.cli.database import open_database
from pcor_sql.cli.render import json_text, print_table
from pcor_sql.errors import UserError

app = typer.Typer(
    name="budget",
    help="The privacy budget ledger of a database file: spent ε, limits, release history.",
    short_help="The budget ledger: status, history, set-limit.",
)

Format = Annotated[o.DataFormat, typer.Option("--format", help="table or json (JSON Lines).")]


def _require(db: Path | None) -> Path:
    if db is None:
        raise UserError(
            "budget commands need --db FILE (an in-memory ledger is empty and is lost when the process ends)",
            "pass the database file the releases are charged to: --db FILE",
        )
    return db


def _ledger(con: Any):
    from pcor_sql.engine.ledger import Ledger

    return Ledger(con, warn=make_warn())


def _limit(value: float | None) -> str:
    return "none" if value is None else f"{value:.6g}"


@app.command("status")
def status(
    dataset: Annotated[
        Optional[str], typer.Argument(help="One dataset (default: every dataset in the ledger).", show_default=False)
    ] = None,
    db: o.Db = None,
    fmt: Format = o.DataFormat.table,
) -> None:
    """Spent ε, limit and remaining budget per dataset.

    \b
    Example:
        pcor-sql budget status --db salaries.duckdb
    """
    with open_database(_require(db)) as con:
        ledger = _ledger(con)
        found = (ledger.status(dataset),) if dataset is not None else ledger.status()
    rows = [
        {"dataset": s.dataset, "limit": s.limit, "spent": s.spent, "remaining": s.remaining, "releases": s.releases}
        for s in found
    ]
    if fmt is o.DataFormat.json:
        for row in rows:
            write_line(json_text(row))
        return
    print_table(
        stdout_console(),
        ["dataset", "limit ε", "spent ε", "remaining ε", "releases"],
        [[r["dataset"], _limit(r["limit"]), f"{r['spent']:.6g}", _limit(r["remaining"]), str(r["releases"])] for r in rows],
    )


@app.command("history")
def history(
    dataset: Annotated[
        Optional[str], typer.Argument(help="One dataset (default: every dataset).", show_default=False)
    ] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", metavar="N", help="Only the N most recent releases.")] = None,
    db: o.Db = None,
    fmt: Format = o.DataFormat.table,
) -> None:
    """The charged releases, oldest first: time, mechanism, ε, record, statement.

    \b
    Example:
        pcor-sql budget history salaries --db salaries.duckdb --format json
    """
    with open_database(_require(db)) as con:
        records = _ledger(con).history(dataset, limit=limit)
    if fmt is o.DataFormat.json:
        for r in records:
            write_line(json_text({
                "release_id": r.release_id, "dataset": r.dataset, "seq": r.seq, "released_at": r.released_at,
                "mechanism": r.mechanism, "epsilon": r.epsilon, "record_key": r.record_key,
                "statement": r.statement, "spent_after": r.spent_after,
            }))
        return
    print_table(
        stdout_console(),
        ["dataset", "#", "released at (UTC)", "mechanism", "ε", "spent after", "record", "statement"],
        [
            [r.dataset, str(r.seq), r.released_at.isoformat(sep=" ", timespec="seconds"), r.mechanism,
             f"{r.epsilon:.6g}", f"{r.spent_after:.6g}", r.record_key or "", r.statement or ""]
            for r in records
        ],
    )


@app.command("set-limit")
def set_limit(
    dataset: Annotated[str, typer.Argument(help="Ledger name of the dataset (as --dataset names it).", show_default=False)],
    epsilon: Annotated[float, typer.Argument(help="The new limit of total ε (> 0).", show_default=False)],
    db: o.Db = None,
    fmt: Format = o.DataFormat.table,
) -> None:
    """Set a dataset's ε limit; releases that would exceed it are refused.

    \b
    Example:
        pcor-sql budget set-limit salaries 1.0 --db salaries.duckdb
    """
    from pcor_sql.engine.dataset_key import dataset_key

    warn = make_warn()
    with open_database(_require(db)) as con:
        ledger = _ledger(con)
        change = ledger.set_limit(dataset, epsilon)
        releases = ledger.status(dataset).releases
    if releases == 0 and "#" not in dataset:
        warn(
            f"no release has been charged to {dataset!r} yet: releases count against it only when they "
            f"name it (--dataset {dataset}); by default a release of table {dataset} is charged to "
            f"{dataset_key(dataset)!r}"
        )
    if change.below_spent:
        warn(f"the new limit is below the ε already spent ({change.spent:.6g}): no release fits until it is raised")
    if fmt is o.DataFormat.json:
        write_line(json_text({
            "dataset": change.dataset, "limit": change.limit, "previous_limit": change.previous_limit,
            "spent": change.spent, "below_spent": change.below_spent,
        }))
        return
    stdout_console().print(
        f"budget limit of {change.dataset!r} set to ε = {change.limit:.6g} "
        f"(was {_limit(change.previous_limit)}; spent {change.spent:.6g})",
        markup=False,
    )
