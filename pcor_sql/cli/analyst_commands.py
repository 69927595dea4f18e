"""`pcor-sql analyst add|list|revoke|rotate|quota`: the analysts the owner serves (DESIGN.md §6).

Each analyst gets a bearer token, printed once as the last line of `analyst add` (only its
hash is kept), optionally an ε quota per notion and a list of the registered datasets they may
use. Everything goes through the owner's handle (`pcor_sql.owner.Owner`).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pcor_sql.cli import parameters as o
from pcor_sql.cli.console import stdout_console, write_line
from pcor_sql.cli.database import open_owner
from pcor_sql.cli.listing import print_listing
from pcor_sql.errors import UserError

app = typer.Typer(
    name="analyst",
    help="Analysts served by `pcor-sql serve`: bearer tokens, quotas per notion, datasets they may use.",
    short_help="Analysts: add (prints a token), list, revoke, rotate, quota.",
)

Name = Annotated[str, typer.Argument(help="The analyst's name.", show_default=False)]
Format = Annotated[o.DataFormat, o.choice(o.DataFormat, "--format", help="table or json (JSON Lines).")]
Quota = Annotated[Optional[str], typer.Option("--quota", metavar="EPS",
                                              help="ε quota (under every notion unless --notion names one).")]
OneNotion = Annotated[Optional[str], typer.Option("--notion", help="The notion of the quota: ocdp, dp or sp.")]
_VALUES = {"ignore_unknown_options": True}  # `--quota -1` is a bad quota, not an unknown option


def _epsilon(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise UserError(f"the quota must be a number, got {text!r}", "e.g. --quota 1.0") from None


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError("--datasets names no dataset", "e.g. --datasets salaries,homicides")
    return names


def _quota(limit: float | None) -> str:
    return "none" if limit is None else f"{limit:.6g}"


@app.command("add", short_help="Name an analyst and print their token (once).", context_settings=_VALUES)
def add(
    name: Name,
    quota: Quota = None,
    notion: OneNotion = None,
    datasets: Annotated[Optional[str], typer.Option(
        "--datasets", metavar="A,B", help="The registered datasets they may use (default: all).")] = None,
    db: o.Db = None,
    ledger: o.Ledger = None,
) -> None:
    """Name analyst NAME and print their bearer token as the last line — shown this once: only
    its hash is kept. Give it to them over a safe channel; they send it as
    `Authorization: Bearer TOKEN` (or set PCOR_SQL_TOKEN for `pcor-sql remote`).

    \b
    Example:
        pcor-sql analyst add ana --quota 1.0 --datasets salaries --db salaries.duckdb
    """
    with open_owner(db, ledger) as owner:
        token = owner.add_analyst(name, quota=_epsilon(quota), notion=notion, datasets=_names(datasets))
        [info] = [a for a in owner.analysts() if a.name == name]
    quotas = ", ".join(f"{u.notion} ε ≤ {u.limit:.6g}" for u in info.usage if u.limit is not None) or "no quota"
    allowed = ", ".join(info.datasets) if info.datasets is not None else "all registered datasets"
    console = stdout_console()
    console.print(f"analyst {name} added: {quotas}; datasets: {allowed}", markup=False)
    console.print("their bearer token (shown this once, only its hash is kept):", markup=False)
    write_line(token)


@app.command("list", short_help="The analysts, their quotas and spent ε.")
def list_(db: o.Db = None, ledger: o.Ledger = None, fmt: Format = o.DataFormat.table) -> None:
    """The analysts: created, revoked, datasets they may use, and per notion their quota and
    spent ε (never their tokens).

    \b
    Example:
        pcor-sql analyst list --db salaries.duckdb
    """
    with open_owner(db, ledger) as owner:
        found = owner.analysts()
    print_listing(
        fmt,
        (a.as_dict() for a in found),
        ["analyst", "created (UTC)", "revoked (UTC)", "datasets", "notion", "dataset", "quota ε", "spent ε", "requests"],
        ([a.name, a.as_dict()["created_at"], a.as_dict()["revoked_at"] or "", ", ".join(a.datasets or ["all"]),
          u.notion, u.dataset or "all", _quota(u.limit), f"{u.spent:.6g}", str(u.releases)]
         for a in found for u in a.usage),
    )


@app.command("revoke", short_help="Stop an analyst's token at once.")
def revoke(name: Name, db: o.Db = None, ledger: o.Ledger = None) -> None:
    """Stop NAME's token at once; their history and spent ε stay.

    \b
    Example:
        pcor-sql analyst revoke ana --db salaries.duckdb
    """
    with open_owner(db, ledger) as owner:
        info = owner.revoke_analyst(name)
    stdout_console().print(f"analyst {info.name} revoked at {info.as_dict()['revoked_at']} (UTC)", markup=False)


@app.command("rotate", short_help="A new token for an analyst (printed once); the old one stops at once.")
def rotate(name: Name, db: o.Db = None, ledger: o.Ledger = None) -> None:
    """Issue NAME a new bearer token, printed as the last line — shown this once — and stop the
    old one at once. Quotas, spent ε and history stay (a revoked analyst is reinstated).

    \b
    Example:
        pcor-sql analyst rotate ana --db salaries.duckdb | tail -n 1 > ana.token
    """
    with open_owner(db, ledger) as owner:
        was = [a for a in owner.analysts() if a.name == name]
        token = owner.rotate_analyst(name)
    again = " (reinstated: they were revoked)" if was and was[0].revoked else ""
    console = stdout_console()
    console.print(f"analyst {name}: new token, the old one no longer works{again}", markup=False)
    console.print("their bearer token (shown this once, only its hash is kept):", markup=False)
    write_line(token)


@app.command("quota", short_help="Set or clear an analyst's quota.", context_settings=_VALUES)
def quota(
    name: Name,
    epsilon: Annotated[Optional[str], typer.Argument(help="The quota of ε (> 0).", show_default=False)] = None,
    notion: OneNotion = None,
    dataset: Annotated[Optional[str], typer.Option("--dataset", help="A registered dataset (default: all together).")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the quota.")] = False,
    db: o.Db = None,
    ledger: o.Ledger = None,
) -> None:
    """Set NAME's ε quota under a notion (default: every notion), over all datasets or on one.

    \b
    Example:
        pcor-sql analyst quota ana 2.0 --notion ocdp --db salaries.duckdb
    """
    if (epsilon is None) == (not clear):
        raise UserError("give either a quota or --clear", "e.g. pcor-sql analyst quota ana 1.0")
    with open_owner(db, ledger) as owner:
        owner.set_analyst_quota(name, None if clear else _epsilon(epsilon), notion=notion, dataset=dataset)
    shown = "cleared" if clear else f"set to ε = {_epsilon(epsilon):.6g}"
    stdout_console().print(f"quota of {name} ({notion or 'every notion'}, {dataset or 'all datasets'}) {shown}",
                           markup=False)
