"""The search oracle: validity and utility of contexts for one record V, cached by context.

Two paths answer the same questions. The fast path reads the per-cell summary (no table
scan per context); the plain path executes the compiled WHERE clause in DuckDB for every
context. Tests hold them to the same verdicts.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, Union, cast

import duckdb
import numpy as np
import pyarrow as pa

from pcor_sql.core.space import ContextSpace
from pcor_sql.core.start import find_start
from pcor_sql.core.verifiers.base import ArrayPopulation, Population, SqlReadingVerifier, Verifier
from pcor_sql.core.verifiers.capabilities import capabilities_of
from pcor_sql.engine.coe_enumeration import enumerate_coe
from pcor_sql.engine.context_sql import context_predicate
from pcor_sql.engine.compiled_checks import compiled_check
from pcor_sql.engine.summary import CellSummary
from pcor_sql.core.work import spend
from pcor_sql.errors import InternalError, UserError
from pcor_sql.request_specs import UTILITIES
from pcor_sql.sqltext.build import METRIC_ALIAS, metric_values, select_from
from pcor_sql.core.choices import Utility


def plain_population_sql(summary_or_schema: Any, space: ContextSpace, mask: int) -> str:
    """The population query of context `mask`, run as-is on DuckDB by the plain path."""
    schema = getattr(summary_or_schema, "schema", summary_or_schema)
    where = context_predicate(space, mask, cast_varchar=schema.cast_varchar, omit_full=False)
    return metric_values(schema.metric_sql, schema.relation_sql, where)


class RowReader(Protocol):
    """Another engine's data access as the plain path reads it (`backends.base.DataAccess.arrow`):
    DuckDB's text, run in its own dialect. A protocol, since the engine never imports the backends
    (DESIGN.md §4 "Layers")."""

    def arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table: ...


#: Where the plain path and SQL verifiers read rows: a DuckDB connection or another engine's data
#: access; None in a search process, which reads none (`search_processes`).
Rows = Union[duckdb.DuckDBPyConnection, RowReader, None]


class Evaluator:
    """Answers `is_valid`, `utility` and `coe` for the searches (the `Oracle` protocol)."""

    def __init__(
        self,
        con: Rows,
        summary: CellSummary,
        space: ContextSpace,
        v: float,
        verifier: Verifier,
        *,
        utility: str = Utility.POPULATION,
        start: int | None = None,
        plain: bool = False,
        remember: bool = False,
    ):
        if utility not in UTILITIES:
            raise UserError(f"unknown utility {utility!r}", f"use one of: {', '.join(UTILITIES)}")
        if utility == Utility.OVERLAP and start is None:
            raise InternalError("overlap utility without a starting context")
        self.con = con
        self.summary = summary
        self.space = space
        self.v = float(v)
        self.verifier = verifier
        self.utility_name = utility
        self.start = start
        self.plain = plain
        # The contexts this oracle was asked about, and their sizes, by `space.key` (bytes on a
        # wide space: Python's int hash makes a wide context's neighbours collide).
        self._valid: dict[int | bytes, bool] = {}
        self._count: dict[int | bytes, int] = {}
        self._key = space.key
        # `remember`: read and add to the verdicts earlier releases on this summary made
        # (`engine.verdicts`: same answers, so the same outputs). The plain path never does.
        self._store = summary.verdicts.store(space.v_mask, self.v, verifier) if remember and not plain else None
        self._compiled: Any = None if plain else ...  # `compiled_check`, built on the first check
        self._reads_sql = capabilities_of(verifier).needs_sql

    # -- populations ---------------------------------------------------------------------
    def _rows(self, sql: str, params: list[Any] | None = None) -> pa.Table:
        """Run a SELECT on the engine: a DuckDB connection, or another engine's data access
        (`pcor_sql.backends`), which takes DuckDB's text and runs it in its own dialect."""
        if isinstance(self.con, duckdb.DuckDBPyConnection):
            return self.con.sql(sql, params=params or None).to_arrow_table()
        if self.con is None:
            raise InternalError("a search process was asked for rows: it holds no connection")
        return self.con.arrow(sql, params or [])

    def population(self, mask: int) -> Population:
        if self.plain:
            rows = self._rows(plain_population_sql(self.summary, self.space, mask)).column(METRIC_ALIAS)
            return ArrayPopulation.of(np.asarray(rows.to_numpy(zero_copy_only=False), dtype=np.float64), self.v)
        return self.summary.population(self.summary.member(self.space, mask), self.v)

    def population_size(self, mask: int, key: int | bytes | None = None) -> int:
        """The population size of `mask` (its `space.key` may be given: `key`)."""
        if key is None:
            key = self._key(mask)
        n = self._count.get(key)
        store = self._store
        if n is None:
            n = store.size(key) if store is not None else None
            if n is None:
                if self.plain:
                    n = self.population(mask).n
                elif mask == self.space.v_mask:
                    n = self._own_cell_size()
                else:
                    n = int(self.summary.count[self.summary.member(self.space, mask)].sum())
            self._count[key] = n
        if store is not None:
            # Only the sizes a search reads (its utilities), not every check's — stored even on a
            # `_count` hit: `_verify` fills `_count` too, and a repeated release skips `_verify`.
            store.put_size(key, n)
        return n

    def _own_cell_size(self) -> int:
        """|D_C| of V's own cell (the context `space.v_mask`), read off the cells' coordinates: the
        size the owner view reports as the start's when a search has none (direct, uniform,
        explore). `summary.member` answers the same, but through per-attribute tables of every
        selection, built on first use (57-250 ms on births, 2^7 x 85,680 for the weekday alone),
        which pay over a search's many contexts, not for this one size."""
        cell = np.all(self.summary.coords == np.asarray(self.space.anchor, dtype=self.summary.coords.dtype), axis=1)
        return int(self.summary.count[cell].sum())

    def find_start(self, max_checks: int) -> tuple[int | None, int]:
        """`core.start.find_start` on this oracle, remembered with the verdicts (it reads
        validity only, in a fixed order: the same answers give the same start). A remembered
        start marks the contexts its sweep read as asked, so the owner's count of contexts
        verified is the same either way."""
        store = self._store
        kept = store.start(max_checks) if store is not None else None
        if kept is not None:
            mask, checks, checked = kept
            self._valid.update(checked)
            return mask, checks
        before = set(self._valid)
        mask, checks = find_start(self, max_checks)
        if store is not None:
            store.put_start(max_checks, mask, checks, {m: v for m, v in self._valid.items() if m not in before})
        return mask, checks

    # -- oracle --------------------------------------------------------------------------
    def is_valid(self, mask: int) -> bool:
        spend()  # every question counts toward a request's work cap, a cached answer too (`core.work`)
        key = self._key(mask)
        verdict = self._valid.get(key)
        if verdict is None:
            if not self.space.is_admissible(mask):
                raise InternalError("validity asked of a context that does not contain the record")
            store = self._store
            verdict = store.get(key) if store is not None else None
            if verdict is None:
                verdict = self._verify(mask)
                if store is not None:
                    store.put(key, verdict)
            self._valid[key] = verdict
        return verdict

    def valid_many(self, masks: list[int]) -> list[bool]:
        """`is_valid` of each of `masks` (admissible contexts: a search's neighbours or draws), the
        same answers and caches; the contexts not answered yet are checked in one compiled call
        where the check has one (`walk_batches`, through the check's `many`), in order, as one
        `is_valid` after the other would. Counts one unit of work a context, as `is_valid`."""
        key = self._key
        return self.valid_keyed(masks, [key(m) for m in masks])

    def valid_keyed(self, masks: list[int], keys: list[int | bytes], rows: Any = None) -> list[bool]:
        """`valid_many(masks)` given each mask's `space.key` (`keys`) and, optionally, their
        words (`rows`: `core.neighbour_rows`), so that a wide context is not converted again."""
        spend(len(masks))
        known, store = self._valid, self._store
        out = list(map(known.get, keys))
        todo = [i for i, verdict in enumerate(out) if verdict is None]
        if store is not None and todo:
            kept = store.get_many([keys[i] for i in todo])
            if kept.count(None) < len(kept):
                for i, verdict in zip(todo, kept):
                    if verdict is not None:
                        out[i] = known[keys[i]] = verdict
                todo = [i for i, verdict in zip(todo, kept) if verdict is None]
        if todo:
            if self._compiled is ... and not self._reads_sql:
                self._compiled = compiled_check(self.summary, self.space, self.verifier, self.v)
            many = getattr(self._compiled, "many", None) if not self._reads_sql else None
            if many is None:
                answers = [(self._verify(masks[i]), None) for i in todo]
            elif rows is None:
                answers = many([masks[i] for i in todo])
            else:
                answers = many([masks[i] for i in todo], rows if len(todo) == len(masks) else rows[todo])
            asked = [keys[i] for i in todo]
            verdicts, sizes = map(list, zip(*answers))
            if None in sizes:
                self._count.update((k, n) for k, n in zip(asked, sizes) if n is not None)
            else:
                self._count.update(zip(asked, sizes))
            fresh = dict(zip(asked, verdicts))  # one dict, copied into both (stored hashes, no rehash)
            known.update(fresh)
            if store is not None:
                store.put_many(fresh)
            for i, verdict in zip(todo, verdicts):
                out[i] = verdict
        return out  # type: ignore[return-value]

    def _verify(self, mask: int) -> bool:
        if self._reads_sql:
            return self._verify_sql(mask)
        if self._compiled is ...:
            self._compiled = compiled_check(self.summary, self.space, self.verifier, self.v)
        if self._compiled is not None:
            verdict, self._count[self._key(mask)] = self._compiled(mask)
            return verdict
        pop = self.population(mask)
        if pop.n == 0:
            raise InternalError("an admissible context has an empty population")
        self._count[self._key(mask)] = pop.n
        return bool(self.verifier.check(pop))

    def _verify_sql(self, mask: int) -> bool:
        expr = cast(SqlReadingVerifier, self.verifier).sql_expression(METRIC_ALIAS, "$1")  # its capabilities read SQL
        population = plain_population_sql(self.summary, self.space, mask)
        rows = self._rows(select_from(f"coalesce(({expr}), FALSE) AS verdict", f"({population})"), [self.v])
        return bool(rows.column(0)[0].as_py())

    def utility(self, mask: int) -> float:
        return self.utility_keyed(mask, None)

    def utilities_keyed(self, masks: list[int], keys: list[int | bytes]) -> list[float]:
        """`utility_keyed` of each (mask, key), in order: the same sizes, caches and store."""
        if self.utility_name != Utility.POPULATION:
            return [self.utility_keyed(m, k) for m, k in zip(masks, keys)]
        spend(len(masks))
        count, store = self._count, self._store
        sizes = list(map(count.get, keys))
        # The misses, as `population_size` (stored below with the others); a BFS node's joiners
        # were checked, so their sizes are known: one scan for None, not a Python step a size.
        for i in ([i for i, n in enumerate(sizes) if n is None] if None in sizes else ()):
            k = keys[i]
            n = store.size(k) if store is not None else None
            if n is None:
                n = self.population(masks[i]).n if self.plain else \
                    int(self.summary.count[self.summary.member(self.space, masks[i])].sum())
            sizes[i] = count[k] = n
        if store is not None:
            store.put_sizes(dict(zip(keys, sizes)))
        return [float(n) for n in sizes]

    def utility_keyed(self, mask: int, key: int | bytes | None) -> float:
        """`utility(mask)`, given the mask's `space.key` (`key`, or None)."""
        spend()
        if self.utility_name == Utility.POPULATION:
            return float(self.population_size(mask, key))
        return float(self.population_size(mask & self.start))

    @property
    def n_verified(self) -> int:
        return len(self._valid)

    def coe(self, max_admissible: int, progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every valid context of V with its utility (the owner's exact tool, paper Alg. 1 l. 1–7)."""
        return enumerate_coe(self, max_admissible, progress)
