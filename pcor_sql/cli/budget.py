"""`pcor-sql budget status|history|set-limit|default-limit|public|verify|heads|repair|migrate`: the
privacy budget ledger.

Budgets are kept per privacy unit (a base table or file) and per privacy notion (ocdp for
PCOR releases, dp and sp for anomaly answers); a UNIT may be spelled any way that reaches it
(`salaries`, `main.salaries`, `'data/wages.parquet'`) or be a registered dataset's name.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from pcor_sql.cli import budget_integrity
from pcor_sql.cli import parameters as o
from pcor_sql.cli.budget_integrity import Format
from pcor_sql.cli.console import make_warn, stdout_console, write_line
from pcor_sql.cli.database import open_owner
from pcor_sql.cli.render import draw_budget, json_text, print_table, round_epsilon, write_csv, write_json
from pcor_sql.errors import UserError

app = typer.Typer(
    name="budget",
    help="The privacy budget ledger: spent ε and limits per table or file and per privacy notion, release history.",
    short_help="The budget ledger: status, history, set-limit, default-limit, public, verify, heads, repair, migrate.",
)

Rows = Annotated[o.RowsFormat, o.choice(o.RowsFormat, "--format", help="table, json (one document: a list), jsonl (one object "
                                                             "per line) or csv (flat columns).")]
Unit = Annotated[
    Optional[str],
    typer.Argument(help="A table, view, file or registered dataset (default: every unit in the ledger).",
                   show_default=False),
]
# A limit is a value even when it looks like an option (`set-limit t -1` is a bad limit, not
# an unknown option): the commands that take one let unknown options through as arguments.
_VALUES = {"ignore_unknown_options": True}


def _notions(notion: str) -> tuple[str, ...]:
    from pcor_sql.owner import notions_named

    return notions_named(notion)


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UserError(f"the {what} must be a number, got {text!r}", "e.g. 1.0") from None


def _limit(value: float | None) -> str:
    return "none" if value is None else f"{value:.6g}"


@app.command("status", short_help="Spent ε, limit and remaining budget per unit and notion.")
def status(
    unit: Unit = None,
    notion: o.Notion = "all",
    db: o.Db = None,
    ledger: o.Ledger = None,
    fmt: Rows = o.RowsFormat.table,
    plot: Annotated[Optional[Path], typer.Option("--plot", metavar="FILE.png",
                                                 help="Also draw a bar per unit and notion: ε spent / limit (the plot extra; "
                                                      "notions with nothing spent and no limit left out).")] = None,
) -> None:
    """Spent ε, limit and remaining budget per unit and per privacy notion (never added up).

    \b
    Example:
        pcor-sql budget status salaries --db salaries.duckdb --format json
    """
    notions = _notions(notion)
    with open_owner(db, ledger, reads=unit) as owner:
        found = [s for n in notions for s in owner.status(unit, n)] if unit else owner.status(None)
        found = [s for s in found if s.notion in notions]
    # Shown to 12 significant digits (0.5 - 0.4 prints 0.1, not 0.09999999999999998); the ledger
    # keeps, adds and compares the exact values.
    rows = [
        {"unit": s.unit, "notion": s.notion, "limit": round_epsilon(s.limit), "limit_source": s.limit_source,
         "spent": round_epsilon(s.spent), "remaining": round_epsilon(s.remaining), "releases": s.releases,
         "public": s.public}
        for s in sorted(found, key=lambda s: (s.unit, s.notion))
    ]
    if plot is not None:
        draw_budget([r for r in rows if r["spent"] or r["limit"] is not None] or rows, plot)
        sys.stderr.write(f"drew {plot}\n")
    if fmt in (o.RowsFormat.json, o.RowsFormat.jsonl):
        write_json(rows, fmt.value)
        return
    if fmt is o.RowsFormat.csv:
        write_csv(rows)
        return
    print_table(
        stdout_console(),
        ["unit", "notion", "limit ε", "spent ε", "remaining ε", "releases"],
        ([r["unit"] + (" (public)" if r["public"] else ""), r["notion"],
          _limit(r["limit"]) + (" (default)" if r["limit_source"] == "default" else ""),
          f"{r['spent']:.6g}", _limit(r["remaining"]), str(r["releases"])] for r in rows),
    )


@app.command("history", short_help="The charged releases, oldest first.")
def history(
    unit: Unit = None,
    limit: Annotated[Optional[int], typer.Option("--limit", metavar="N", help="Only the N most recent charges.")] = None,
    db: o.Db = None,
    ledger: o.Ledger = None,
    fmt: Rows = o.RowsFormat.table,
) -> None:
    """The charged releases, oldest first: unit, notion, time, mechanism, ε, who asked (owner or
    a named analyst), the outcome (answered, failed, interrupted; "not charged" when the ε was
    given back), record, statement; seeded runs are marked "seeded, not private".

    \b
    Example:
        pcor-sql budget history salaries --db salaries.duckdb --format json
    """
    with open_owner(db, ledger, reads=unit) as owner:
        units = owner.units(unit) if unit else (None,)
        records = sorted((r for u in units for r in owner.ledger.history(u, limit=limit)),
                         key=lambda r: (r.released_at, r.unit, r.seq))
    if fmt is not o.RowsFormat.table:
        rows = ({
            "release_id": r.release_id, "unit": r.unit, "notion": r.notion, "seq": r.seq,
            "released_at": r.released_at, "mechanism": r.mechanism, "epsilon": r.epsilon, "k": r.k,
            "record_key": r.record_key, "statement": r.statement, "spent_after": r.spent_after,
            "seeded": r.seeded, "role": r.role, "dataset": r.dataset, "analyst": r.analyst,
            "outcome": r.outcome, "reason": r.reason, "refunded": r.refunded,
        } for r in records)
        if fmt is o.RowsFormat.csv:
            write_csv(list(rows))
        else:
            write_json(rows, fmt.value)
        return
    print_table(
        stdout_console(),
        ["unit", "notion", "#", "released at (UTC)", "mechanism", "ε", "spent after", "by", "analyst", "outcome",
         "record", "statement"],
        [
            [r.unit, r.notion, str(r.seq), r.released_at.isoformat(sep=" ", timespec="seconds"),
             r.mechanism + (" (seeded, not private)" if r.seeded else ""), f"{r.epsilon:.6g}",
             f"{r.spent_after:.6g}", r.role + (f" via {r.dataset}" if r.dataset else ""), r.analyst or "",
             r.shown_outcome, r.record_key or "", r.statement or ""]
            for r in records
        ],
    )


@app.command("set-limit", short_help="Set the ε limit of a table, file or dataset.", context_settings=_VALUES)
def set_limit(
    unit: Annotated[str, typer.Argument(help="A table, view, file or registered dataset.", show_default=False)],
    epsilon: Annotated[Optional[str], typer.Argument(help="The new limit of total ε (> 0).", show_default=False)] = None,
    notion: o.Notion = "ocdp",
    clear: Annotated[bool, typer.Option("--clear", help="Remove the unit's own limit (a default limit, if set, "
                                                        "applies again).")] = False,
    db: o.Db = None,
    ledger: o.Ledger = None,
    fmt: Format = o.DataFormat.table,
) -> None:
    """Set the ε limit of every table or file UNIT reads, under a privacy notion; charges that
    would exceed it are refused. Once any limit exists, units without one are refused too.
    --clear removes it. A limit below what is already spent is set, with a warning.

    \b
    Example:
        pcor-sql budget set-limit salaries 1.0 --db salaries.duckdb
        pcor-sql budget set-limit salaries --clear --db salaries.duckdb
    """
    if (epsilon is None) == (not clear):
        raise UserError("give either a limit or --clear", "e.g. pcor-sql budget set-limit salaries 1.0")
    value = None if clear else _number(epsilon, "limit")
    warn = make_warn()
    with open_owner(db, ledger, reads=unit) as owner:
        changes = [c for n in _notions(notion) for c in owner.set_limit(unit, value, n)]
    from pcor_sql.owner import below_spent_warning

    for change in changes:
        if change.below_spent:
            below_spent_warning(change, warn)
    if fmt is o.DataFormat.json:
        for c in changes:
            write_line(json_text({"unit": c.unit, "notion": c.notion, "limit": c.limit,
                                  "previous_limit": c.previous_limit, "spent": c.spent, "below_spent": c.below_spent}))
        return
    for c in changes:
        now = "cleared" if c.limit is None else f"set to ε = {c.limit:.6g}"
        stdout_console().print(
            f"{c.notion} limit of {c.unit} {now} (was {_limit(c.previous_limit)}; spent {c.spent:.6g})",
            markup=False,
        )


@app.command("default-limit", short_help="Set the limit of units without their own.", context_settings=_VALUES)
def default_limit(
    epsilon: Annotated[Optional[str], typer.Argument(help="The default limit of total ε (> 0).", show_default=False)] = None,
    notion: o.Notion = "all",
    clear: Annotated[bool, typer.Option("--clear", help="Remove the default limit.")] = False,
    db: o.Db = None,
    ledger: o.Ledger = None,
) -> None:
    """Set the ε limit that applies to every unit without its own (per notion; default: all).

    \b
    Example:
        pcor-sql budget default-limit 1.0 --db salaries.duckdb
    """
    if (epsilon is None) == (not clear):
        raise UserError("give either a default limit or --clear", "e.g. pcor-sql budget default-limit 1.0")
    value = None if clear else _number(str(epsilon), "default limit")
    with open_owner(db, ledger) as owner:
        for n in _notions(notion):
            owner.set_default_limit(value, n)
    shown = "cleared" if value is None else f"set to ε = {value:.6g}"
    stdout_console().print(f"default limit ({notion}) {shown}", markup=False)


@app.command("public", short_help="Mark a lookup table public: never charged.")
def public(
    unit: Annotated[str, typer.Argument(help="A table, view or file.", show_default=False)],
    private: Annotated[bool, typer.Option("--private", help="Make it private (charged) again.")] = False,
    db: o.Db = None,
    ledger: o.Ledger = None,
) -> None:
    """Mark the tables or files UNIT reads public (lookup data that needs no protection: never
    charged), or private again.

    \b
    Example:
        pcor-sql budget public regions --db sales.duckdb
    """
    with open_owner(db, ledger, reads=unit) as owner:
        units: Any = owner.mark_public(unit, not private)
    for name in units:
        stdout_console().print(f"{name}: {'private' if private else 'public'}", markup=False)


# The history's integrity commands live in `budget_integrity` (DESIGN.md §11); registered here so
# the group's commands are listed in one place, in this order.
for _name, _help in (
    ("verify", "Check every spent total against the history, and the history against its chain."),
    ("heads", "The history's hash chain heads, to keep outside the ledger."),
    ("repair", "Put back what the history's chain holds; reset the totals from the history."),
    ("migrate", "Bring a ledger in an older layout to the current one, or move it to PostgreSQL."),
):
    app.command(_name, short_help=_help)(getattr(budget_integrity, _name))
