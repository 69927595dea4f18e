"""A registered dataset's content fingerprint (DESIGN.md §11 "Units across hosts"): how many rows
its relation holds and an order-independent hash of those rows, computed in DuckDB in one scan.

The hash is DuckDB's 64-bit `hash()` of each whole row (every column's value; the columns'
names are not part of it) combined two ways that ignore the rows' order: their sum, exact (a
HUGEINT: 10^19 · 2^64 < 2^127), and their XOR. A row changed, added or removed changes the sum
unless another change makes up exactly for it (a 64-bit hash collision, about 2^-64 for one
random change); a duplicated row changes the count and the sum (XOR alone would cancel it).
DuckDB's `hash` may differ between DuckDB versions, so the method names the version that
computed it: two hosts compare fingerprints only when they run the same one (`method`).

Cost: one parallel scan, about 0.1 s per million rows of four columns on a 2-core machine
(`python -m benchmarks ledger-services` prints it for 10M rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from pcor_sql.sqltext.build import select_from
from pcor_sql.sqltext.quoting import quote_identifier


@dataclass(frozen=True)
class Fingerprint:
    """`rows` and `content_hash` ("sum:xor", hexadecimal) of a relation, by `method`."""

    rows: int
    content_hash: str
    method: str


def method() -> str:
    return f"duckdb {duckdb.__version__} hash sum+xor"


def content_fingerprint(con: duckdb.DuckDBPyConnection, relation_sql: str) -> Fingerprint:
    """The fingerprint of what `relation_sql` reads on DuckDB connection `con` (own cursor)."""
    cur = con.cursor()
    try:
        # The row's hash is DuckDB's hash of its columns' values, named one by one: hashing the
        # row alias would build a struct through `struct_pack`, which a user's macro can shadow
        # (DESIGN.md §6: the owner's SQL never calls a function by a name a macro can take).
        # hash(c1, ..., cn) equals the hash of the row's struct, so fingerprints stay as they were.
        names = [d[0] for d in cur.execute(select_from("*", relation_sql, limit=0)).description]
        row_hash = f"system.main.hash({', '.join(map(quote_identifier, names))})"
        query = select_from(f"system.main.count(*), system.main.sum({row_hash}::HUGEINT), system.main.bit_xor({row_hash})",
                            relation_sql)
        count, total, xor = cur.execute(query).fetchall()[0]
    finally:
        cur.close()
    return Fingerprint(int(count), f"{int(total or 0):x}:{int(xor or 0):x}", method())
