"""`pcor-sql remote ...`: an analyst's requests to a data owner's service, from the shell.

    export PCOR_SQL_TOKEN=...            # the token `pcor-sql analyst add` printed for you
    pcor-sql remote datasets --url http://127.0.0.1:8000
    pcor-sql remote explain-outlier salaries 42 --epsilon 0.2 --url http://127.0.0.1:8000

Thin: every command is one call on `pcor_sql.connect(url, token)`; the service checks and
charges. No DuckDB file, no data and no DuckDB import: an analyst needs none. Errors are one
line and a non-zero exit, like every other command.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, List, Optional

import typer

from pcor_sql.cli import parameters as o
from pcor_sql.cli.console import stdout_console, write_line
from pcor_sql.cli.render import json_text, print_table
from pcor_sql.errors import UserError

TOKEN_VARIABLE = "PCOR_SQL_TOKEN"

app = typer.Typer(
    name="remote",
    help="An analyst's requests to a pcor-sql service (pcor-sql serve): datasets, explain-outlier, "
    f"identify-anomaly, me, history. The token is read from ${TOKEN_VARIABLE}.",
    short_help="An analyst's requests to a pcor-sql service (token from $PCOR_SQL_TOKEN).",
)

Url = Annotated[
    str,
    typer.Option("--url", envvar="PCOR_SQL_URL", metavar="URL",
                 help="The service's URL, e.g. http://127.0.0.1:8000 (or $PCOR_SQL_URL).", show_default=False),
]
Format = Annotated[o.DataFormat, typer.Option("--format", help="table or json (JSON Lines).")]
Dataset = Annotated[str, typer.Argument(help="A registered dataset (see `pcor-sql remote datasets`).", show_default=False)]
Epsilon = Annotated[float, typer.Option("--epsilon", help="Privacy cost ε of each answer.", show_default=False)]


def _analyst(url: str) -> Any:
    from pcor_sql.client.remote_analyst import connect

    token = os.environ.get(TOKEN_VARIABLE, "")
    if not token.strip():
        raise UserError(f"${TOKEN_VARIABLE} is not set",
                        f"export {TOKEN_VARIABLE}=<the token your data owner gave you (pcor-sql analyst add)>")
    return connect(url, token)


def _rows(items: list[dict[str, Any]], fmt: o.DataFormat, title: str | None = None) -> None:
    if fmt is o.DataFormat.json:
        for item in items:
            write_line(json_text(item))
        return
    columns: list[str] = []
    for item in items:
        columns.extend(k for k in item if k not in columns)
    print_table(stdout_console(), columns, [[_cell(item.get(c)) for c in columns] for item in items], title=title)


def _cell(value: Any) -> Any:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_cell(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(str(_cell(v)) for v in value)
    return value


def key_value(text: str) -> Any:
    """A key as typed: an integer's digits are sent as a number (`42`), anything else as text
    (`a17`, `007` — a leading zero is part of a text key)."""
    stripped = text.strip()
    body = stripped[1:] if stripped[:1] == "-" else stripped
    if body.isdigit() and (body == "0" or not body.startswith("0")):
        return int(stripped)
    return text


def point(texts: list[str] | None) -> dict[str, float | int]:
    """`--value salary=250000 --value age=40` → {"salary": 250000, "age": 40}."""
    out: dict[str, float | int] = {}
    for text in texts or []:
        name, sep, number = text.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--value {text!r} is not METRIC=NUMBER", "write e.g. --value salary=250000")
        try:
            value: float | int = int(number) if key_value(number) == int(number) else float(number)
        except ValueError:
            try:
                value = float(number)
            except ValueError:
                raise UserError(f"--value {text!r}: {number!r} is not a number", "write e.g. --value salary=250000") from None
        if name.strip() in out:
            raise UserError(f"--value names {name.strip()!r} twice", "give each metric once")
        out[name.strip()] = value
    if not out:
        raise UserError("identify-anomaly needs a point of the metric space", "pass --value METRIC=NUMBER")
    return out


@app.command("datasets", short_help="The registered datasets: key, metrics, attributes and their domains.")
def datasets(url: Url, fmt: Format = o.DataFormat.table) -> None:
    """The datasets an analyst may ask about, with their key, metrics, context attributes and
    frozen domains (public by registration).

    \b
    Example:
        pcor-sql remote datasets --url http://127.0.0.1:8000
    """
    with _analyst(url) as analyst:
        found = analyst.datasets()
    _rows(found, fmt)


@app.command("me", short_help="Your quotas and what you have spent, per privacy notion.")
def me(url: Url, fmt: Format = o.DataFormat.table) -> None:
    """Your quotas and spent ε per privacy notion (never added across notions).

    \b
    Example:
        pcor-sql remote me --url http://127.0.0.1:8000
    """
    with _analyst(url) as analyst:
        found = analyst.me()
    if fmt is o.DataFormat.json:
        write_line(json_text(found))
        return
    _rows(_me_rows(found), fmt)


def _me_rows(found: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (notion, dataset) quota, with the analyst's name."""
    usage = found.get("usage")
    if not isinstance(usage, list) or not all(isinstance(u, dict) for u in usage):
        return [found]
    return [{"analyst": found.get("analyst"), **u, "dataset": u.get("dataset") or "(all)"} for u in usage]


