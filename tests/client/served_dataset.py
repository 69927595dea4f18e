"""A small registered dataset served by the real app on a real uvicorn (127.0.0.1, a free
port, in a thread of the test process so a test can read the owner's ledger), for the client,
remote CLI and fuzz tests."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import duckdb

import pcor_sql
import pcor_sql.service
from tests.service.live_server import live_server

ROWS = 120
#: Planted outliers, each far above its (dept, year) cell; all releasable.
OUTLIERS = (7, 31, 58, 95)
#: Releasable but absent: asking about it is answered with the one generic failure, charged.
ABSENT = 9999
RELEASABLE = (*range(ROWS), ABSENT)
#: A text key in a second dataset (keys are ints or strings on the wire).
TEXT_KEYS = ("a-7", "a-31")


@dataclass
class Served:
    url: str
    owner: Any
    tokens: dict[str, str]

    def state(self) -> tuple:
        """Everything a charge changes: the history, every unit's spent ε, every analyst's usage."""
        ledger = self.owner.ledger
        usage = tuple((a.name, tuple((u.notion, u.dataset, u.spent, u.releases) for u in a.usage))
                      for a in self.owner.analysts())
        return ledger.history(), tuple((s.unit, s.notion, s.spent) for s in ledger.statuses()), usage


def make_database(path: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path))
    con.execute("CREATE TYPE dept AS ENUM ('a', 'b', 'c'); CREATE TYPE yr AS ENUM ('2020', '2021')")
    planted = ", ".join(map(str, OUTLIERS))
    con.execute(
        f"CREATE TABLE staff AS SELECT i AS id, (['a', 'b', 'c'])[i % 3 + 1]::dept AS dept,"
        f" (['2020', '2021'])[i % 2 + 1]::yr AS year,"
        f" CASE WHEN i IN ({planted}) THEN 5000.0 + i ELSE 100.0 + (i * 37 % 11) END AS pay FROM range({ROWS}) t(i)")
    con.execute("CREATE TABLE tagged AS SELECT 'a-' || id::VARCHAR AS tag, dept, year, pay FROM staff")
    return con


def register(con: duckdb.DuckDBPyConnection, *, quota: float = 5.0) -> tuple[Any, dict[str, str]]:
    owner = pcor_sql.Owner(con, warn=lambda message: None)
    owner.register("staff", "staff", key="id", metric="pay", by="dept,year", limit=100.0, releasable=list(RELEASABLE))
    owner.register("tagged", "tagged", key="tag", metric="pay", by="dept,year", limit=100.0,
                   releasable=list(TEXT_KEYS))
    tokens = {"alice": owner.add_analyst("alice", quota=quota), "bob": owner.add_analyst("bob", quota=0.25),
              "carol": owner.add_analyst("carol", quota=quota)}
    owner.revoke_analyst("carol")
    return owner, tokens


@contextlib.contextmanager
def served_dataset(path: Path, **app_options: Any) -> Iterator[Served]:
    con = make_database(path)
    try:
        owner, tokens = register(con)
        with live_server(pcor_sql.service.app(owner, **app_options)) as url:
            yield Served(url, owner, tokens)
    finally:
        con.close()
