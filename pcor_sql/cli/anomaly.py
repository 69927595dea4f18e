"""`pcor-sql identify-anomaly`: private answers to "is this record a (β, r)-anomaly?"."""

from __future__ import annotations

from typing import Annotated

import typer

from pcor_sql.cli import parameters as o
from pcor_sql.cli.console import ProgressBar
from pcor_sql.cli.database import open_owner
from pcor_sql.cli.render import print_answers


def identify_anomaly(
    query: Annotated[
        str,
        typer.Argument(help="SELECT <column(s)> FROM <relation> [WHERE <selector>] (no WHERE: every row).", show_default=False),
    ],
    beta: Annotated[
        float,
        typer.Option("--beta", help="β: a record is an anomaly when at most β records lie within the radius.", show_default=False),
    ],
    radius: Annotated[
        float,
        typer.Option("--radius", help="r: the ball radius (|a − b|, or --norm for several columns).", show_default=False),
    ],
    epsilon: Annotated[float, typer.Option("--epsilon", help="Privacy cost ε of each answer (> 0).", show_default=False)],
    privacy: Annotated[
        str, typer.Option("--privacy", help="sp: (ε, k)-sensitive privacy; dp: ε-differential privacy.")
    ] = "sp",
    k: Annotated[int, typer.Option("--k", help="k of (ε, k)-sensitive privacy, 1 ≤ k ≤ β + 1.")] = 1,
    norm: Annotated[str, typer.Option("--norm", help="l1, l2 or linf, for several columns.")] = "l2",
    seed: o.Seed = None,
    dataset: o.Dataset = None,
    owner_view: o.OwnerView = False,
    db: o.Db = None,
    engine: o.Engine = o.EngineName.duckdb,
    spark_master: o.SparkMaster = "local[*]",
    ledger: o.Ledger = None,
    allow_seeded: o.AllowSeeded = False,
    fmt: Annotated[
        o.DataFormat, typer.Option("--format", help="table or json (JSON Lines, one object per answered row).")
    ] = o.DataFormat.table,
) -> None:
    """Answer, with a randomized bit, whether each selected record is a (β, r)-anomaly.

    \b
    Example:
        pcor-sql identify-anomaly "SELECT victim_age FROM homicides WHERE id = 7" --beta 5 --radius 1 --epsilon 0.5

    Each answered record costs ε (sequential composition: n rows cost n·ε), charged to the
    budget ledger before anything is printed; if printing fails, the answers were charged.
    """
    from pcor_sql.api import identify_anomalies

    with ProgressBar("reading the data") as bar, open_owner(
        db, ledger, allow_seeded=allow_seeded, engine=engine.value, spark_master=spark_master
    ) as owner:
        answers = identify_anomalies(
            None, query, session=owner.session, progress=bar.callback, beta=beta, radius=radius, epsilon=epsilon,
            privacy=privacy, k=k, norm=norm, seed=seed, dataset=dataset, owner_view=owner_view,
        )
    print_answers(answers, fmt.value, owner_view)
