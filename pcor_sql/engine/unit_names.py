"""How a privacy unit is named: by what the data *is*, never by the alias it was reached
through (DESIGN.md §6 "Privacy unit"). The ledger keys budgets by these names (text), so a
name must be the same for every spelling of the same data, and stable for as long as the data is.

- **A table of the ledger's own database** — the connection's default database, when it is a
  DuckDB file, which holds the ledger (schema `pcor`) — is `schema.table` (`main.t`): no
  catalog part, because the alias a file is opened under (`data` for `data.duckdb`, `hard` for a
  hard link `hard.duckdb`, or any `ATTACH ... AS anything` of the same file) says nothing about
  the data, and the ledger inside the file moves with it. The file is recognised by its
  (device, inode), so a hard link or a second path to it is the same database.
- **A table of another DuckDB file** (an `ATTACH` of a file that is not the ledger's database)
  is refused: that file keeps its own pinned ledger (used whenever it is opened), so charging its
  tables here would open a second account for the same data.
- **A table of an in-memory database** is `catalog.schema.table` (`memory.main.t`,
  `temp.main.t`): in memory a database has no identity beyond its name in this process, and one
  in-memory database cannot be attached under two names.
- **A bundled table** (comment `pcor-sql bundled dataset: <name>`) is `bundled:<name>` wherever
  it was loaded.
- **A file** is `file:` + its real absolute path (see `unit_files`), **a registered object**
  `object:temp.main.<name>`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable

import duckdb

from pcor_sql.engine.datasets import BUNDLED_COMMENT_PREFIX
from pcor_sql.errors import UserError

FIX = "register a view over a table or a file path the engine can resolve"
_HOME_SQL = ("SELECT database_name, path FROM system.main.duckdb_databases() "
             "WHERE database_name = system.main.current_database()")


@dataclass(frozen=True, order=True)
class Unit:
    """One privacy account: `name` is 'main.salaries', 'memory.main.salaries',
    'file:/abs/path/x.parquet', 'bundled:salaries' or 'object:temp.main.df'; `kind` is
    'table', 'file', 'object' or 'bundled'."""

    name: str
    kind: str


@dataclass(frozen=True)
class Home:
    """The connection's default database (where the ledger is pinned when it is a file): its
    catalog name and, for a file, the file's (device, inode)."""

    database: str
    identity: tuple[int, int] | None


def home_database(con: duckdb.DuckDBPyConnection) -> Home:
    """`con`'s default database, read on a fresh cursor (which starts there), so a caller's
    `USE` cannot move it. One catalog statement; a connection's answer never changes."""
    cur = con.cursor()
    try:
        rows = cur.execute(_HOME_SQL).fetchall()
    finally:
        cur.close()
    database, path = rows[0] if rows else ("", None)
    return Home(str(database), file_identity(path) if path else None)


def file_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, or None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class DatabaseNames:
    """Names the tables the plan reads, given the databases attached when it was made:
    `databases` rows are (name, path, type) from duckdb_databases(). `home` gives the
    connection's default database, asked for only when a table of a DuckDB file is read."""

    def __init__(self, databases: list, home: Callable[[], Home]):
        self.databases = {str(name).lower(): (name, path, kind) for name, path, kind in databases}
        self.home = home
        self._identity: dict[str, tuple[int, int] | None] = {}

    def table_unit(self, parts: tuple[str, ...], comment: str | None) -> Unit:
        """The unit of the table `parts` = (catalog, schema, table), as the catalog spells them."""
        if (comment or "").startswith(BUNDLED_COMMENT_PREFIX):
            return Unit("bundled:" + comment[len(BUNDLED_COMMENT_PREFIX):], "bundled")  # type: ignore[index]
        name, path, kind = self.databases.get(parts[0].lower(), (parts[0], None, "duckdb"))
        if kind != "duckdb":
            raise UserError(
                f"the query reads {canonical_name(parts)} from an attached {kind} database, which the engine cannot charge",
                "copy the table into the DuckDB database (CREATE TABLE ... AS SELECT ...) and read the copy",
            )
        if not path:
            return Unit(canonical_name(parts), "table")
        if path not in self._identity:
            self._identity[path] = file_identity(path)
        identity = self._identity[path]
        if identity is not None and identity == self.home().identity:
            return Unit(canonical_name(parts[1:]), "table")
        raise UserError(
            f"the query reads {canonical_name(parts)} from the DuckDB file {path!r} (attached as {name}), which "
            "keeps its own budget ledger: charging it here would open a second account for the same data",
            f"open that file itself to release from it (pcor-sql --db {path}, or duckdb.connect on the path)",
        )


_PART = re.compile(r'"((?:[^"]|"")*)"|([^."]+)')


def split_qualified(text: str) -> tuple[str, ...]:
    """`memory.main."my.t"` → ('memory', 'main', 'my.t'): DuckDB's rendering of a qualified
    name (parts double-quoted where needed, inner quotes doubled) split into its parts."""
    return tuple(m[2] if m[1] is None else m[1].replace('""', '"') for m in _PART.finditer(text))


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def canonical_name(parts: tuple[str, ...]) -> str:
    """Parts joined by dots, each double-quoted only when it is not a plain identifier."""
    return ".".join(p if _PLAIN.fullmatch(p) else '"' + p.replace('"', '""') + '"' for p in parts)


def short(text: str) -> str:
    """A one-line excerpt of SQL for a message."""
    one_line = " ".join(text.split())
    return repr(one_line if len(one_line) <= 60 else one_line[:57] + "...")


def low(parts: Any) -> tuple[str, ...]:
    return tuple(str(p).lower() for p in parts)
