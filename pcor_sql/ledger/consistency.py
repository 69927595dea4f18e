"""The history is the truth (DESIGN.md §6): spent totals checked against it, and reset from it.

A unit's spent ε under a notion must equal the sum of ε over its history rows that were not
refunded; an analyst's quota row, the sum over that analyst's releases (one per release_id,
however many units it was charged to). Every writer keeps this in one transaction, so a
difference means a hand edit or a lost write: the ledger then refuses charges until the owner
has looked (`pcor-sql budget verify`) and reset the totals (`pcor-sql budget repair`). Limits,
public marks and quotas' limits are not in the history and are left alone; a budget row
deleted by hand comes back without its limit.

Equal means equal up to 1e-9 of the ε that ever flowed through the row (refunds included):
the totals are kept in compensated arithmetic, so honest rounding is ~1e-16 of that, while a
hand edit or a lost charge of even 1e-9 of it is found.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from pcor_sql.ledger import history_chain_steps
from pcor_sql.ledger.charge_rules import NEEDS_REPAIR, RELATIVE_SLACK, Tables
from pcor_sql.ledger.outcomes import gone, mark_interrupted
from pcor_sql.ledger.process_identity import current_process
from pcor_sql.ledger.transactions import utc_now


class Mismatch(NamedTuple):
    """A total that differs from its history: `unit` is a unit's name, or `analyst:NAME` (an
    analyst's quota over all datasets) or `analyst:NAME/DATASET`."""

    unit: str
    notion: str
    spent_total: float
    history_sum: float


def _unit_sums(t: Tables) -> str:
    return (f"SELECT unit, notion, coalesce(system.main.fsum(epsilon) FILTER (WHERE NOT refunded), 0) AS kept,"
            f" system.main.fsum(epsilon) AS gross, system.main.count(*) AS rows FROM {t.history} GROUP BY unit, notion")


def _analyst_sums(t: Tables) -> str:
    releases = (f"SELECT analyst, notion, coalesce(dataset, '') AS dataset, release_id, system.main.max(epsilon) AS eps,"
                f" system.main.bool_or(refunded) AS refunded FROM {t.history} WHERE analyst IS NOT NULL GROUP BY ALL")
    return (f"SELECT analyst, notion, d AS dataset, coalesce(system.main.fsum(eps) FILTER (WHERE NOT refunded), 0) AS kept,"
            f" system.main.fsum(eps) AS gross, system.main.count(*) AS rows FROM (SELECT *, unnest(CASE WHEN dataset = ''"
            f" THEN system.main.list_value('') ELSE system.main.list_value('', dataset) END) AS d FROM ({releases})) GROUP BY ALL")


def mismatch_sql(t: Tables) -> str:
    """(label, notion, spent total, history sum) of every total that differs from its history."""
    return (
        f"SELECT label, notion, spent, kept FROM ("
        f" SELECT unit AS label, notion, coalesce(system.main.\"+\"(b.spent_epsilon, b.spent_residual), 0) AS spent,"
        f" coalesce(h.kept, 0) AS kept, coalesce(h.gross, 0) AS gross"
        f" FROM {t.budget} b FULL JOIN ({_unit_sums(t)}) h USING (unit, notion)"
        f" UNION ALL"
        f" SELECT system.main.concat('analyst:', analyst, CASE WHEN dataset = '' THEN '' ELSE system.main.concat('/', dataset) END),"
        f" notion, coalesce(system.main.\"+\"(q.spent_epsilon, q.spent_residual), 0), coalesce(h.kept, 0), coalesce(h.gross, 0)"
        f" FROM {t.quotas} q FULL JOIN ({_analyst_sums(t)}) h USING (analyst, notion, dataset)"
        f") WHERE system.main.abs(system.main.\"-\"(spent, kept))"
        f" > system.main.\"*\"({RELATIVE_SLACK!r}, system.main.greatest(gross, spent)) ORDER BY label, notion"
    )


