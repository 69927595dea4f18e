"""The DuckDB store's SQL of the history's hash chain (DESIGN.md §11 "A tamper-evident
history"; its rules are `history_chain`, what the writers call `history_chain_steps`): read the
rows an append needs, read everything a check needs, append entries and heads, and put rows
back — the chain's part of `duckdb_store.DuckDBOps` (`LedgerOps.chain_*`).

Each runs inside the caller's transaction, on its cursor, so an entry is committed with the
history row or outcome it records or not at all. Two writers appending to one chain write one
`pcor.chain_heads` row and insert one (unit, notion, link) key, so the second is refused and
runs again from a fresh snapshot (`transactions.run_transaction`), where it sees the first's head.
Within the store's transactions the rows and heads an append needs are usually kept already
(`duckdb_chain_memory`): then it reads nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pcor_sql.ledger.charge_rules import Tables
from pcor_sql.ledger.duckdb_chain_memory import Written, head_moved
from pcor_sql.ledger.history_chain import ENTRY_COLUMNS, FIELDS

_COLUMNS = ", ".join(f"h.{name}" for name in FIELDS)
_ENTRY = ", ".join(ENTRY_COLUMNS)


def _ids_match(ids: Sequence[str], column: str) -> str:
    # One id (a lone request) is an equality the table's index on release_id answers.
    return f"{column} = $1::VARCHAR" if len(ids) == 1 else f"{column} IN (SELECT unnest($1::VARCHAR[]))"


def chain_rows(cur: Any, t: Tables, ids: Sequence[str], written: Written | None = None
               ) -> tuple[list[tuple], dict[tuple[str, str], tuple[int, str]]]:
    """The history rows of `ids` (FIELDS order) and their chains' heads: from what `written`
    keeps, else in one statement."""
    ids = list(ids)
    kept = written.answer(ids) if written is not None else None
    if kept is not None:
        return kept
    found = cur.execute(f"SELECT {_COLUMNS}, c.link, c.head FROM {t.history} h LEFT JOIN {t.chain_heads} c"
                        f" ON c.unit = h.unit AND c.notion = h.notion WHERE {_ids_match(ids, 'h.release_id')}",
                        [ids[0] if len(ids) == 1 else ids]).fetchall()
    heads = {(r[1], r[2]): (r[-2], r[-1]) for r in found if r[-2] is not None}
    return [tuple(r[:-2]) for r in found], heads


def chain_all(cur: Any, t: Tables) -> tuple[list[tuple], list[tuple], dict[tuple[str, str], tuple[int, str]]]:
    """Every history row, every chain entry (ENTRY_COLUMNS, in link order) and every head."""
    rows = [tuple(r) for r in cur.execute(f"SELECT {_COLUMNS} FROM {t.history} h").fetchall()]
    entries = [tuple(r) for r in cur.execute(f"SELECT {_ENTRY} FROM {t.history_chain} ORDER BY unit, notion, link"
                                             ).fetchall()]
    return rows, entries, chain_heads(cur, t)


def chain_heads(cur: Any, t: Tables) -> dict[tuple[str, str], tuple[int, str]]:
    return {(u, n): (link, head) for u, n, link, head in cur.execute(
        f"SELECT unit, notion, link, head FROM {t.chain_heads}").fetchall()}


def chain_append(cur: Any, t: Tables, entries: Sequence[Sequence[Any]], heads: Mapping[tuple[str, str], tuple[int, str]],
                 stored: Iterable[tuple[str, str]], now: Any, written: Written | None = None) -> None:
    """Insert `entries` (ENTRY_COLUMNS) and set each chain's head (two statements); `stored`: the
    chains whose head row the caller read (one chain's is then an UPDATE: a fifth of the
    upsert's time, measured at 1.0 against 5.2 ms). A head the caller took from the process's
    memory (`written`) is set only where the table still holds it (else a conflict)."""
    if not entries:
        return
    guards = {pair: written.guard(pair) for pair in heads} if written is not None else {}
    types = ("VARCHAR", "VARCHAR", "BIGINT", *["VARCHAR"] * 6)
    if len(entries) == 1:  # one entry (a lone request's charge or outcome): scalars, not 9 unnests (~1 ms less)
        select, params = ", ".join(f"${i + 1}::{kind}" for i, kind in enumerate(types)), [*entries[0], now]
    else:
        select = ", ".join(f"unnest(${i + 1}::{kind}[])" for i, kind in enumerate(types))
        params = [*map(list, zip(*entries)), now]
    cur.execute(f"INSERT INTO {t.history_chain} ({_ENTRY}, recorded_at) SELECT {select}, $10", params)
    pairs = sorted(heads)
    if len(pairs) == 1 and pairs[0] in set(stored):  # the common case: a reservation of one unit
        (unit, notion), (link, head) = pairs[0], heads[pairs[0]]
        old = guards.get(pairs[0])
        check = " AND link = $6 AND head = $7" if old is not None else ""
        [(changed,)] = cur.execute(f"UPDATE {t.chain_heads} SET link = $3, head = $4, updated_at = $5"
                                   f" WHERE unit = $1 AND notion = $2{check}",
                                   [unit, notion, link, head, now, *(old or ())]).fetchall()
        if old is not None and changed != 1:
            raise head_moved(pairs[0])
        if written is not None:
            written.appended(dict(heads))
        return
    if any(old is not None for old in guards.values()):
        # Several chains, some from the memory: checked by reading them (rare: a charge of several units).
        found = chain_heads(cur, t)
        for pair, old in guards.items():
            if old is not None and found.get(pair) != old:
                raise head_moved(pair)
    cur.execute(
        f"INSERT INTO {t.chain_heads} (unit, notion, link, head, updated_at) SELECT unnest($1::VARCHAR[]),"
        " unnest($2::VARCHAR[]), unnest($3::BIGINT[]), unnest($4::VARCHAR[]), $5 ON CONFLICT (unit, notion)"
        " DO UPDATE SET link = excluded.link, head = excluded.head, updated_at = excluded.updated_at",
        [[u for u, _ in pairs], [n for _, n in pairs], [heads[p][0] for p in pairs], [heads[p][1] for p in pairs], now])
    if written is not None:
        written.appended(dict(heads))


def chain_put_back(cur: Any, t: Tables, rows: Iterable[Sequence[Any]], present: set[tuple[str, str]],
                   drop: Iterable[tuple[str, str]], written: Written | None = None) -> None:
    """A repair's writes: each of `rows` (FIELDS order) as the chain holds it — updated where the
    history has its (release id, unit), `present`, else inserted — and the chains of `drop` emptied."""
    if written is not None:  # rows and chains rewritten: nothing kept holds after it
        written.forget_rows()
        written.rewrote = True
    settable = [i for i, f in enumerate(FIELDS) if f not in ("release_id", "unit")]
    assignments = ", ".join(f"{FIELDS[i]} = ${n + 3}" for n, i in enumerate(settable))
    for row in rows:
        if (row[0], row[1]) in present:
            cur.execute(f"UPDATE {t.history} SET {assignments} WHERE release_id = $1 AND unit = $2",
                        [row[0], row[1], *(row[i] for i in settable)])
        else:
            cur.execute(f"INSERT INTO {t.history} ({', '.join(FIELDS)}) VALUES"
                        f" ({', '.join(f'${i + 1}' for i in range(len(FIELDS)))})", list(row))
    for unit, notion in drop:
        cur.execute(f"DELETE FROM {t.history_chain} WHERE unit = $1 AND notion = $2", [unit, notion])
        cur.execute(f"DELETE FROM {t.chain_heads} WHERE unit = $1 AND notion = $2", [unit, notion])
