"""`pcor-sql remote ...`: an analyst's requests to a data owner's service, from the shell.

    export PCOR_SQL_TOKEN=...            # the token `pcor-sql analyst add` printed for you
    export PCOR_SQL_URL=http://127.0.0.1:8000
    pcor-sql remote datasets
    pcor-sql remote explain-outlier salaries 42 --epsilon 0.2 --metric salary

Thin: every command is one call on the light client (`pcor_sql_client`, the same code as
`pcor_sql.connect` and `pcor-sql-remote`), and its words are the client's (`pcor_sql_client.text`):
this module only declares the options typer's way. No DuckDB file, no data and no DuckDB
import: an analyst needs none. Errors are one line and a non-zero exit, like every other command.
"""

from __future__ import annotations

import argparse
from typing import Annotated, Any, List, Optional

import typer
from pcor_sql_client.cli import EXPLAIN_OPTIONS, IDENTIFY_OPTIONS, analyst
from pcor_sql_client.text import (
    TOKEN_VARIABLE,
    URL_VARIABLE,
    answer_row,
    explanation_lines,
    key_value,
    me_rows,
    point,
    releasable_title,
    sql_line,
    table_rows,
)

from pcor_sql.cli import parameters as o
from pcor_sql.cli.console import stdout_console, write_line
from pcor_sql.cli.render import json_text, print_table

__all__ = ["app", "key_value", "point"]

app = typer.Typer(
    name="remote",
    help="An analyst's requests to a pcor-sql service (pcor-sql serve): datasets, cost, explain-outlier, "
    f"identify-anomaly, me, history. The token is read from ${TOKEN_VARIABLE}, the URL from --url or ${URL_VARIABLE}. "
    "The light client `pip install ./client` (pcor-sql-remote) runs the same commands without the rest of pcor-sql.",
    short_help="An analyst's requests to a pcor-sql service (token from $PCOR_SQL_TOKEN).",
)

Url = Annotated[
    Optional[str],
    typer.Option("--url", metavar="URL",
                 help=f"The service's URL, e.g. http://127.0.0.1:8000 (default ${URL_VARIABLE}).", show_default=False),
]
Format = Annotated[o.DataFormat, o.choice(o.DataFormat, "--format", help="table or json (JSON Lines).")]
#: The --url given before the command (`remote --url URL datasets`), set by the group's callback
#: on every invocation (None when not given), so one invocation never sees another's.
_BEFORE: dict[str, str | None] = {"url": None}


@app.callback()
def remote(url: Url = None) -> None:
    """An analyst's requests to a pcor-sql service; --url here or after the command."""
    _BEFORE["url"] = url


def _url(given: str | None) -> str | None:
    """The command's --url, else the one given before the command, else None ($PCOR_SQL_URL)."""
    return given if given is not None else _BEFORE["url"]
Dataset = Annotated[str, typer.Argument(help="A registered dataset (see `pcor-sql remote datasets`).", show_default=False)]
Epsilon = Annotated[float, typer.Option("--epsilon", help="Privacy cost ε of each answer.", show_default=False)]
Metric = Annotated[Optional[str], typer.Option("--metric", help="One of the dataset's metrics (default: its first).")]
Verifier = Annotated[Optional[str], typer.Option(
    "--verifier", metavar="SPEC", help="Outlier test with options, e.g. 'lof(k=10)' or grubbs.")]
Search = Annotated[Optional[str], typer.Option("--search", help="Search over contexts, e.g. explore.")]
Samples = Annotated[Optional[int], typer.Option("--samples", help="Samples of the search.")]
Utility = Annotated[Optional[str], typer.Option("--utility", help="population or overlap.")]
Start = Annotated[Optional[str], typer.Option(
    "--start", metavar="PREDICATE", help="Starting context, e.g. \"dept IN ('a', 'b')\".")]
By = Annotated[Optional[str], typer.Option(
    "--by", metavar="A,B", help="Context attributes among the dataset's (default: all of them).")]
Privacy = Annotated[Optional[str], typer.Option("--privacy", help="sp or dp.")]
K = Annotated[Optional[int], typer.Option("--k", help="k of (ε, k)-sensitive privacy.")]


