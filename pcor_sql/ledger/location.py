"""Where a connection's budget ledger lives (DESIGN.md §6 "Where the ledger lives").

Pinned to the data: when the connection's default database is a DuckDB file, the ledger is in
that file (schema `pcor`), reached through fresh cursors that start at the default database,
so a caller's `USE` or `ATTACH` cannot move it. Otherwise the ledger is a file: the one given
(`ledger=` / `--ledger PATH`), else `$PCOR_SQL_LEDGER`, else — for the CLI — the per-user
default under the XDG data directory. It is in memory only when asked for (`":memory:"`), or
for a Python in-memory connection given no ledger; an in-memory ledger always warns.

A libpq URL (`postgresql://…`, DESIGN.md §11) names a PostgreSQL ledger, wherever a ledger is
given — also with a DuckDB data file, whose units then live there: the file says so with a
marker naming that ledger (`duckdb_store.MARKER_TABLE`), written when it is first used with the
server ledger (or moved there, `ledger_move`). A marked file is refused with its embedded
ledger, and a file whose embedded ledger holds anything is refused with a server ledger until
it is moved: one data file, one ledger.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import duckdb

from pcor_sql.errors import UserError
from pcor_sql.ledger.database_file import connect_with_retry
from pcor_sql.ledger.duckdb_store import MARKER_TABLE, mark_file, pcor_tables, read_marker
from pcor_sql.ledger.layout import LOCATION_SQL
from pcor_sql.ledger.postgres_store import PostgresStore, is_postgres_url
from pcor_sql.ledger.store import Ledger
from pcor_sql.ledger.transactions import utc_now

ENV = "PCOR_SQL_LEDGER"
IN_MEMORY = ":memory:"


def default_ledger_path() -> Path:
    """The per-user ledger file: `$XDG_DATA_HOME/pcor-sql/ledger.duckdb` (XDG_DATA_HOME
    defaults to ~/.local/share)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "pcor-sql" / "ledger.duckdb"


def default_database(con: duckdb.DuckDBPyConnection) -> tuple:
    """`LOCATION_SQL`'s row for `con`'s default database (a fresh cursor starts there)."""
    cur = con.cursor()
    try:
        rows = cur.execute(LOCATION_SQL).fetchall()
    finally:
        cur.close()
    return rows[0]


def open_ledger(
    con: duckdb.DuckDBPyConnection,
    ledger: str | os.PathLike[str] | Ledger | None = None,
    *,
    warn: Callable[[str], None] | None = None,
    per_user_default: bool = False,
) -> Ledger:
    """The ledger for the data behind `con` (see the module docstring). `per_user_default`: with
    no ledger given and no `$PCOR_SQL_LEDGER`, use the per-user file rather than memory (the CLI)."""
    if isinstance(ledger, Ledger):
        return ledger
    location = default_database(con)
    held_by_data = location[1] or None
    server = ledger if is_postgres_url(ledger) else None
    if server is None and ledger is None and is_postgres_url(os.environ.get(ENV)):
        server = os.environ[ENV]
    if held_by_data is not None:
        return _for_data_file(con, location, server, ledger, warn)
    if server is not None:
        return Ledger(store=PostgresStore(server), warn=warn)
    target = ledger if ledger is not None else os.environ.get(ENV) or None
    if target is None and per_user_default:
        target = default_ledger_path()
    if target is None or os.fspath(target) == IN_MEMORY:
        return Ledger(con, warn=warn, location=location)
    return Ledger(_connect_ledger_file(Path(os.fspath(target)).expanduser()), warn=warn, owned=True)


def _for_data_file(con: duckdb.DuckDBPyConnection, location: tuple, server: str | None,
                   ledger: object, warn: Callable[[str], None] | None) -> Ledger:
    """The ledger of a DuckDB data file: its embedded one, or the server ledger its marker names."""
    held_by_data, database, tables = location[1], location[0], pcor_tables(location[3])
    marker = read_marker(con, database) if MARKER_TABLE in tables else None
    if server is None:
        if marker is not None:
            raise UserError(f"the units of {held_by_data!r} are kept in the PostgreSQL ledger {marker[1]}, not in the file",
                            f"give that ledger: --ledger {marker[1]} (ledger='{marker[1]}' in Python)")
        if ledger is not None:
            raise UserError(
                f"the data lives in the DuckDB file {held_by_data!r}, which keeps its own budget ledger",
                "drop the ledger option (--ledger): a second ledger would let the same data be spent twice",
            )
        return Ledger(con, warn=warn, location=location)
    shared = Ledger(store=PostgresStore(server), warn=warn)
    ledger_id = shared.store.ledger_id()  # type: ignore[attr-defined]
    if marker is not None:
        if marker[0] != ledger_id:
            shared.close()
            raise UserError(f"the units of {held_by_data!r} are kept in another PostgreSQL ledger ({marker[1]})",
                            f"give that ledger: --ledger {marker[1]}")
        return shared
    if tables - {MARKER_TABLE} and _holds_anything(Ledger(con, warn=warn, location=location)):
        shared.close()
        raise UserError(f"{held_by_data!r} keeps its own budget ledger, with charges, limits or analysts in it",
                        f"move it into the server ledger first: pcor-sql budget migrate --db {held_by_data} --to URL")
    if not location[2]:  # read-write: the file says from now on where its units live
        mark_file(con, database, ledger_id, shared.store.path or "", utc_now())
    return shared


def _holds_anything(ledger: Ledger) -> bool:
    return any(rows for _, rows in ledger.read(lambda ops: ops.dump(), {}).values())


def _connect_ledger_file(path: Path) -> duckdb.DuckDBPyConnection:
    if path.exists() and not path.is_file():
        raise UserError(f"ledger {str(path)!r} is not a file", "give a path to a ledger file (made if missing)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the ledger's folder {str(path.parent)!r}: {exc.strerror}",
                        "give a ledger path in a writable folder") from None
    try:
        return connect_with_retry(path, what="ledger")
    except duckdb.Error as exc:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise UserError(f"cannot open ledger {str(path)!r}: {first}", "give a DuckDB ledger file (made if missing)") from None
