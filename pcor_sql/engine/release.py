"""One private contextual outlier release for one record, end to end (no parsing, no printing).

The steps, in order: resolve the lattice for V, find or check the starting context (validity
only: free), derive ε1, run the private search (the only use of utilities), re-verify the
released context, and hand back the result. The caller charges the ledger before it shows
anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import duckdb

from pcor_sql.core.accounting import Budget
from pcor_sql.core.randomness import Source
from pcor_sql.core.searches import SearchResult, Trace, run_search
from pcor_sql.core.space import ContextSpace
from pcor_sql.core.start import DEFAULT_DESCENTS, DEFAULT_MAX_CHECKS, find_start
from pcor_sql.engine.coe import DEFAULT_MAX_ADMISSIBLE
from pcor_sql.engine.compile import context_predicate
from pcor_sql.engine.evaluator import Evaluator
from pcor_sql.engine.summary import CellSummary, record_cell
from pcor_sql.errors import InternalError, NoValidContext, UserError


@dataclass(frozen=True)
class OwnerView:
    """Private diagnostics, shown only when the data owner asks (never part of a release)."""

    population: int
    utility: float
    start_population: int
    em_calls: int
    validity_checks: int
    contexts_verified: int
    visited: int
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "not_for_release": True,
            "population": self.population,
            "utility": self.utility,
            "start_population": self.start_population,
            "em_calls": self.em_calls,
            "validity_checks": self.validity_checks,
            "contexts_verified": self.contexts_verified,
            "visited": self.visited,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class RecordRelease:
    """The outcome of one search for one record, before charging."""

    space: ContextSpace
    mask: int
    start_mask: int
    start_source: str
    trace: Trace = field(repr=False)
    owner: OwnerView | None


def prepare_space(summary: CellSummary, row: Mapping[str, Any]) -> ContextSpace:
    return ContextSpace(summary.schema.attributes, record_cell(summary.schema, row))


def resolve_start(
    ev: Evaluator, start: Mapping[str, Sequence[Any]] | None, max_checks: int = DEFAULT_MAX_CHECKS
) -> tuple[int, str]:
    """(start mask, "user" | "search"). A user start must contain V and be valid."""
    space = ev.space
    if start is not None:
        mask = space.from_values(start)
        if not space.is_admissible(mask):
            raise UserError(
                "the start context does not contain the record",
                "include the record's own value of every attribute in --start",
            )
        if not ev.is_valid(mask):
            raise UserError(
                "the record is not an outlier in the start context",
                "give a context where it is one, or omit --start to let pcor-sql find one",
            )
        return mask, "user"
    mask, checks = find_start(ev, max_checks)
    if mask is None:
        raise NoValidContext(
            f"the record is an outlier in none of the {checks:,} contexts searched for a start",
            "try another verifier or options (e.g. a lower LOF threshold), other attributes (--by), or give --start",
        )
    return mask, "search"


def release_one(
    con: duckdb.DuckDBPyConnection,
    summary: CellSummary,
    row: Mapping[str, Any],
    v: float,
    verifier: Any,
    budget: Budget,
    source: Source,
    *,
    search: str,
    samples: int,
    utility: str,
    start: Mapping[str, Sequence[Any]] | None,
    owner_view: bool,
    max_contexts: int | None = DEFAULT_MAX_ADMISSIBLE,
    progress: Callable[[int, int], None] | None = None,
    descents: int = DEFAULT_DESCENTS,
) -> RecordRelease:
    space = prepare_space(summary, row)
    ev = Evaluator(con, summary, space, v, verifier, utility="population")
    if search == "direct" and start is None and utility == "population":
        start_mask, start_source = space.v_mask, "none"
    else:
        start_mask, start_source = resolve_start(ev, start)
    if utility != "population":
        ev = Evaluator(con, summary, space, v, verifier, utility=utility, start=start_mask)
    result: SearchResult = run_search(
        search,
        ev,
        budget.epsilon1,
        source,
        start=start_mask,
        samples=samples,
        max_admissible=max_contexts if max_contexts is not None else 1 << 64,
        progress=progress,
        descents=descents,
    )
    if not ev.is_valid(result.mask):
        raise InternalError("a search released a context in which the record is not an outlier")
    if result.trace.n_em_calls > budget.max_em_calls:
        raise InternalError(f"{search} made {result.trace.n_em_calls} EM calls, more than the {budget.max_em_calls} accounted for")
    owner = None
    if owner_view:
        owner = OwnerView(
            population=ev.population_size(result.mask),
            utility=ev.utility(result.mask),
            start_population=ev.population_size(start_mask),
            em_calls=result.trace.n_em_calls,
            validity_checks=result.trace.validity_checks,
            contexts_verified=ev.n_verified,
            visited=len(result.trace.visited),
            notes=tuple(result.trace.notes),
        )
    return RecordRelease(space, result.mask, start_mask, start_source, result.trace, owner)


def released_predicate(summary: CellSummary, space: ContextSpace, mask: int) -> str:
    schema = summary.schema
    return context_predicate(space, mask, cast_varchar=schema.cast_varchar, omit_full=True, not_null=schema.not_null)
