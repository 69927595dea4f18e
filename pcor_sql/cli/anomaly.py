"""`pcor-sql identify-anomaly`: private answers to "is this record a (β, r)-anomaly?"."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from pcor_sql.cli import parameters as o
from pcor_sql.cli.charged_output import check_stdout, show_charged
from pcor_sql.cli.console import ProgressBar
from pcor_sql.cli.data_options import DataFlags, data_options
from pcor_sql.cli.render import print_answers
from pcor_sql.request_specs import Job


@o.spec_options(Job.IDENTIFY)
@data_options()
def identify_anomaly(
    query: Annotated[
        str,
        typer.Argument(help="SELECT <column(s)> FROM <relation> [WHERE <selector>] (no WHERE: every row).", show_default=False),
    ],
    max_records: o.MaxRecords = 1,
    workers: o.Workers = 1,
    data: DataFlags = None,  # --db, --engine, --spark-master, --ledger, --allow-seeded
    fmt: Annotated[
        o.RowsFormat, o.choice(o.RowsFormat, "--format", help="table, json (one document: a list), jsonl (one object per "
                                                    "answered row and line) or csv (flat columns).")
    ] = o.RowsFormat.table,
    options: dict[str, Any] | None = None,
) -> None:
    """Answer, with a randomized bit, whether each selected record is a (β, r)-anomaly.

    \b
    Example:
        pcor-sql identify-anomaly "SELECT victim_age FROM homicides WHERE id = 7" --beta 5 --radius 1 --epsilon 0.5

    Each answered record costs ε (sequential composition: n rows cost n·ε), charged to the
    budget ledger before anything is printed; if stdout fails, the answers go to stderr as JSON.
    """
    options = dict(options or {})
    for required in ("beta", "radius", "epsilon"):
        if required not in options:
            raise typer.BadParameter(f"Missing option '--{required}'.")
    check_stdout()  # before the charge: a closed stdout would lose the answers
    with ProgressBar("reading the data") as bar, data.owner(query) as owner:
        answers = owner.identify_anomalies(query, progress=bar.callback, max_records=o.positive_count(max_records, '--max-records'), workers=workers, **options)
    show_charged(answers, lambda: print_answers(answers, fmt.value, bool(options.get("owner_view"))))
