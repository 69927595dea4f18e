"""The PostgreSQL store's SQL of the history's hash chain and of the reservations' leases
(DESIGN.md §11 "A tamper-evident history", "Dead hosts"; the rules are `history_chain` and
`leases`) — their part of `postgres_store.PostgresOps`, in the caller's SERIALIZABLE
transaction (placeholders $1, $2, ...: `postgres_ops.run`).

The chain never forks: an append reads the chain's head and writes it back, and inserts the
(unit, notion, link) key of its entries, so of two services appending to one chain at once the
second to commit fails (serialization failure, or the key's unique violation) and runs again
from a fresh snapshot, where it extends the first's entry. Leases are timed by the server's
clock (`now()` in UTC), never a host's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pcor_sql.ledger.history_chain import ENTRY_COLUMNS, FIELDS
from pcor_sql.ledger.postgres_ops import LEASED, NOW, _all, run

_COLUMNS = ", ".join(f"h.{name}" for name in FIELDS)
_ENTRY = ", ".join(ENTRY_COLUMNS)
_ENTRY_TYPES = ("text", "text", "bigint", "text", "text", "text", "text", "text", "text")


def chain_rows(cur: Any, ids: Sequence[str]) -> tuple[list[tuple], dict[tuple[str, str], tuple[int, str]]]:
    found = _all(cur, f"SELECT {_COLUMNS}, c.link, c.head FROM pcor.history h LEFT JOIN pcor.chain_heads c"
                      " ON c.unit = h.unit AND c.notion = h.notion WHERE h.release_id = ANY($1::text[])", [list(ids)])
    heads = {(r[1], r[2]): (r[-2], r[-1]) for r in found if r[-2] is not None}
    return [r[:-2] for r in found], heads


def chain_heads(cur: Any) -> dict[tuple[str, str], tuple[int, str]]:
    return {(u, n): (link, head) for u, n, link, head in _all(cur, "SELECT unit, notion, link, head FROM pcor.chain_heads")}


def chain_all(cur: Any) -> tuple[list[tuple], list[tuple], dict[tuple[str, str], tuple[int, str]]]:
    rows = _all(cur, f"SELECT {_COLUMNS} FROM pcor.history h")
    entries = _all(cur, f"SELECT {_ENTRY} FROM pcor.history_chain ORDER BY unit COLLATE \"C\", notion, link")
    return rows, entries, chain_heads(cur)


def chain_append(cur: Any, entries: Sequence[Sequence[Any]], heads: Mapping[tuple[str, str], tuple[int, str]],
                 stored: Iterable[tuple[str, str]], now: Any) -> None:
    if not entries:
        return
    arrays = ", ".join(f"${i + 1}::{kind}[]" for i, kind in enumerate(_ENTRY_TYPES))
    run(cur, f"INSERT INTO pcor.history_chain ({_ENTRY}, recorded_at) SELECT v.*, $10::timestamp FROM unnest({arrays}) AS v",
        [*map(list, zip(*entries)), now])
    pairs = sorted(heads)
    if len(pairs) == 1 and pairs[0] in set(stored):  # the common case: one unit's chain, its head read
        (unit, notion), (link, head) = pairs[0], heads[pairs[0]]
        run(cur, "UPDATE pcor.chain_heads SET link = $3, head = $4, updated_at = $5 WHERE unit = $1 AND notion = $2",
            [unit, notion, link, head, now])
        return
    run(cur, "INSERT INTO pcor.chain_heads (unit, notion, link, head, updated_at)"
             " SELECT v.u, v.n, v.l, v.h, $5 FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS v(u, n, l, h)"
             " ON CONFLICT (unit, notion) DO UPDATE SET link = excluded.link, head = excluded.head,"
             " updated_at = excluded.updated_at",
        [[u for u, _ in pairs], [n for _, n in pairs], [heads[p][0] for p in pairs], [heads[p][1] for p in pairs], now])


def chain_put_back(cur: Any, rows: Iterable[Sequence[Any]], present: set[tuple[str, str]],
                   drop: Iterable[tuple[str, str]]) -> None:
    settable = [i for i, f in enumerate(FIELDS) if f not in ("release_id", "unit")]
    assignments = ", ".join(f"{FIELDS[i]} = ${n + 3}" for n, i in enumerate(settable))
    for row in rows:
        if (row[0], row[1]) in present:
            run(cur, f"UPDATE pcor.history SET {assignments} WHERE release_id = $1 AND unit = $2",
                [row[0], row[1], *(row[i] for i in settable)])
        else:
            run(cur, f"INSERT INTO pcor.history ({', '.join(FIELDS)}) VALUES"
                     f" ({', '.join(f'${i + 1}' for i in range(len(FIELDS)))})", list(row))
    for unit, notion in drop:
        run(cur, "DELETE FROM pcor.history_chain WHERE unit = $1 AND notion = $2", [unit, notion])
        run(cur, "DELETE FROM pcor.chain_heads WHERE unit = $1 AND notion = $2", [unit, notion])


# ---- leases ---------------------------------------------------------------------------------

def renew_lease(cur: Any, holder: tuple[str, int, str], seconds: float) -> None:
    run(cur, f"INSERT INTO pcor.leases (host, pid, process_token, expires_at, renewed_at)"
             f" VALUES ($1, $2, $3, {NOW} + make_interval(secs => $4::float8), {NOW})"
             " ON CONFLICT (host, pid, process_token) DO UPDATE SET expires_at = excluded.expires_at,"
             " renewed_at = excluded.renewed_at", [*holder, float(seconds)])


def end_lease(cur: Any, holder: tuple[str, int, str]) -> None:
    run(cur, "DELETE FROM pcor.leases WHERE host = $1 AND pid = $2 AND process_token = $3", list(holder))


def lapsed_leases(cur: Any) -> int:
    return int(_all(cur, f"SELECT count(*) FROM pcor.leases WHERE expires_at < {NOW}")[0][0])


def interrupt_unleased(cur: Any, now: Any) -> list[str]:
    changed = _all(cur, f"UPDATE pcor.history AS h SET outcome = 'interrupted', reason = 'lease lapsed', finished_at = $1"
                        f" WHERE h.outcome = 'running' AND NOT {LEASED} RETURNING h.release_id", [now])
    run(cur, f"DELETE FROM pcor.leases WHERE expires_at < {NOW}")
    return sorted({rid for (rid,) in changed})
