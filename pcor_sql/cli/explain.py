"""`pcor-sql explain-outlier`: one private release per selected record."""

from __future__ import annotations

from typing import Annotated, List, Optional

import typer

from pcor_sql.core.start import DEFAULT_DESCENTS

from pcor_sql.cli import parameters as o
from pcor_sql.cli.console import ProgressBar
from pcor_sql.cli.database import open_owner
from pcor_sql.cli.render import print_explanations

# The ordinal attributes' bins (the lead regenerates the flags from a spec table; until then
# coe and dataset add share this one).
BinsFlag = Annotated[
    Optional[List[str]],
    typer.Option(
        "--bins", metavar="ATTR=E1,E2,...",
        help="Bin a numeric or date attribute into ranges, e.g. age=18,25,35,45,55,65,81 (bins [18, 25), ..., "
        "the last closed; -inf/inf allowed at the ends; repeatable). age=auto:5 takes quantiles of the data "
        "(a privacy warning says what leaks).",
    ),
]


def bins_option(texts: list[str] | None) -> dict | None:
    """`--bins` flags as a request's `bins` (None when not given)."""
    from pcor_sql.frontend.compact import parse_bins_declarations

    return parse_bins_declarations(texts) if texts else None


def explain_outlier(
    query: Annotated[
        str, typer.Argument(help="SELECT <metric> FROM <relation> WHERE <record selector>", show_default=False)
    ],
    by: o.By = None,
    domain: o.Domain = None,
    bins: BinsFlag = None,
    epsilon: Annotated[float, typer.Option("--epsilon", help="Total privacy cost ε of each release (> 0).")] = 0.2,
    search: Annotated[
        Optional[str],
        typer.Option("--search", help="direct, uniform, random-walk, dfs, bfs or explore (default: bfs).",
                     show_default=False),
    ] = None,
    samples: Annotated[
        Optional[int],
        typer.Option("--samples", help="Samples n of the search (default: the search's own; 50, explore 10,000).",
                     show_default=False),
    ] = None,
    verifier: o.Verifier = "lof",
    verifier_option: o.VerifierOption = None,
    utility: o.Utility = "population",
    start: o.Start = None,
    accounting: Annotated[
        str, typer.Option("--accounting", help="tight (monotone utility) or paper (the paper's 2ε1 rules).")
    ] = "tight",
    seed: o.Seed = None,
    dataset: o.Dataset = None,
    owner_view: o.OwnerView = False,
    max_contexts: o.MaxContexts = None,
    descents: Annotated[
        int,
        typer.Option(
            "--descents",
            help="bfs: validity-only random descents from the full context that seed the frontier "
            "(free under OCDP; 0 = the paper's Algorithm 5).",
        ),
    ] = DEFAULT_DESCENTS,
    search_option: o.SearchOption = None,
    db: o.Db = None,
    engine: o.Engine = o.EngineName.duckdb,
    spark_master: o.SparkMaster = "local[*]",
    ledger: o.Ledger = None,
    allow_seeded: o.AllowSeeded = False,
    fmt: Annotated[
        o.ExplainFormat,
        typer.Option("--format", help="table, json (one object per record) or sql (the explanation query)."),
    ] = o.ExplainFormat.table,
) -> None:
    """Release, under ε-differential privacy (OCDP), a context in which the record is an outlier.

    \b
    Example:
        pcor-sql explain-outlier "SELECT salary FROM salaries WHERE id = 42" --epsilon 0.2

    Each selected record is one release, charged ε to every table or file the query reads, in
    the budget ledger (of the --db file, else --ledger / the per-user ledger), before the search
    runs; if anything fails after that (even printing), the release has still been charged.
    """
    from pcor_sql.api import explain_outliers

    options = o.outlier_options(
        by=by, domain=domain, verifier=verifier, verifier_option=verifier_option, max_contexts=max_contexts,
        epsilon=epsilon, search=search, samples=samples, utility=utility, start=start, accounting=accounting,
        seed=seed, dataset=dataset, owner_view=owner_view, descents=descents, search_option=search_option,
        bins=bins_option(bins),
    )
    with ProgressBar("reading the data") as bar, open_owner(
        db, ledger, allow_seeded=allow_seeded, engine=engine.value, spark_master=spark_master
    ) as owner:
        results = explain_outliers(None, query, session=owner.session, progress=bar.callback, **options)
    print_explanations(results, fmt.value)