def open_check_sql(t: Tables) -> str:
    """What opening a ledger reads, in one statement: the mismatches, the (pid, start token) of
    this host's rows still 'running' ($1 is the host), and whether a repair is pending."""
    return (
        f"SELECT (SELECT system.main.list(system.main.row(label, notion, spent, kept)) FROM ({mismatch_sql(t)})),"
        f" (SELECT system.main.list(DISTINCT system.main.row(pid, process_token)) FROM {t.history} WHERE outcome = 'running' AND host = $1),"
        f" (SELECT value FROM {t.settings} WHERE name = '{NEEDS_REPAIR}')"
    )


def mismatches(rows: Any) -> tuple[Mismatch, ...]:
    return tuple(Mismatch(*(r.values() if isinstance(r, dict) else r)) for r in rows or [])


def flag_for_repair(cur: Any, t: Tables) -> None:
    """Make every charge refuse until `repair` (the flag is read by each charge's one SELECT)."""
    cur.execute(
        f"INSERT INTO {t.settings} (name, value, updated_at) VALUES ('{NEEDS_REPAIR}', 1, $1)"
        " ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at", [utc_now()])


def repair(cur: Any, t: Tables) -> tuple[Mismatch, ...]:
    """Reset every unit total and analyst quota total from the history (spent = the sum of its
    unrefunded ε, releases = its row count), clear the repair flag, and return what differed."""
    found = mismatches(cur.execute(mismatch_sql(t)).fetchall())
    now = utc_now()
    cur.execute(
        f"INSERT INTO {t.budget} (unit, notion, limit_epsilon, spent_epsilon, spent_residual, releases, created_at,"
        f" updated_at) SELECT unit, notion, NULL, kept, 0, rows, $1, $1 FROM ({_unit_sums(t)})"
        " ON CONFLICT (unit, notion) DO UPDATE SET spent_epsilon = excluded.spent_epsilon, spent_residual = 0,"
        " releases = excluded.releases, updated_at = excluded.updated_at", [now])
    cur.execute(
        f"UPDATE {t.budget} AS b SET spent_epsilon = 0, spent_residual = 0, releases = 0, updated_at = $1"
        f" WHERE (spent_epsilon <> 0 OR releases <> 0) AND NOT EXISTS (SELECT 1 FROM {t.history} h"
        f" WHERE h.unit = b.unit AND h.notion = b.notion)", [now])
    cur.execute(
        f"INSERT INTO {t.quotas} (analyst, notion, dataset, limit_epsilon, spent_epsilon, spent_residual, releases,"
        f" updated_at) SELECT analyst, notion, dataset, NULL, kept, 0, rows, $1 FROM ({_analyst_sums(t)})"
        " ON CONFLICT (analyst, notion, dataset) DO UPDATE SET spent_epsilon = excluded.spent_epsilon,"
        " spent_residual = 0, releases = excluded.releases, updated_at = excluded.updated_at", [now])
    cur.execute(
        f"UPDATE {t.quotas} AS q SET spent_epsilon = 0, spent_residual = 0, releases = 0, updated_at = $1"
        f" WHERE (spent_epsilon <> 0 OR releases <> 0) AND NOT EXISTS (SELECT 1 FROM {t.history} h"
        f" WHERE h.analyst = q.analyst AND h.notion = q.notion AND (q.dataset = '' OR h.dataset = q.dataset))", [now])
    cur.execute(f"DELETE FROM {t.settings} WHERE name = '{NEEDS_REPAIR}'")
    return found


def check_on_open(read: Callable[[str, list[object]], list[tuple]], transaction: Callable[[Any], Any], t: Tables,
                  read_only: bool) -> tuple[Mismatch, ...]:
    """What opening a ledger does: one statement (`open_check_sql`), then, only when something
    was found and the ledger is writable, one transaction that marks this host's rows of ended
    processes 'interrupted' (`outcomes`) and flags a mismatch for repair. Returns the mismatches."""
    me = current_process()
    found, running, flagged = read(open_check_sql(t), [me.host])[0]
    differ = mismatches(found)
    ended = gone([tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in running or []])
    if read_only or not (ended or (differ and not flagged)):
        return differ

    def body(cur: Any) -> None:
        if ended:
            mark_interrupted(cur, t, me.host, ended)
            history_chain_steps.record_sweep(cur, t, me.host)
        if differ and not flagged:
            flag_for_repair(cur, t)

    transaction(body)
    return differ
