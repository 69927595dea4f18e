"""`pcor-sql budget verify|heads|repair|migrate`: the history is the truth (DESIGN.md §11) — check
the spent totals against the history and the history against its hash chain, keep the chain's
heads outside the ledger, put back what the chain holds, move a ledger to the current layout or to
PostgreSQL. Registered on the `budget` command group by `cli/budget.py`, which holds the group's
command table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from pcor_sql.cli import parameters as o
from pcor_sql.cli.console import stdout_console, write_error, write_line
from pcor_sql.cli.database import open_owner
from pcor_sql.cli.render import json_text, print_table
from pcor_sql.errors import UserError

Format = Annotated[o.DataFormat, o.choice(o.DataFormat, "--format", help="table or json (JSON Lines).")]

#: `budget verify` exits with this code when a total or an entry differs (as `diff` does).
DIFFERENT = 1
Anchors = Annotated[Optional[Path], typer.Option(
    "--anchor", metavar="FILE", help="Chain heads written before by `pcor-sql budget heads --format json`: also finds a"
                                     " rewrite that recomputed the history's hash chain up to them.")]


def _split(found: Any) -> tuple[list[Any], list[Any]]:
    """The totals (`Mismatch`) and the history entries (`ChainDifference`: they name a problem)."""
    return [m for m in found if not hasattr(m, "problem")], [d for d in found if hasattr(d, "problem")]


def _differences(found: Any, fmt: o.DataFormat) -> None:
    totals, entries = _split(found)
    if fmt is o.DataFormat.json:
        for m in totals:
            write_line(json_text({"unit": m.unit, "notion": m.notion, "spent_total": m.spent_total,
                                  "history_sum": m.history_sum}))
        for d in entries:
            write_line(json_text({"unit": d.unit, "notion": d.notion, "entry": d.entry, "problem": d.problem}))
        return
    if totals:
        print_table(stdout_console(), ["unit", "notion", "spent ε (total)", "ε in the history", "difference"],
                    [[m.unit, m.notion, f"{m.spent_total:.12g}", f"{m.history_sum:.12g}",
                      f"{m.spent_total - m.history_sum:+.6g}"] for m in totals])
    if entries:
        print_table(stdout_console(), ["unit", "notion", "history entry", "what differs from its hash chain"],
                    [[d.unit, d.notion, d.entry, d.problem] for d in entries])


def _anchors(path: Path | None) -> list[str]:
    if path is None:
        return []
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the anchor file {str(path)!r} ({type(exc).__name__})",
                        "pass the file `pcor-sql budget heads --format json` wrote") from None


def verify(db: o.Db = None, ledger: o.Ledger = None, fmt: Format = o.DataFormat.table, anchor: Anchors = None) -> None:
    """Check that every unit's spent ε (and every analyst's quota spent) is the sum of its
    history, and that every history entry is what its hash chain recorded (a rewrite that keeps
    the totals consistent is found: DESIGN.md §11). Exit 0 when all match; otherwise print the
    differences and exit 1 — releases are then refused until `pcor-sql budget repair`.

    The chain is kept in the ledger, so whoever can write the ledger's tables can also recompute
    it: keep the heads outside the ledger (`pcor-sql budget heads --format json > FILE`) and pass
    them back with --anchor FILE to find such a rewrite too.

    \b
    Example:
        pcor-sql budget verify --db salaries.duckdb
        pcor-sql budget verify --db salaries.duckdb --anchor heads-2026-12-01.jsonl
    """
    anchors = _anchors(anchor)
    with open_owner(db, ledger) as owner:
        found = owner.verify_ledger(anchors)
        digest = owner.ledger_heads()[1] if not found and fmt is o.DataFormat.table else ""
    if not found:
        if fmt is o.DataFormat.table:
            stdout_console().print("every spent total matches the history", markup=False)
            stdout_console().print(f"every history entry matches its hash chain (heads digest {digest})", markup=False)
        return
    _differences(found, fmt)
    totals, entries = _split(found)
    if totals:
        write_error(f"{len(totals)} spent total(s) differ from the history — reset them from the history with"
                    " `pcor-sql budget repair`")
    if entries:
        write_error(f"{len(entries)} history entr{'y differs' if len(entries) == 1 else 'ies differ'} from the hash"
                    " chain, so releases are refused — `pcor-sql budget repair` puts back what the chain holds")
    raise typer.Exit(DIFFERENT)


def heads(db: o.Db = None, ledger: o.Ledger = None, fmt: Format = o.DataFormat.table) -> None:
    """Each unit's and notion's history chain head (its last entry's number and hash) and one
    digest of them all. Keep them outside the ledger (a log, a ticket, another host): `pcor-sql
    budget verify --anchor FILE` then finds any rewrite of the history up to them, even one that
    recomputed the chain. A repair that made a chain again (its entries were altered) starts it
    anew: take the heads again after it.

    \b
    Example:
        pcor-sql budget heads --db salaries.duckdb --format json > heads-2026-12-01.jsonl
    """
    with open_owner(db, ledger) as owner:
        lines, digest = owner.ledger_heads()
    if fmt is o.DataFormat.json:
        for line in lines:
            write_line(line)
        return
    heads = [json.loads(line) for line in lines]
    print_table(stdout_console(), ["unit", "notion", "entries", "head"],
                [[h["unit"], h["notion"], str(h["link"]), h["hash"]] for h in heads])
    stdout_console().print(f"heads digest {digest}", markup=False)


def repair(db: o.Db = None, ledger: o.Ledger = None, fmt: Format = o.DataFormat.table) -> None:
    """Put back every history entry that differs from its hash chain as the chain holds it
    (named; an entry the chain cannot vouch for is kept and named), record the repair in the
    chain, reset every unit's spent ε (and every analyst's quota spent) to the sum of its
    history, and allow releases again. Limits are kept (a budget row deleted by hand comes back
    without its limit: set it again). Prints what differed.

    \b
    Example:
        pcor-sql budget repair --db salaries.duckdb
    """
    with open_owner(db, ledger) as owner:
        found = owner.repair_ledger()
    if found:
        _differences(found, fmt)
    if fmt is o.DataFormat.table:
        totals, entries = _split(found)
        if entries:
            stdout_console().print(f"{len(entries)} history entr{'y' if len(entries) == 1 else 'ies'} differed from the"
                                   " hash chain: put back as the chain holds them where it vouches for them, else kept"
                                   " as named; the repair is recorded in the chain", markup=False)
        stdout_console().print(f"reset {len(totals)} total(s) from the history" if totals else
                               "every spent total matched the history" if entries else
                               "nothing to repair: every spent total matched the history", markup=False)


def migrate(db: o.Db = None, ledger: o.Ledger = None,
            to: Optional[str] = typer.Option(None, "--to", metavar="URL",
                                             help="Move the ledger into this empty PostgreSQL ledger (postgresql://…),"
                                                  " history kept and verified; a --db file is marked to use it.")) -> None:
    """Migrate a ledger written by an older pcor-sql (or missing a column) to the current layout,
    keeping spent ε, limits and history. An old ledger's budgets were kept per name; each name
    that spells a table, file or registered dataset moves to that unit, the others keep their
    name (listed). With --to, move the (migrated) ledger into a PostgreSQL ledger.

    \b
    Example:
        pcor-sql budget migrate --db salaries.duckdb
        pcor-sql budget migrate --db salaries.duckdb --to postgresql://owner@db.internal/pcor
    """
    with open_owner(db, ledger) as owner:
        report = owner.migrate_ledger()
        moved = owner.move_ledger(to) if to is not None else None
    for line in report.lines() if moved is None or report.changed else []:
        stdout_console().print(line, markup=False)
    if moved is not None:
        rows = ", ".join(f"{n} {table}" for table, n in moved.items() if n) or "an empty ledger"
        stdout_console().print(f"moved to {moved_to(to)}: {rows} (verified row for row);"
                               f" use it with --ledger {moved_to(to)}", markup=False)


def moved_to(url: str) -> str:
    """The URL without its password (never printed)."""
    from pcor_sql.owner import redacted_url

    return redacted_url(url)
