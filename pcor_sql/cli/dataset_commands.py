"""`pcor-sql dataset add|list|show|remove`: datasets registered for analysts (DESIGN.md §6).

A registered dataset fixes the relation, the record key, the metric columns, the context
attributes with their domains (frozen at registration) and optionally limits; analysts'
requests are checked against it alone before their cost is reserved.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pcor_sql.cli import parameters as o
from pcor_sql.cli.console import stdout_console, write_line
from pcor_sql.cli.database import open_owner
from pcor_sql.cli.listing import print_listing
from pcor_sql.cli.render import json_text
from pcor_sql.errors import UserError

app = typer.Typer(
    name="dataset",
    help="Datasets registered for analysts: relation, key, metrics, attributes with frozen domains, limits.",
    short_help="Registered datasets: add, list, show, remove.",
)

Format = Annotated[o.DataFormat, o.choice(o.DataFormat, "--format", help="table or json (JSON Lines).")]
Name = Annotated[str, typer.Argument(help="The dataset's name (an identifier analysts write after FROM).",
                                     show_default=False)]


@app.command("add", short_help="Register a dataset for analysts.", context_settings={"ignore_unknown_options": True})
def add(
    name: Name,
    relation: Annotated[str, typer.Argument(help="A table, view, file or subquery.", show_default=False)],
    key: Annotated[str, typer.Option("--key", help="The record key column analysts pick records by.",
                                     show_default=False)],
    metric: Annotated[str, typer.Option("--metric", metavar="M1,M2", help="Metric column(s) analysts may ask about.",
                                        show_default=False)],
    by: Annotated[str, typer.Option("--by", metavar="A,B", help="The context attributes.", show_default=False)],
    domain: o.Domain = None,
    bins: o.BinsFlag = None,
    limit: Annotated[Optional[str], typer.Option("--limit", help="ε limit of each unit, for every notion.")] = None,
    accounting: Annotated[Optional[str], typer.Option(
        "--accounting", help="Fix the accounting rule (tight or paper); analysts may not change it.")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a dataset of the same name.")] = False,
    releasable_keys: Annotated[Optional[str], typer.Option(
        "--releasable-keys", metavar="K1,K2", help="The keys analysts may ask about (frozen).")] = None,
    releasable: Annotated[Optional[str], typer.Option(
        "--releasable", metavar="PREDICATE",
        help="A SQL condition: the keys of the rows where it holds now may be asked about (frozen).")] = None,
    db: o.Db = None,
    ledger: o.Ledger = None,
) -> None:
    """Register RELATION as dataset NAME, freezing its attributes' domains now. Analysts may
    ask about the keys --releasable-keys lists or --releasable selects (evaluated once, now);
    without either, about no key.

    \b
    Example:
        pcor-sql dataset add salaries salaries --key id --metric salary --by job_title,year --limit 1.0 --db salaries.duckdb
        pcor-sql dataset add people people --key id --metric salary --by dept,age --bins age=18,25,35,45,55,65,81

    Bins are frozen with the domains (`auto:K` edges too, computed now from the data).
    """
    from pcor_sql.cli.budget import _number

    epsilon = None if limit is None else _number(limit, "limit")
    if releasable_keys is not None and releasable is not None:
        raise UserError("--releasable-keys and --releasable both declare the releasable keys", "give one of them")
    keys = releasable if releasable_keys is None else [k.strip() for k in releasable_keys.split(",") if k.strip()]
    with open_owner(db, ledger, reads=relation) as owner:
        found = owner.register(
            name, relation, key=key, metric=metric, by=by, domains=o.domains(domain), bins=o.bins_option(bins),
            limit=epsilon, accounting=accounting, replace=replace, releasable=keys,
        )
    keys_note = "no releasable keys" if found.releasable is None else f"{found.releasable} releasable keys"
    stdout_console().print(
        f"registered {found.name}: {len(found.attributes)} attributes, {keys_note}, units {', '.join(found.units)}",
        markup=False,
    )


@app.command("list", short_help="The registered datasets.")
def list_(db: o.Db = None, ledger: o.Ledger = None, fmt: Format = o.DataFormat.table) -> None:
    """The registered datasets: name, relation, key, metrics, attributes, units.

    \b
    Example:
        pcor-sql dataset list --db salaries.duckdb
    """
    with open_owner(db, ledger) as owner:
        found = owner.datasets()
    print_listing(
        fmt,
        (d.as_dict() for d in found),
        ["name", "relation", "key", "metrics", "attributes", "units"],
        ([d.name, d.relation, d.key, ", ".join(d.metrics), ", ".join(d.attributes), ", ".join(d.units)] for d in found),
    )


@app.command("show", short_help="One registered dataset, domains included.")
def show(name: Name, db: o.Db = None, ledger: o.Ledger = None, fmt: Format = o.DataFormat.table) -> None:
    """One registered dataset with its frozen domains and its units' budgets.

    \b
    Example:
        pcor-sql dataset show salaries --db salaries.duckdb --format json
    """
    with open_owner(db, ledger) as owner:
        d = owner.dataset(name)
        budgets = owner.status(name)
    if fmt is o.DataFormat.json:
        out = d.as_dict()
        out["budgets"] = [{"unit": s.unit, "notion": s.notion, "limit": s.limit, "spent": s.spent} for s in budgets]
        write_line(json_text(out))
        return
    console = stdout_console()
    for label, value in (("relation", d.relation), ("key", d.key), ("metrics", ", ".join(d.metrics)),
                         ("units", ", ".join(d.units)), ("accounting", d.accounting or "analyst's choice"),
                         ("releasable keys", "none declared" if d.releasable is None else
                          f"{d.releasable} ({_made(d.releasable_source)})")):
        console.print(f"{label}: {value}", markup=False)
    binned = dict(d.bins)
    for attribute, values in d.domains:
        if attribute in binned:
            console.print(f"bins {attribute}: {','.join(binned[attribute])} = {' '.join(values)}", markup=False)
        else:
            console.print(f"domain {attribute}: {' | '.join(values)}", markup=False)
    for s in budgets:
        limit = "none" if s.limit is None else f"{s.limit:.6g}"
        console.print(f"budget {s.unit} {s.notion}: spent ε = {s.spent:.6g} of limit {limit}", markup=False)


@app.command("remove", short_help="Unregister a dataset (its budgets stay).")
def remove(name: Name, db: o.Db = None, ledger: o.Ledger = None) -> None:
    """Unregister dataset NAME; the budgets and history of its units stay.

    \b
    Example:
        pcor-sql dataset remove salaries --db salaries.duckdb
    """
    with open_owner(db, ledger) as owner:
        owner.unregister(name)
    stdout_console().print(f"removed {name}", markup=False)


def _made(source: str | None) -> str:
    """How a releasable set was made, in words (a predicate's set is data-derived and public)."""
    if source is None or source == "list":
        return "a declared list"
    return f"selected by the {source} at registration: data-derived, public"