def _rows(items: list[dict[str, Any]], fmt: o.DataFormat, title: str | None = None) -> None:
    if fmt is o.DataFormat.json:
        for item in items:
            write_line(json_text(item))
        return
    columns, rows = table_rows(items)
    print_table(stdout_console(), columns, rows, title=title)


@app.command("datasets", short_help="The registered datasets: key, metrics, attributes and their domains.")
def datasets(url: Url = None, fmt: Format = o.DataFormat.table) -> None:
    """The datasets an analyst may ask about, with their key, metrics, context attributes and
    frozen domains (public by registration).

    \b
    Example:
        pcor-sql remote datasets --url http://127.0.0.1:8000
    """
    with analyst(_url(url)) as remote:
        found = remote.datasets()
    _rows(found, fmt)


@app.command("me", short_help="Your quotas and what you have spent, per privacy notion.")
def me(url: Url = None, fmt: Format = o.DataFormat.table) -> None:
    """Your quotas and spent ε per privacy notion (never added across notions).

    \b
    Example:
        pcor-sql remote me --url http://127.0.0.1:8000
    """
    with analyst(_url(url)) as remote:
        found = remote.me()
    _rows([found] if fmt is o.DataFormat.json else me_rows(found), fmt)


@app.command("history", short_help="Your own requests: when, what, cost and outcome.")
def history(
    url: Url = None,
    limit: Annotated[Optional[int], typer.Option("--limit", metavar="N", min=1, max=1000,
                                                 help="The N most recent requests (default 100).")] = None,
    before: Annotated[Optional[str], typer.Option(
        "--before", metavar="RELEASE_ID", help="Only requests asked before this one (page backwards).")] = None,
    fmt: Format = o.DataFormat.table,
) -> None:
    """Your own requests, oldest first within the page, with their cost and outcome.

    \b
    Example:
        pcor-sql remote history --url http://127.0.0.1:8000 --limit 20 --format json
    """
    with analyst(_url(url)) as remote:
        found = remote.history(limit=limit, before=before)
    _rows(found, fmt)


@app.command("releasable-keys", short_help="The keys of a dataset you may ask about (public by registration).")
def releasable_keys(
    dataset: Dataset,
    url: Url = None,
    limit: Annotated[Optional[int], typer.Option("--limit", metavar="N", min=1, max=1000,
                                                 help="At most N keys (default 100).")] = None,
    offset: Annotated[Optional[int], typer.Option("--offset", metavar="M", min=0,
                                                  help="Skip the first M keys (page on with M + N).")] = None,
    fmt: Format = o.DataFormat.table,
) -> None:
    """The keys the data owner declared releasable for DATASET, in their frozen order: the
    records you may ask explain-outlier about.

    \b
    Example:
        pcor-sql remote releasable-keys salaries --limit 20 --url http://127.0.0.1:8000
    """
    with analyst(_url(url)) as remote:
        page = remote.releasable_keys(dataset, limit=limit, offset=offset)
    if fmt is o.DataFormat.json:
        write_line(json_text(page))
        return
    print_table(stdout_console(), ["key"], [[str(k)] for k in page["keys"]], title=releasable_title(page))


@app.command("cost", short_help="What a request would charge, nothing charged (keys: explain; --value: identify).")
def cost(
    dataset: Dataset,
    epsilon: Epsilon,
    keys: Annotated[Optional[List[str]], typer.Argument(help="The keys of an explain-outlier request.",
                                                        show_default=False)] = None,
    url: Url = None,
    metric: Metric = None, verifier: Verifier = None, search: Search = None, samples: Samples = None,
    utility: Utility = None, start: Start = None, by: By = None,
    value: Annotated[Optional[List[str]], typer.Option(
        "--value", metavar="METRIC=NUMBER", help="The point of an identify-anomaly request (repeat per metric).",
        show_default=False)] = None,
    beta: Annotated[Optional[float], typer.Option("--beta", help="β of an identify-anomaly request.")] = None,
    radius: Annotated[Optional[float], typer.Option("--radius", help="r of an identify-anomaly request.")] = None,
    privacy: Privacy = None, k: K = None,
    fmt: Format = o.DataFormat.table,
) -> None:
    """What an explain-outlier (keys) or identify-anomaly (--value) request would charge, read
    from the request alone: nothing is charged and no row is read.

    \b
    Example:
        pcor-sql remote cost salaries 42 43 --epsilon 0.2 --url http://127.0.0.1:8000
    """
    from pcor_sql_client.cli import cost_call

    args = dict(keys=keys or [], value=value, epsilon=epsilon, metric=metric, verifier=verifier, search=search,
                samples=samples, utility=utility, start=start, by=by, beta=beta, radius=radius, privacy=privacy, k=k)
    method, target, options = cost_call(argparse.Namespace(**args))
    with analyst(_url(url)) as remote:
        found = remote.cost(method, dataset, target, **options).as_dict()
    _rows([found], fmt)