@app.command("history", short_help="Your own requests: when, what, cost and outcome.")
def history(url: Url, fmt: Format = o.DataFormat.table) -> None:
    """Your own requests, oldest first, with their cost and outcome.

    \b
    Example:
        pcor-sql remote history --url http://127.0.0.1:8000 --format json
    """
    with _analyst(url) as analyst:
        found = analyst.history()
    _rows(found, fmt)


@app.command("explain-outlier", short_help="A private context in which a record is an outlier.")
def explain_outlier(
    dataset: Dataset,
    keys: Annotated[List[str], typer.Argument(help="Releasable key(s) of the record(s).", show_default=False)],
    url: Url,
    epsilon: Epsilon,
    verifier: Annotated[Optional[str], typer.Option(
        "--verifier", metavar="SPEC", help="Outlier test with options, e.g. 'lof(k=10)' or grubbs.")] = None,
    search: Annotated[Optional[str], typer.Option("--search", help="Search over contexts, e.g. explore.")] = None,
    samples: Annotated[Optional[int], typer.Option("--samples", help="Samples of the search.")] = None,
    utility: Annotated[Optional[str], typer.Option("--utility", help="population or overlap.")] = None,
    start: Annotated[Optional[str], typer.Option(
        "--start", metavar="PREDICATE", help="Starting context, e.g. \"dept IN ('a', 'b')\".")] = None,
    by: Annotated[Optional[str], typer.Option(
        "--by", metavar="A,B", help="Context attributes among the dataset's (default: all of them).")] = None,
    fmt: Annotated[o.ExplainFormat, typer.Option("--format", help="table, json (JSON Lines) or sql.")]
    = o.ExplainFormat.table,
) -> None:
    """Privately release, for each key, a context in which that record is an outlier; each key
    costs ε, charged by the service before it reads a row.

    \b
    Example:
        pcor-sql remote explain-outlier salaries 42 --epsilon 0.2 --url http://127.0.0.1:8000
    """
    options = {name: value for name, value in dict(verifier=verifier, search=search, samples=samples,
                                                     utility=utility, start=start, by=by).items() if value is not None}
    with _analyst(url) as analyst:
        results = analyst.explain_outliers(dataset, [key_value(k) for k in keys], epsilon=epsilon, **options)
    if fmt is o.ExplainFormat.json:
        for r in results:
            write_line(json_text(r.as_dict()))
        return
    if fmt is o.ExplainFormat.sql:
        for r in results:
            write_line(str(r.as_dict().get("explanation_sql", "")).rstrip().rstrip(";") + ";")
        return
    console = stdout_console()
    for i, r in enumerate(results):
        if i:
            console.print()
        console.print(r.summary or f"key {r.key!r}", markup=False, highlight=False)
        for attribute, values in r.context.items():
            console.print(f"  {attribute} ∈ {{{', '.join(str(v) for v in values)}}}", markup=False, highlight=False)
        sql = r.as_dict().get("explanation_sql")
        if sql:
            console.print(f"  explanation  {sql}", markup=False, highlight=False)
        console.print(f"  privacy      {r.privacy_summary}", markup=False, highlight=False)


@app.command("identify-anomaly", short_help="A private bit: is this point a (β, r)-anomaly of the data?")
def identify_anomaly(
    dataset: Dataset,
    url: Url,
    value: Annotated[List[str], typer.Option(
        "--value", metavar="METRIC=NUMBER", help="The point asked about, e.g. salary=250000 (repeat per metric).",
        show_default=False)],
    beta: Annotated[float, typer.Option("--beta", help="β: at most β records within r make an anomaly.",
                                        show_default=False)],
    radius: Annotated[float, typer.Option("--radius", help="r: the ball radius.", show_default=False)],
    epsilon: Epsilon,
    privacy: Annotated[Optional[str], typer.Option("--privacy", help="sp or dp.")] = None,
    k: Annotated[Optional[int], typer.Option("--k", help="k of (ε, k)-sensitive privacy.")] = None,
    fmt: Format = o.DataFormat.table,
) -> None:
    """The mechanism's randomized bit for a point of the metric space — present in the data
    or not; it costs ε, charged before any row is read.

    \b
    Example:
        pcor-sql remote identify-anomaly salaries --value salary=250000 --beta 5 --radius 1000 --epsilon 0.5 \\
            --url http://127.0.0.1:8000
    """
    options = {name: v for name, v in dict(privacy=privacy, k=k).items() if v is not None}
    with _analyst(url) as analyst:
        answer = analyst.identify_anomaly(dataset, value=point(value), beta=beta, radius=radius, epsilon=epsilon,
                                          **options)
    item = answer.as_dict()
    if fmt is o.DataFormat.json:
        write_line(json_text(item))
        return
    _rows([{k: v for k, v in item.items() if k not in ("summary", "privacy_summary")}], fmt,
          title=f"{answer.summary}\n{answer.privacy_summary}".strip())
