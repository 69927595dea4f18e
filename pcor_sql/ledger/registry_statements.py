"""The registry statements both stores run alike — DuckDB's and PostgreSQL's dialects agree on
them — built from the tables' names (`duckdb_registry` passes its `Tables`, `postgres_registry`
the `pcor` schema's), so a change to one is a change to both (DESIGN.md §11 "Two stores, one
contract"). Parameters are positional (`$1`, ...), in the order each builder says."""

from __future__ import annotations

from pcor_sql.ledger.records import HISTORY_COLUMNS


def history(table: str, order: str, unit: str | None, limit: int | None) -> tuple[str, list[object]]:
    """Every history row (in `order`, the store's newest-first), or `unit`'s; at most `limit`."""
    query, params = f"SELECT {HISTORY_COLUMNS} FROM {table}", []
    if unit is None:
        query += order
    else:
        query += " WHERE unit = $1 ORDER BY released_at DESC, notion DESC, seq DESC"
        params.append(unit)
    if limit is not None:
        query += f" LIMIT ${len(params) + 1}"
        params.append(limit)
    return query, params


def budget_row(table: str) -> str:
    """(limit_epsilon, spent_epsilon) of unit $1, notion $2."""
    return f"SELECT limit_epsilon, spent_epsilon FROM {table} WHERE unit = $1 AND notion = $2"


def upsert_limit(table: str) -> str:
    """Unit $1's limit under notion $2 set to $3 at time $4 (a new row spends nothing)."""
    return (f"INSERT INTO {table} (unit, notion, limit_epsilon, spent_epsilon, releases, created_at, updated_at)"
            " VALUES ($1, $2, $3, 0, 0, $4, $4) ON CONFLICT (unit, notion) DO UPDATE SET"
            " limit_epsilon = excluded.limit_epsilon, updated_at = excluded.updated_at")


def set_public(table: str) -> str:
    """Unit $1 marked public ($2) at time $3."""
    return (f"INSERT INTO {table} (unit, public, updated_at) VALUES ($1, $2, $3)"
            " ON CONFLICT (unit) DO UPDATE SET public = excluded.public, updated_at = excluded.updated_at")


def history_page(table: str, count: str, order: str, filters, limit: int, offset: int
                 ) -> tuple[str, str, list[object]]:
    """The owner's filtered page of history rows: (the count statement, the rows statement, their
    parameters). `filters` are (column, value) pairs on analyst, dataset or outcome only (the
    column names are put in the statement, so no other name is accepted); `count` is the store's
    spelling of count(*) (DuckDB's from its system schema: a user's function cannot shadow it)."""
    where, params = [], []
    for column, value in filters:
        if column not in ("analyst", "dataset", "outcome"):
            raise ValueError(column)
        params.append(value)
        where.append(f"{column} = ${len(params)}")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return (f"SELECT {count} FROM {table}{clause}",
            f"SELECT {HISTORY_COLUMNS} FROM {table}{clause}{order} LIMIT {int(limit)} OFFSET {int(offset)}", params)
