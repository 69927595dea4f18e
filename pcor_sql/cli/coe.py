"""`pcor-sql coe`: the data owner's exact list of a record's valid contexts. NOT a private
release: nothing here is charged to the ledger, and none of it may be published."""

from __future__ import annotations

import csv
import io
import sys
from typing import Annotated, Any, Optional

import typer
from rich.text import Text

from pcor_sql.cli import options as o
from pcor_sql.cli.console import ProgressBar, make_warn, stdout_console, write_line
from pcor_sql.cli.database import open_session
from pcor_sql.cli.render import context_lines, json_text, number, record_text

TABLE_DEFAULT_LIMIT = 20
_LABEL = "OWNER ONLY — NOT FOR RELEASE"


def coe(
    query: Annotated[
        str, typer.Argument(help="SELECT <metric> FROM <relation> WHERE <record selector>", show_default=False)
    ],
    by: o.By = None,
    domain: o.Domain = None,
    verifier: o.Verifier = "lof",
    verifier_option: o.VerifierOption = None,
    utility: o.Utility = "population",
    start: o.Start = None,
    max_contexts: o.MaxContexts = None,
    limit: Annotated[
        Optional[int],
        typer.Option(
            "--limit", metavar="N",
            help=f"Show the N contexts of largest utility (table default {TABLE_DEFAULT_LIMIT}; json/csv: all).",
        ),
    ] = None,
    db: o.Db = None,
    engine: o.Engine = o.EngineName.duckdb,
    spark_master: o.SparkMaster = "local[*]",
    fmt: Annotated[
        o.CoeFormat, typer.Option("--format", help="table, json (JSON Lines, one valid context per line) or csv.")
    ] = o.CoeFormat.table,
) -> None:
    """The owner's exact enumeration COE(D, V) of a record's valid contexts, largest utility first.

    \b
    Example:
        pcor-sql coe "SELECT salary FROM salaries WHERE id = 42" --by job_title,year --verifier grubbs --format json

    Owner-only: exact utilities and population sizes are private; this is not a differentially
    private release and is not charged to the budget ledger. A summary line goes to stderr.
    """
    from pcor_sql.api import coe as enumerate_coe

    o.positive_count(limit, "--limit")
    options = o.outlier_options(
        by=by, domain=domain, verifier=verifier, verifier_option=verifier_option, max_contexts=max_contexts,
        utility=utility, start=start,
    )
    shown = limit if limit is not None or fmt is not o.CoeFormat.table else TABLE_DEFAULT_LIMIT
    with open_session(db, engine.value, spark_master, make_warn()) as session, ProgressBar("checking contexts") as bar:
        results = enumerate_coe(None, query, session=session, progress=bar.callback, **options)
        # Ranked before any output, so a failure prints nothing; only the shown ones are rendered.
        ranked = [(result, result.ranked(shown)) for result in results]
    for result, _ in ranked:
        sys.stderr.write(_summary(result) + "\n")
    if fmt is o.CoeFormat.json:
        for result, contexts in ranked:
            for c in contexts:
                write_line(json_text({
                    "record": result.record, "context": c.context, "predicate": c.predicate,
                    "utility": c.utility, "not_for_release": True,
                }))
    elif fmt is o.CoeFormat.csv:
        _write_csv(ranked)
    else:
        _print_tables(ranked)


def _summary(result: Any) -> str:
    return (
        f"coe: {_LABEL}: record {record_text(result.record)}: {result.size:,} valid of "
        f"{result.admissible:,} admissible contexts, largest utility {number(result.max_utility)} "
        f"({result.verifier}, utility {result.utility})"
    )


def _write_csv(ranked: list[tuple[Any, list[Any]]]) -> None:
    attributes: list[str] = []
    for _, contexts in ranked:
        for c in contexts:
            attributes.extend(a for a in c.context if a not in attributes)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["record", "utility", "predicate", *attributes])
    for result, contexts in ranked:
        record = json_text(result.record)
        for c in contexts:
            values = ["|".join(_compact(v) for v in c.context.get(a, [])) for a in attributes]
            writer.writerow([record, _plain_number(c.utility), c.predicate, *values])
    sys.stdout.write(buffer.getvalue())


def _plain_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _compact(value: Any) -> str:
    """A value in the `--domain` form: quoted when it holds | ; = ' or outer spaces."""
    text = str(value)
    if text != text.strip() or any(c in text for c in "|;='"):
        return "'" + text.replace("'", "''") + "'"
    return text


def _print_tables(ranked: list[tuple[Any, list[Any]]]) -> None:
    console = stdout_console()
    for i, (result, contexts) in enumerate(ranked):
        if i:
            console.print()
        console.print(Text(_LABEL, style="bold red"))
        console.print(Text(f"Valid contexts of record {record_text(result.record)}", style="bold"))
        console.print(Text(
            f"  {result.size:,} valid of {result.admissible:,} admissible contexts; largest utility "
            f"{number(result.max_utility)}; {result.verifier}; utility {result.utility}"
        ))
        for rank, c in enumerate(contexts, start=1):
            console.print(Text(f"#{rank}  utility {number(c.utility)}", style="bold"))
            for line in context_lines(c.context):
                console.print(line)
        if result.size > len(contexts):
            console.print(Text(f"… {result.size - len(contexts):,} more (use --limit N or --format json)", style="dim"))
