"""A session on one DuckDB connection: caches what is built once per (relation, metric, attributes).

The cache is a snapshot: a summary built before the table changes does not see the change.
Make a new Session (the module-level API does, on every call) to read fresh data.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import duckdb

from pcor_sql.core.verifiers.registry import VerifierRegistry, default_registry
from pcor_sql.engine.ledger import Ledger
from pcor_sql.sqltext.quoting import quote_identifier
from pcor_sql.engine.schema import Schema, resolve_schema
from pcor_sql.engine.summary import CellSummary, build_summary
from pcor_sql.errors import UserError

METRIC_COLUMN = "__pcor_metric"


class Session:
    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        warn: Callable[[str], None] | None = None,
        registry: VerifierRegistry | None = None,
    ):
        self.con = con
        self.warn = warn
        self.registry = registry or default_registry()
        self._schemas: dict[tuple, Schema] = {}
        self._summaries: dict[tuple, CellSummary] = {}
        self._ledger: Ledger | None = None

    def ledger(self) -> Ledger:
        """The budget ledger of this connection (made once, so its in-memory warning shows once)."""
        if self._ledger is None:
            self._ledger = Ledger(self.con, warn=self.warn)
        return self._ledger

    def schema(
        self,
        relation_sql: str,
        metric_sql: str,
        *,
        by: Sequence[str] | None = None,
        domains: Mapping[str, Sequence[Any]] | None = None,
    ) -> Schema:
        key = (relation_sql, metric_sql, tuple(by) if by is not None else None,
               tuple(sorted((k, tuple(v)) for k, v in (domains or {}).items())))
        if key not in self._schemas:
            self._schemas[key] = resolve_schema(self.con, relation_sql, metric_sql, by=by, domains=domains, warn=self.warn)
        return self._schemas[key]

    def summary(self, schema: Schema) -> CellSummary:
        key = (schema.relation_sql, schema.metric_sql, schema.attributes, schema.cast_varchar)
        if key not in self._summaries:
            self._summaries[key] = build_summary(self.con, schema)
        return self._summaries[key]

    def records(self, relation_sql: str, metric_sql: str, selector_sql: str) -> list[tuple[dict[str, Any], float]]:
        """(row as a dict, metric value) for every row the selector picks."""
        sql = (
            f"SELECT *, CAST({metric_sql} AS DOUBLE) AS {quote_identifier(METRIC_COLUMN)} "
            f"FROM {relation_sql} WHERE {selector_sql} ORDER BY ALL"
        )
        try:
            cur = self.con.execute(sql)
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        except duckdb.Error as exc:
            raise UserError(str(exc).strip().splitlines()[0], "check the WHERE clause that picks the record") from None
        if not rows:
            raise UserError("the WHERE clause selects no row", "check the record selector, e.g. WHERE id = 42")
        out = []
        for row in rows:
            d = dict(zip(names, row))
            v = d.pop(METRIC_COLUMN)
            if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
                raise UserError(
                    f"the selected record's metric is {v!r}",
                    "pick a record whose metric is a finite number",
                )
            out.append((d, float(v)))
        return out

    def start_selection(self, start: Any, schema: Schema) -> Mapping[str, Sequence[Any]] | None:
        if start is None or isinstance(start, Mapping):
            return start
        if not isinstance(start, str) or not start.strip():
            raise UserError("the start context is empty", "give a predicate such as job_title IN ('Nurse') AND year = '2019'")
        from pcor_sql.frontend.start import parse_start_predicate

        return parse_start_predicate(self.con, start, schema.names)

    def verifier(self, verifier: Any, options: Mapping[str, Any] | None = None) -> Any:
        return make_verifier(verifier, options, self.registry)


def make_verifier(verifier: Any, options: Mapping[str, Any] | None = None, registry: VerifierRegistry | None = None) -> Any:
    """A verifier object from a name (+ options) or a ready object with a `check` method."""
    if isinstance(verifier, str):
        return (registry or default_registry()).make(verifier, **dict(options or {}))
    if hasattr(verifier, "check") or hasattr(verifier, "needs_sql"):
        if options:
            raise UserError("verifier options were given with a verifier object", "set them on the object itself")
        return verifier
    raise UserError(f"invalid verifier {verifier!r}", "pass a name such as 'lof' or a verifier object")


def verifier_spec(verifier: Any) -> str:
    """`name(opt=value, ...)`: how the verifier is shown in outputs."""
    opts = verifier.options() if hasattr(verifier, "options") else {}
    inner = ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in opts.items())
    return f"{verifier.name}({inner})"
