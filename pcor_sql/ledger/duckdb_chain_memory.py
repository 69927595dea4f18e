"""What the embedded store keeps in process so that appending to the history chain reads nothing
(DESIGN.md §11 "A tamper-evident history", "Two stores, one contract"): each chain's head as
this process last committed it, and within one transaction the history rows it has just written.

Why the head may be kept here: a DuckDB file has one writer process at a time (DESIGN.md §11),
and in that process every write of a chain's head goes through this store's transactions, under
its write lock. So the head committed last is the head. Nothing relies on that alone: an append
from a kept head writes entry `link + 1`, whose (unit, notion, link) key a writer that appended
meanwhile (another store on the same file, a repair) already holds, and sets the head row only
where it still holds the kept (link, hash) — else the transaction is refused as a conflict, the
memory is dropped, and it runs again reading the head from the table. A transaction that fails,
for any reason, drops the memory too; a transaction that rewrites chains (a repair) drops it at
its commit.

Why a transaction's rows may be taken from its own writes: the history rows a charge inserts are
the only rows of its release ids (the charge read that none was there, and (release_id, unit) is
the key), and an outcome changes every row of its release ids at once (each reservation's rows
are written 'running' together and change together). The INSERT and the UPDATE return the rows
as stored (`RETURNING`), so the chain's entries are those a read after them makes: the same chain
as the other store's. Any other write of the history in the transaction forgets them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

import duckdb

Pair = tuple[str, str]
Head = tuple[int, str]


class HeadMemory:
    """Each chain's head as this process committed it last (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heads: dict[Pair, Head] = {}

    def get(self, pair: Pair) -> Head | None:
        with self._lock:
            return self._heads.get(pair)

    def clear(self) -> None:
        with self._lock:
            self._heads.clear()

    def committed(self, written: "Written", locked: bool) -> None:
        """`written`'s transaction committed: keep the heads it set — only if it ran under the
        write lock (in turn with every other writer of this process) and rewrote no chain."""
        with self._lock:
            if written.rewrote or (not locked and written.heads):
                self._heads.clear()
            else:
                self._heads.update(written.heads)


class Written:
    """One transaction's attempt: the history rows it wrote (by release id, FIELDS order), the
    heads it took from the memory, and the heads it set."""

    def __init__(self, memory: HeadMemory):
        self.memory = memory
        self.rows: dict[str, list[tuple]] = {}
        self.kept: dict[Pair, Head] = {}
        self.heads: dict[Pair, Head] = {}
        self.rewrote = False

    def note_rows(self, rows: Iterable[Sequence[Any]]) -> None:
        """Rows just written (inserted, or changed as a whole release), as the table holds them."""
        for row in rows:
            self.rows.setdefault(row[0], []).append(tuple(row))

    def forget_rows(self) -> None:
        """The history was written otherwise: read it again."""
        self.rows.clear()

    def answer(self, ids: Sequence[str]) -> tuple[list[tuple], dict[Pair, Head]] | None:
        """`chain_rows(ids)` from what is kept, or None when any of it must be read."""
        if not ids or any(i not in self.rows for i in ids):
            return None
        rows = [r for i in ids for r in self.rows[i]]
        heads: dict[Pair, Head] = {}
        for pair in {(r[1], r[2]) for r in rows}:
            head = self.heads.get(pair) or self.memory.get(pair)
            if head is None:
                return None
            heads[pair] = head
        for pair, head in heads.items():
            if pair not in self.heads:
                self.kept[pair] = head
        return rows, heads

    def guard(self, pair: Pair) -> Head | None:
        """The kept head an append to `pair` must still find in the table (None: read in this
        transaction, nothing to check)."""
        return self.kept.pop(pair, None)

    def appended(self, heads: dict[Pair, Head]) -> None:
        self.heads.update(heads)


def head_moved(pair: Pair) -> duckdb.TransactionException:
    """The conflict an append from a stale kept head raises (the transaction runs again)."""
    return duckdb.TransactionException(f"Conflict: the chain head of {pair[0]!r} ({pair[1]}) moved")
