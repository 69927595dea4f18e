"""Tiny ENUM-typed DuckDB datasets for engine tests (shared fixture module, not a test file).

`small_case()` builds an in-memory table `emp(id, dept, role, salary)` whose `dept` and `role`
columns are ENUM types; `dept` declares a value (`d3`) that no row has, as the paper's §4
requires domains to allow. Record V is `id = 1`, a planted high salary in cell (d0, r0).
`drop_ids` removes rows, which is how the privacy tests build a neighbouring dataset D'.

`MomentZ` is a moment-only z-score verifier (sample std, ddof 1) with the vectorized
`check_many` the COE enumerator uses, so these tests do not depend on the built-in verifiers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import duckdb
import numpy as np

from pcor_sql.core.space import ContextSpace
from pcor_sql.engine.evaluator import Evaluator
from pcor_sql.engine.record_search import prepare_space
from pcor_sql.engine.schema import Schema, resolve_schema
from pcor_sql.engine.summary import CellSummary, build_summary
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal

DEPTS = ("d0", "d1", "d2", "d3")  # d3: declared in the ENUM type, absent from the data
ROLES = ("r0", "r1", "r2")

# (id, dept, role, salary). V = id 1 earns 100 in cell (d0, r0). Facts the tests rely on (and
# re-check by enumeration rather than trust): under MomentZ(2)
# - V's own cell (4 rows) is too small for V to stand out, so start searches must move;
# - id 14 earns 90 in (d1, r2) and hides V in the contexts {d0, d1, ...} × {r0, r2};
# - COE(D, V) holds 20 of the 32 admissible contexts, with population utilities 6..15;
# - dept d2 has one row (id 15) and d3 none: dropping id 15 gives a neighbour D' with the same
#   COE, where every context containing (d2, r1) loses one unit of utility.
BASE_ROWS: tuple[tuple[int, str, str, float], ...] = (
    (1, "d0", "r0", 100.0),
    (2, "d0", "r0", 10.0),
    (3, "d0", "r0", 11.0),
    (4, "d0", "r0", 9.0),
    (5, "d0", "r1", 12.0),
    (6, "d0", "r1", 8.0),
    (7, "d0", "r2", 10.0),
    (8, "d1", "r0", 9.5),
    (9, "d1", "r0", 10.5),
    (10, "d1", "r1", 11.0),
    (11, "d1", "r1", 9.0),
    (12, "d1", "r1", 10.0),
    (13, "d1", "r2", 10.0),
    (14, "d1", "r2", 90.0),
    (15, "d2", "r1", 10.5),
)
NEIGHBOUR_DROP_ID = 15
RECORD_ID = 1


@dataclass(frozen=True)
class MomentZ:
    """Test verifier: V is an outlier iff N ≥ 3, s > 0 and |v − mean| / s > z (s with ddof 1)."""

    z: float = 2.0
    name: str = "moment_z"
    needs_values: bool = False

    def check(self, pop: Any) -> bool:
        return bool(self.check_many(np.array([pop.n], dtype=float), np.array([pop.mean]), np.array([pop.m2]), pop.v)[0])

    def check_many(self, n: np.ndarray, mean: np.ndarray, m2: np.ndarray, v: float) -> np.ndarray:
        n = np.asarray(n, dtype=np.float64)
        mean = np.asarray(mean, dtype=np.float64)
        m2 = np.asarray(m2, dtype=np.float64)
        ok = (n >= 3) & (m2 > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.sqrt(m2 / np.maximum(n - 1, 1))
            score = np.abs(v - mean) / s
        return ok & (score > self.z)

    def options(self) -> dict[str, Any]:
        return {"z": self.z}


@dataclass(frozen=True)
class SmallCase:
    """A loaded dataset with its schema, summary, record V and V's context space."""

    con: duckdb.DuckDBPyConnection
    table: str
    schema: Schema
    summary: CellSummary
    row: Mapping[str, Any]
    v: float
    space: ContextSpace

    def evaluator(self, verifier: Any = None, *, plain: bool = False, utility: str = "population", start: int | None = None) -> Evaluator:
        return Evaluator(
            self.con, self.summary, self.space, self.v, verifier if verifier is not None else MomentZ(),
            utility=utility, start=start, plain=plain,
        )

    def close(self) -> None:
        self.con.close()


def create_enum_table(
    con: duckdb.DuckDBPyConnection,
    table: str,
    enums: Mapping[str, Sequence[str]],
    rows: Iterable[Sequence[Any]],
    *,
    key: str = "id",
    metric: str = "salary",
) -> None:
    """CREATE TABLE table(key INTEGER, <enum columns...>, metric DOUBLE) and insert `rows`."""
    cols = [f"{quote_identifier(key)} INTEGER"]
    for name, values in enums.items():
        type_name = quote_identifier(f"{table}_{name}_t")
        con.execute(f"CREATE TYPE {type_name} AS ENUM ({', '.join(quote_literal(v) for v in values)})")
        cols.append(f"{quote_identifier(name)} {type_name}")
    cols.append(f"{quote_identifier(metric)} DOUBLE")
    con.execute(f"CREATE TABLE {quote_identifier(table)} ({', '.join(cols)})")
    placeholders = ", ".join("?" for _ in range(len(enums) + 2))
    con.executemany(f"INSERT INTO {quote_identifier(table)} VALUES ({placeholders})", [list(r) for r in rows])


def load_case(con: duckdb.DuckDBPyConnection, table: str, record_id: int, *, metric: str = "salary", key: str = "id") -> SmallCase:
    """Schema (ENUM columns as attributes), summary, V's row and V's space for record `record_id`."""
    relation = quote_identifier(table)
    schema = resolve_schema(con, relation, quote_identifier(metric))
    summary = build_summary(con, schema)
    cur = con.cursor()
    res = cur.execute(f"SELECT * FROM {relation} WHERE {quote_identifier(key)} = ?", [record_id])
    names = [d[0] for d in res.description]
    rows = res.fetchall()
    if len(rows) != 1:
        raise ValueError(f"record {record_id} matched {len(rows)} rows")
    row = dict(zip(names, rows[0]))
    return SmallCase(con, table, schema, summary, row, float(row[metric]), prepare_space(summary, row))


def small_case(drop_ids: Sequence[int] = (), rows: Sequence[Sequence[Any]] = BASE_ROWS) -> SmallCase:
    """The default dataset (optionally without the rows `drop_ids`), V = id 1, in a fresh connection."""
    con = duckdb.connect()
    kept = [r for r in rows if r[0] not in set(drop_ids)]
    create_enum_table(con, "emp", {"dept": DEPTS, "role": ROLES}, kept)
    return load_case(con, "emp", RECORD_ID)
