"""The DuckDB store's SQL of the reservations' leases (DESIGN.md §11 "Dead hosts"; the rules are
`leases`): a holder's lease renewed, ended, counted when lapsed, and the rows of lapsed holders
marked interrupted — the leases' part of `duckdb_store.DuckDBOps`.

The store's clock is this process's (a DuckDB ledger is written by one process at a time):
expiries are naive UTC timestamps, as every time in the ledger.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from pcor_sql.ledger.charge_rules import Tables
from pcor_sql.ledger.transactions import utc_now

#: A row's holder holds a live lease (`l` the lease, `h` the history row, $1 the store's now).
LEASED = ("EXISTS (SELECT 1 FROM {leases} l WHERE l.host = h.host AND l.pid = h.pid"
          " AND l.process_token = h.process_token AND l.expires_at >= $1)")


def renew_lease(cur: Any, t: Tables, holder: tuple[str, int, str], seconds: float) -> None:
    now = utc_now()
    cur.execute(f"INSERT INTO {t.leases} (host, pid, process_token, expires_at, renewed_at) VALUES ($1, $2, $3, $4, $5)"
                " ON CONFLICT (host, pid, process_token) DO UPDATE SET expires_at = excluded.expires_at,"
                " renewed_at = excluded.renewed_at",
                [*holder, now + _dt.timedelta(seconds=seconds), now])


def end_lease(cur: Any, t: Tables, holder: tuple[str, int, str]) -> None:
    cur.execute(f"DELETE FROM {t.leases} WHERE host = $1 AND pid = $2 AND process_token = $3", list(holder))


def lapsed_leases(cur: Any, t: Tables) -> int:
    [(count,)] = cur.execute(f"SELECT system.main.count(*) FROM {t.leases} WHERE expires_at < $1", [utc_now()]).fetchall()
    return int(count)


def interrupt_unleased(cur: Any, t: Tables, now: _dt.datetime) -> list[str]:
    clock = utc_now()
    changed = cur.execute(
        f"UPDATE {t.history} AS h SET outcome = 'interrupted', reason = 'lease lapsed', finished_at = $2"
        f" WHERE h.outcome = 'running' AND NOT {LEASED.format(leases=t.leases)} RETURNING h.release_id",
        [clock, now]).fetchall()
    cur.execute(f"DELETE FROM {t.leases} WHERE expires_at < $1", [clock])
    return sorted({rid for (rid,) in changed})


def running_holders(t: Tables) -> str:
    """A subquery over $1 (the store's now): the (host, pid, process_token, leased) of every
    holder of rows still 'running', as one list."""
    return (f"SELECT system.main.list(DISTINCT system.main.row(h.host, h.pid, h.process_token,"
            f" {LEASED.format(leases=t.leases)})) FROM {t.history} h WHERE h.outcome = 'running'")
