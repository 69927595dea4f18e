"""`pcor-sql explain-outlier`: one private release per selected record. Its release options are
generated from their specs (`parameters.spec_options`); this file adds only what is the CLI's."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from pcor_sql.cli import parameters as o
from pcor_sql.cli.console import ProgressBar
from pcor_sql.cli.data_options import DataFlags, data_options
from pcor_sql.cli.render import print_explanations
from pcor_sql.request_specs import Job

# The ordinal attributes' bins (the lead regenerates the flags from a spec table; until then
# coe and dataset add share this one).
@o.spec_options(Job.EXPLAIN)
@data_options()
def explain_outlier(
    query: Annotated[
        str, typer.Argument(help="SELECT <metric> FROM <relation> WHERE <record selector>", show_default=False)
    ],
    verifier_option: o.VerifierOption = None,
    search_option: o.SearchOption = None,
    max_records: o.MaxRecords = 1,
    data: DataFlags = None,  # --db, --engine, --spark-master, --ledger, --allow-seeded
    fmt: Annotated[
        o.ExplainFormat,
        typer.Option("--format", help="table, json (one object per record) or sql (the explanation query)."),
    ] = o.ExplainFormat.table,
    options: Any = None,
) -> None:
    """Release, under ε-differential privacy (OCDP), a context in which the record is an outlier.

    \b
    Example:
        pcor-sql explain-outlier "SELECT salary FROM salaries WHERE id = 42" --epsilon 0.2

    Each selected record is one release, charged ε to every table or file the query reads, in
    the budget ledger (of the --db file, else --ledger / the per-user ledger), before the search
    runs; if anything fails after that (even printing), the release has still been charged.
    """
    options = o.outlier_options(options or {}, verifier_option=verifier_option, search_option=search_option)
    with ProgressBar("reading the data") as bar, data.owner(query) as owner:
        results = owner.explain_outliers(query, progress=bar.callback, max_records=o.positive_count(max_records, '--max-records'), **options)
    print_explanations(results, fmt.value)