@app.command("explain-outlier", short_help="A private context in which a record is an outlier.")
def explain_outlier(
    dataset: Dataset,
    keys: Annotated[List[str], typer.Argument(help="Releasable key(s) of the record(s).", show_default=False)],
    epsilon: Epsilon,
    url: Url = None,
    metric: Metric = None, verifier: Verifier = None, search: Search = None, samples: Samples = None,
    utility: Utility = None, start: Start = None, by: By = None,
    fmt: Annotated[o.ExplainFormat, o.choice(o.ExplainFormat, "--format", help="table, json (JSON Lines) or sql.")]
    = o.ExplainFormat.table,
) -> None:
    """Privately release, for each key, a context in which that record is an outlier; each key
    costs ε, charged by the service before it reads a row.

    \b
    Example:
        pcor-sql remote explain-outlier salaries 42 --epsilon 0.2 --metric salary --url http://127.0.0.1:8000
    """
    given = dict(metric=metric, verifier=verifier, search=search, samples=samples, utility=utility, start=start, by=by)
    options = {name: given[name] for name in EXPLAIN_OPTIONS if given[name] is not None}
    with analyst(_url(url)) as remote:
        results = remote.explain_outliers(dataset, [key_value(k) for k in keys], epsilon=epsilon, **options)
    items = [r.as_dict() for r in results]
    if fmt is o.ExplainFormat.json:
        _rows(items, o.DataFormat.json)
    elif fmt is o.ExplainFormat.sql:
        for item in items:
            write_line(sql_line(item))
    else:
        console = stdout_console()
        for i, item in enumerate(items):
            if i:
                console.print()
            for line in explanation_lines(item):
                console.print(line, markup=False, highlight=False)


@app.command("identify-anomaly", short_help="A private bit: is this point a (β, r)-anomaly of the data?")
def identify_anomaly(
    dataset: Dataset,
    value: Annotated[List[str], typer.Option(
        "--value", metavar="METRIC=NUMBER", help="The point asked about, e.g. salary=250000 (repeat per metric).",
        show_default=False)],
    beta: Annotated[float, typer.Option("--beta", help="β: at most β records within r (itself included) make an anomaly.",
                                        show_default=False)],
    radius: Annotated[float, typer.Option("--radius", help="r: the ball radius.", show_default=False)],
    epsilon: Epsilon,
    url: Url = None,
    privacy: Privacy = None,
    k: K = None,
    fmt: Format = o.DataFormat.table,
) -> None:
    """The mechanism's randomized bit for a point of the metric space — present in the data
    or not; it costs ε, charged before any row is read.

    \b
    Example:
        pcor-sql remote identify-anomaly salaries --value salary=250000 --beta 5 --radius 1000 --epsilon 0.5 \\
            --url http://127.0.0.1:8000
    """
    given = dict(privacy=privacy, k=k)
    options = {name: given[name] for name in IDENTIFY_OPTIONS if given[name] is not None}
    with analyst(_url(url)) as remote:
        answer = remote.identify_value(dataset, point(value), beta=beta, radius=radius, epsilon=epsilon, **options)
    item = answer.as_dict()
    _rows([item] if fmt is o.DataFormat.json else [answer_row(item)], fmt,
          title=f"{answer.summary}\n{answer.privacy_summary}".strip())
