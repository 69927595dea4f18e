"""`pcor-sql coe`: the data owner's exact list of a record's valid contexts. NOT a private
release: nothing here is charged to the ledger, and none of it may be published."""

from __future__ import annotations

import csv
import json
import sys
from typing import Annotated, Any, Callable, Optional

import typer
from rich.text import Text

from pcor_sql.cli import parameters as o
from pcor_sql.cli.console import ProgressBar, stdout_console
from pcor_sql.cli.data_options import DataFlags, data_options
from pcor_sql.cli.render import JsonOut, context_lines, json_text, number, record_text
from pcor_sql.request_specs import Job

TABLE_DEFAULT_LIMIT = 20
_LABEL = "OWNER ONLY — NOT FOR RELEASE"
#: The release options that shape a COE (the rest choose how a release samples from it).
COE_OPTIONS = ("by", "domains", "bins", "verifier", "utility", "start", "max_contexts")


@o.spec_options(Job.EXPLAIN, only=COE_OPTIONS)
@data_options(charged=False)
def coe(
    query: Annotated[
        str, typer.Argument(help="SELECT <metric> FROM <relation> WHERE <record selector>", show_default=False)
    ],
    verifier_option: o.VerifierOption = None,
    limit: Annotated[
        Optional[int],
        typer.Option(
            "--limit", metavar="N",
            help=f"Show the N contexts of largest utility (table default {TABLE_DEFAULT_LIMIT}; json/csv: all).",
        ),
    ] = None,
    data: DataFlags = None,  # --db, --engine, --spark-master
    fmt: Annotated[
        o.CoeFormat, o.choice(o.CoeFormat, "--format", help="table, json (one document: a list of valid contexts), jsonl (one valid context per line) or csv.")
    ] = o.CoeFormat.table,
    options: dict[str, Any] | None = None,
) -> None:
    """The owner's exact enumeration COE(D, V) of a record's valid contexts, largest utility first.

    \b
    Example:
        pcor-sql coe "SELECT salary FROM salaries WHERE id = 42" --by job_title,year --verifier grubbs --format json

    Owner-only: exact utilities and population sizes are private; this is not a differentially
    private release and is not charged to the budget ledger. A summary line goes to stderr.
    """
    o.positive_count(limit, "--limit")
    options = o.outlier_options(options or {}, verifier_option=verifier_option)
    shown = limit if limit is not None or fmt is not o.CoeFormat.table else TABLE_DEFAULT_LIMIT
    with ProgressBar("reading the data") as bar, data.session(query) as owner:
        results = owner.coe(query, progress=bar.callback, **options)
    for result in results:
        sys.stderr.write(_summary(result) + "\n")
    if fmt is o.CoeFormat.table:
        # Only the shown contexts are rendered (a COE can hold millions).
        _print_tables([(result, result.ranked(shown)) for result in results])
        return
    # JSON and CSV stream: each context is rendered as it is written, so the first line
    # comes at once however large COE is (a failure midway leaves the lines before it).
    total = sum(min(r.size, shown) if shown is not None else r.size for r in results)
    with ProgressBar("writing contexts", when=not sys.stdout.isatty()) as bar:  # a bar amid lines on a terminal garbles them
        if fmt in (o.CoeFormat.json, o.CoeFormat.jsonl):
            _write_json(results, shown, _every(bar.callback, total), fmt.value)
        else:
            _write_csv(results, shown, _every(bar.callback, total))


def _summary(result: Any) -> str:
    return (
        f"coe: {_LABEL}: record {record_text(result.record)}: {result.size:,} valid of "
        f"{result.admissible:,} admissible contexts, largest utility {number(result.max_utility)} "
        f"({result.verifier}, utility {result.utility})"
    )


Tick = Callable[[], None]
_TICK_EVERY = 1000


def _every(callback: Callable[[int, int], None] | None, total: int) -> Tick:
    """A `tick()` per written context that reports to `callback` every thousand (and at the end)."""
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if callback is not None and (done % _TICK_EVERY == 0 or done == total):
            callback(done, total)

    return tick


def _write_json(results: list[Any], shown: int | None, tick: Tick, fmt: str) -> None:
    """One JSON object per valid context, in one list (json) or one a line (jsonl). The record
    is encoded once per result and each domain value once (`_values_json`): rendering a million
    contexts is the cost of this command."""
    with JsonOut(fmt) as out:
        for result in results:
            head = '{"record": ' + json_text(result.record) + ', "context": '
            encode = _values_json()
            for c in result.iter_ranked(shown):
                context = ", ".join(f"{json.dumps(a, ensure_ascii=False)}: {encode(v)}" for a, v in c.context.items())
                out.write(text=(
                    f"{head}{{{context}}}, \"predicate\": {json.dumps(c.predicate, ensure_ascii=False)}, "
                    f"\"utility\": {json_text(c.utility)}, \"not_for_release\": true}}"
                ))
                tick()


def _values_json() -> Callable[[list[Any]], str]:
    """A list of domain values as JSON text, each value converted (`json_text`) once."""
    seen: dict[tuple[type, Any], str] = {}

    def one(value: Any) -> str:
        try:
            key = (type(value), value)
            text = seen.get(key)
        except TypeError:
            return json_text(value)
        if text is None:
            text = seen[key] = json_text(value)
        return text

    return lambda values: "[" + ", ".join(one(v) for v in values) + "]"


def _write_csv(results: list[Any], shown: int | None, tick: Tick) -> None:
    """Flat columns, no JSON in a cell: the record's columns (`record.id`, ...), utility,
    predicate, then every context attribute (the same for every record of one request), its
    values joined with '|'."""
    attributes: list[str] = []
    columns: list[str] = []
    for result in results:
        columns.extend(k for k in result.record if k not in columns)
        best = result.best()
        if best is not None:
            attributes.extend(a for a in best.context if a not in attributes)
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow([*(f"record.{k}" for k in columns), "utility", "predicate", *attributes])
    for result in results:
        record = ["" if result.record.get(k) is None else str(result.record[k]) for k in columns]
        for c in result.iter_ranked(shown):
            values = ["|".join(_compact(v) for v in c.context.get(a, [])) for a in attributes]
            writer.writerow([*record, _plain_number(c.utility), c.predicate, *values])
            tick()


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
            for line in context_lines(c.context, c.ranges):
                console.print(line)
        if result.size > len(contexts):
            console.print(Text(f"… {result.size - len(contexts):,} more (use --limit N or --format json)", style="dim"))
