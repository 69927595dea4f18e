"""The data a command works on (`--db PATH`, else the bundled demo tables the command names, or
`--engine spark`) and its budget ledger (`--ledger PATH`): the owner's handle, opened by
`pcor_sql.Owner.open` (data opening lives with the backends, ledger placement with the ledger;
the CLI decides neither). Without `--db` the ledger is `--ledger`, else `$PCOR_SQL_LEDGER`, else
the per-user ledger under the XDG data directory; with `--db FILE` it lives in that file, or in
the PostgreSQL ledger `--ledger postgresql://…` that the file's marker names (DESIGN.md §11).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from pcor_sql.errors import UserError

if TYPE_CHECKING:  # imported when a command opens data: `pcor-sql remote ...` needs no DuckDB
    from pcor_sql.owner import Owner


@contextmanager
def open_owner(db: Path | None, ledger: str | None = None, *, reads: str | None = None, allow_seeded: bool = False,
               engine: str = "duckdb", spark_master: str = "local[*]", lazy_ledger: bool = False) -> Iterator[Owner]:
    """The owner's handle, warnings printed on stderr; closed at the end of the block. `reads`:
    the command's text (query, relation or unit), which names the bundled tables to load."""
    from pcor_sql.cli.console import make_warn
    from pcor_sql.owner import Owner

    server = ledger is not None and ledger.startswith(("postgresql://", "postgres://"))
    if db is not None and ledger is not None and engine == "duckdb" and not server:
        raise UserError(
            "--ledger was given with --db: a database file keeps its own budget ledger",
            "drop --ledger (a second ledger would let the same data be spent twice)",
        )
    from pcor_sql.cli.served_commands import served_owner

    held = served_owner(db)
    if held is not None:  # inside the service that holds `db` (`served_commands`): its open Owner
        # Warnings reach the caller's stderr, and a seeded release is allowed as the caller said
        # (commands run there one at a time: `served_commands`).
        previous = held.session.warn, held.session.allow_seeded
        held.session.warn, held.session.allow_seeded = make_warn(), allow_seeded
        try:
            yield held
        finally:
            held.session.warn, held.session.allow_seeded = previous
        return
    with Owner.open(db, ledger, reads=reads, engine=engine, spark_master=spark_master, warn=make_warn(),
                    allow_seeded=allow_seeded, lazy_ledger=lazy_ledger) as owner:
        yield owner


@contextmanager
def open_session(db: Path | None, engine: str = "duckdb", spark_master: str = "local[*]",
                 reads: str | None = None) -> Iterator[Any]:
    """The owner's handle for uncharged work (`coe`): its ledger is never opened."""
    if db is not None and engine == "spark":
        raise UserError("--db names a DuckDB database, and with --engine spark the rows are read by Spark",
                        "drop --db (the relation names Spark tables or files)")
    with open_owner(db, None, reads=reads, engine=engine, spark_master=spark_master, lazy_ledger=True) as owner:
        yield owner
