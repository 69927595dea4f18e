"""Moving an embedded ledger into a PostgreSQL ledger (DESIGN.md §11 "One data file, one
ledger"): one explicit command (`pcor-sql budget migrate --db FILE --to postgresql://…`) that
keeps the whole history, verified, and then marks the data file so that its embedded ledger is
never used again.

The move is one transaction of the target: every table of the source is copied (`LedgerOps.dump`
and `load`: budgets, public marks, settings, history with outcomes, analysts, quotas, datasets),
then read back in the same transaction and compared row for row with the source — any
difference rolls the whole move back. Only a source whose totals match its history moves
(`budget verify` first, `budget repair` if needed), and only into a ledger that holds nothing
yet: two ledgers' histories are never merged. The file's embedded tables stay as they were (a
backup); the marker written last makes any later opening of the file with them refuse, naming
the server ledger.
"""

from __future__ import annotations

from typing import Any

from pcor_sql.errors import UserError
from pcor_sql.ledger.store import Ledger
from pcor_sql.ledger.transactions import utc_now


def _canonical(tables: dict[str, tuple[tuple[str, ...], list[tuple]]]) -> dict[str, list[tuple]]:
    """Each table's rows as sorted tuples of (column, value), lists as tuples (column order and
    row order are each store's own)."""
    out = {}
    for name, (columns, rows) in tables.items():
        out[name] = sorted((tuple(sorted((c, tuple(v) if isinstance(v, list) else v) for c, v in zip(columns, row))) for row in rows),
                           key=repr)
    return out


def move_ledger(source: Ledger, target: Ledger) -> dict[str, int]:
    """Copy `source` (an embedded ledger) into the empty PostgreSQL ledger `target`, verified,
    and mark the source's data file (see the module docstring). Returns rows moved per table."""
    from pcor_sql.ledger.duckdb_store import DuckDBStore
    from pcor_sql.ledger.postgres_store import PostgresStore

    if not isinstance(source.store, DuckDBStore) or not isinstance(target.store, PostgresStore):
        raise UserError("a ledger moves from an embedded (DuckDB) ledger into a PostgreSQL one",
                        "pcor-sql budget migrate --db FILE --to postgresql://…")
    source.ensure_writable()
    target.ensure_writable()
    differ = source.verify()
    if differ:
        raise UserError(f"the ledger of {source.store.label()} does not match its history ({len(differ)} total(s) differ),"
                        " so it is not moved", "see them with `pcor-sql budget verify`, then `pcor-sql budget repair`")
    dumped = source.read_with(lambda ops: ops.dump())
    moved = {name: len(rows) for name, (_, rows) in dumped.items()}
    expected = _canonical(dumped)

    def body(ops: Any) -> None:
        held = {name: len(rows) for name, (_, rows) in ops.dump().items() if rows}
        if held:
            raise UserError(f"the PostgreSQL ledger at {target.store.label()} holds a ledger already"
                            f" ({', '.join(f'{n} {t}' for t, n in sorted(held.items()))} rows)",
                            "move into an empty database: two ledgers' histories are never merged")
        ops.load(dumped)
        if _canonical(ops.dump()) != expected:
            raise UserError("the moved ledger does not read back as the original, so nothing was moved",
                            "report this as a bug; the embedded ledger is unchanged")

    target.transaction(body)
    if target.verify():
        raise UserError(f"the moved ledger at {target.store.label()} does not match its history",
                        "run `pcor-sql budget verify --ledger URL`; the data file was not marked")
    source.store.write_marker(target.store.ledger_id(), target.store.path or "", utc_now())
    return moved
