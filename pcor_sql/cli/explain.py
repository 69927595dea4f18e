"""`pcor-sql explain-outlier`: one private release per selected record. Its release options are
generated from their specs (`parameters.spec_options`); this file adds only what is the CLI's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from pcor_sql.cli import parameters as o
from pcor_sql.cli.charged_output import batch_exit, check_plot_target, check_stdout, draw_charged, show_charged
from pcor_sql.cli.console import ProgressBar
from pcor_sql.cli.data_options import DataFlags, data_options
from pcor_sql.cli.render import print_explanations
from pcor_sql.plots import require_pyplot
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
    workers: o.Workers = 1,
    data: DataFlags = None,  # --db, --engine, --spark-master, --ledger, --allow-seeded
    fmt: Annotated[
        o.ReleaseFormat,
        o.choice(o.ReleaseFormat, "--format", help="table, json (one document: a list, one object per record), jsonl (one "
                                      "object per line), csv (flat columns) or sql (the explanation query)."),
    ] = o.ReleaseFormat.table,
    plot: Annotated[
        Optional[Path],
        typer.Option("--plot", metavar="FILE.png", help="Also draw the record against its released context and the "
                                                         "whole table (owner only: NOT FOR RELEASE; needs the plot extra); "
                                                         "several records: FILE-1.png, FILE-2.png, ..."),
    ] = None,
    options: dict[str, Any] | None = None,
) -> None:
    """Release, under ε-differential privacy (OCDP), a context in which the record is an outlier.

    \b
    Example:
        pcor-sql explain-outlier "SELECT salary FROM salaries WHERE id = 42" --epsilon 0.2

    Each selected record is one release, charged ε to every table or file the query reads, in
    the budget ledger (of the --db file, else --ledger / the per-user ledger), before the search
    runs. The outputs (stdout, --plot) are checked before the charge; a release that was charged
    is printed before anything else can fail (if stdout fails, it goes to stderr as JSON).

    \b
    Exit codes: 0 every record released; 3 some records of a batch not released (each is
    said on its own line, with its key and reason; an owner's failed record is not charged);
    2 bad input, or the one record could not be released; 1 internal error; 130 interrupted.
    """
    if plot is not None:
        require_pyplot()  # before anything is charged: a missing extra must not cost a release
        check_plot_target(plot)
    check_stdout()
    options = o.outlier_options(options or {}, verifier_option=verifier_option, search_option=search_option)
    with ProgressBar("reading the data") as bar, data.owner(query) as owner:
        results = owner.explain_outliers(query, progress=bar.callback, workers=workers,
                                         max_records=o.positive_count(max_records, '--max-records'), **options)
        bar.stop()
        # Charged from here: shown first, whatever fails after.
        show_charged(results, lambda: print_explanations(results, fmt.value))
        drawn = draw_charged(results, plot) if plot is not None else []  # reads the data: the connection is open
    for path in drawn:
        sys.stderr.write(f"drew {path} (NOT FOR RELEASE: it shows the data)\n")
    batch_exit(results)
