"""One record's search: the private context search for one record, uncharged (no parsing, no
printing; the pipeline charges and shows — this module does not release anything itself).

The steps, in order: resolve the lattice for V, find or check the starting context (validity
only: free), derive ε1, run the private search (the only use of utilities), re-verify the
released context, and hand back the result. The caller charges the ledger before it shows
anything.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import math

import duckdb
import numpy as np

from pcor_sql.core.accounting import Budget
from pcor_sql.core.randomness import Source
from pcor_sql.core.searches import SearchResult, Trace
from pcor_sql.core.search_specs import run_search, search_spec
from pcor_sql.core.space import ContextSpace
from pcor_sql.core.start import DEFAULT_MAX_CHECKS
from pcor_sql.engine.coe_enumeration import lattice_moments
from pcor_sql.engine.context_sql import context_predicate
from pcor_sql.core.verifiers.base import Verifier
from pcor_sql.engine.evaluator import Evaluator, Rows, plain_population_sql
from pcor_sql.engine.summary import CellSummary, record_cell
from pcor_sql.sqltext.build import aliased, as_double, select_from
from pcor_sql.errors import InternalError, NoRecord, NoValidContext, UserError, option_name
from pcor_sql.request_values import OutlierRequest
from pcor_sql.core.choices import Utility

METRIC_COLUMN = "__pcor_metric"


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
    start_checks: int = 0  # contexts the start search checked (0: the start was given, or none was needed)
    #: Reads the certificate (below) when it is first asked for: a release pays nothing for it.
    read_certificate: Callable[[], dict[str, Any] | None] | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def certificate(self) -> dict[str, Any] | None:
        """The verifier's statistic for the record in the released context, and the threshold it
        was held to (`core.verifiers.base.certificate`); None for a verifier that gives none."""
        return self.read_certificate() if self.read_certificate is not None else None

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
            "start_checks": self.start_checks,
            "notes": list(self.notes),
            "certificate": None if self.certificate is None else dict(self.certificate),
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
    mask, source, _ = start_with_checks(ev, start, max_checks)
    return mask, source


def start_with_checks(
    ev: Evaluator, start: Mapping[str, Sequence[Any]] | None, max_checks: int = DEFAULT_MAX_CHECKS
) -> tuple[int, str, int]:
    """`resolve_start` and the contexts the start search checked (0 for a user start)."""
    space = ev.space
    if start is not None:
        mask = space.from_values(start)
        if not space.is_admissible(mask):
            raise UserError(
                "the start context does not contain the record",
                f"include the record's own value of every attribute in {option_name('start')}",
            )
        if not ev.is_valid(mask):
            raise UserError(
                "the record is not an outlier in the start context",
                f"give a context where it is one, or omit {option_name('start')} to let pcor-sql find one",
            )
        return mask, "user", 0
    mask, checks = ev.find_start(max_checks)
    if mask is None:
        raise NoValidContext(
            f"the record is an outlier in none of the {checks:,} contexts searched for a start"
            + _population_needed(ev.verifier, ev.summary),
            f"try another verifier or options (e.g. a lower LOF threshold), other attributes ({option_name('by')}), "
            f"or give {option_name('start')}",
        )
    return mask, "search", checks


def _population_needed(verifier: Verifier, summary: CellSummary) -> str:
    """Why a histogram finds nothing on a small table: V's own bin holds V, and it is an outlier
    only when its bin holds fewer than rel·N rows, so a context needs N > 1/rel rows."""
    rel = getattr(verifier, "rel", None)
    if getattr(verifier, "name", None) != "histogram" or not rel:
        return ""
    needed = math.floor(1 / rel) + 1
    rows = getattr(summary, "n_rows", None)
    has = f"; the whole table has {rows:,}" if isinstance(rows, int) else ""
    return (f" (histogram, rel = {rel:g}: the record's bin holds at least itself, so a context needs "
            f"more than 1/rel = {1 / rel:g} rows, N ≥ {needed:,}{has}; a larger rel needs fewer rows)")


def release_one(
    con: Rows,
    summary: CellSummary,
    record: "SelectedRecord",
    verifier: Verifier,
    request: OutlierRequest,
    source: Source,
    start: Mapping[str, Sequence[Any]] | None,
    progress: Callable[[int, int], None] | None = None,
) -> RecordRelease:
    """One record's search under `request` (its search, utility, budget and the options its
    search declares), verified and checked against its budget, uncharged."""
    search, utility, budget = request.search, request.utility, request.budget
    space = prepare_space(summary, record.record)
    ev = Evaluator(con, summary, space, record.value, verifier, utility=Utility.POPULATION, remember=True)
    if not search_spec(search).graph and start is None and utility == Utility.POPULATION:
        # The search does not walk from a start (direct, uniform): none is looked for.
        start_mask, start_source, start_checks = space.v_mask, "none", 0
    else:
        start_mask, start_source, start_checks = start_with_checks(ev, start)
    if utility != Utility.POPULATION:
        ev = Evaluator(con, summary, space, record.value, verifier, utility=utility, start=start_mask, remember=True)
    result: SearchResult = run_search(
        search, ev, budget.epsilon1, source, start=start_mask, progress=progress, **request.search_options()
    )
    if not ev.is_valid(result.mask):
        raise InternalError("a search released a context in which the record is not an outlier")
    if result.trace.n_em_calls > budget.max_em_calls:
        raise InternalError(f"{search} made {result.trace.n_em_calls} EM calls, more than the {budget.max_em_calls} accounted for")
    owner = _owner_view(ev, result, start_mask, start_checks) if request.owner_view else None
    return RecordRelease(space, result.mask, start_mask, start_source, result.trace, owner)


def _owner_view(ev: Evaluator, result: SearchResult, start_mask: int, start_checks: int) -> OwnerView:
    return OwnerView(
        population=ev.population_size(result.mask),
        utility=ev.utility(result.mask),
        start_population=ev.population_size(start_mask),
        em_calls=result.trace.n_em_calls,
        validity_checks=result.trace.validity_checks,
        contexts_verified=ev.n_verified,
        visited=len(result.trace.visited),
        notes=tuple(result.trace.notes),
        start_checks=start_checks,
        read_certificate=_certificate(ev, result.mask),
    )


def _certificate(ev: Evaluator, mask: int) -> Callable[[], dict[str, Any] | None]:
    """The reader of the verifier's statistic for V in the released context (`Verifier.certificate`)."""
    make = getattr(ev.verifier, "certificate", None)
    return lambda: make(ev.population(mask)) if make is not None else None


@dataclass(frozen=True)
class SelectedRecord:
    """One record a request selects: its row (all columns) and its metric value V."""

    record: dict[str, Any]
    value: float


def records_sql(relation_sql: str, metric_sql: str, selector_sql: str) -> str:
    """The rows the selector picks, every column and the metric as DOUBLE, in a stable order."""
    return select_from(["*", aliased(as_double(metric_sql), METRIC_COLUMN)], relation_sql, where=selector_sql, order_by="ALL")


def load_records(con: duckdb.DuckDBPyConnection, relation_sql: str, metric_sql: str, selector_sql: str) -> tuple[SelectedRecord, ...]:
    """Every row the selector picks, in a stable order, with its metric as a finite float."""
    try:
        cur = con.execute(records_sql(relation_sql, metric_sql, selector_sql))
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
    except duckdb.Error as exc:
        raise UserError(str(exc).strip().splitlines()[0], "check the WHERE clause that picks the record") from None
    return selected_records(names, rows)


def selected_records(names: Sequence[str], rows: Sequence[Sequence[Any]]) -> tuple[SelectedRecord, ...]:
    """The rows of `records_sql` (whichever engine ran it) as records; checks there is one and
    that each metric is finite."""
    if not rows:
        raise NoRecord("the WHERE clause selects no row", "check the record selector, e.g. WHERE id = 42")
    out = []
    for row in rows:
        d = dict(zip(names, row))
        v = d.pop(METRIC_COLUMN)
        if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
            shown = "NULL" if v is None else str(v)  # SQL's words: NULL, nan, inf — never Python's None
            raise UserError(f"the selected record's metric is {shown}", "pick a record whose metric is a finite number")
        out.append(SelectedRecord(d, float(v)))
    return tuple(out)


class OutlierRun:
    """What the releases of one request read — summary, verifier, selected records — and the
    means to run them. Made by `Session.prepare`; the owner's and the lab's object: its
    oracles answer utilities and its `release` is not charged, so it never reaches an analyst.
    `con` runs the plain path's and SQL verifiers' queries: a DuckDB connection or a data
    access (`Session.access`, `pcor_sql.backends`)."""

    def __init__(
        self,
        con: Rows,
        request: OutlierRequest,
        summary: CellSummary,
        verifier: Verifier,
        records: Sequence[SelectedRecord],
        start: Mapping[str, Sequence[Any]] | None,
    ):
        self.con = con
        self.request = request
        self.summary = summary
        self.verifier = verifier
        self.records = tuple(records)
        self.start_selection = start
        self.verifier_label = verifier_label(verifier)

    def space(self, i: int) -> ContextSpace:
        """The lattice of contexts admissible for record i (those holding its cell)."""
        return prepare_space(self.summary, self.records[i].record)

    def oracle(self, i: int, *, utility: str = Utility.POPULATION, plain: bool = False) -> Evaluator:
        """Validity and utility of record i's contexts (`plain`: one DuckDB query per context,
        the naive path). The overlap utility is measured against the resolved start."""
        rec = self.records[i]
        space = self.space(i)
        ev = Evaluator(self.con, self.summary, space, rec.value, self.verifier, plain=plain)
        if utility == Utility.POPULATION:
            return ev
        start, _ = resolve_start(ev, self.start_selection)
        return Evaluator(self.con, self.summary, space, rec.value, self.verifier, utility=utility, start=start, plain=plain)

    def release(self, i: int, source: Source, *, progress: Callable[[int, int], None] | None = None) -> RecordRelease:
        """Run the request's search for record i with `source` (uncharged: the caller charges)."""
        return release_one(self.con, self.summary, self.records[i], self.verifier, self.request, source,
                           self.start_selection, progress)

    # ---- lab-only: what the benchmarks (benchmarks/, outside the wheel) read besides the above ----

    def preload(self) -> None:
        """Lab-only: build now what the summary otherwise builds on first use — the
        metric-sorted index LOF and histogram read, and the cell-membership tables — so that a
        timed release does not pay for it. The session's later runs on this summary share both."""
        self.summary.runs()
        space = self.space(0)
        self.summary.member(space, space.v_mask)

    def population_sql(self, i: int, mask: int) -> str:
        """Lab-only: the plain path's query of the population of record i's context `mask`
        (one column `m`, the metric as DOUBLE) — what a one-query-per-context baseline runs."""
        return plain_population_sql(self.summary, self.space(i), mask)

    def lattice_sizes(self, i: int) -> np.ndarray:
        """Lab-only: |D_C| of every admissible context C of record i, indexed by its free-bit
        word (`space(i).from_free(word)`), in one vectorised pass over the summary: contexts can
        be ranked by utility before any is verified (the exact largest utility of `reproduce`)."""
        return lattice_moments(self.oracle(i))["n"]


def verifier_label(verifier: Verifier) -> str:
    """`name(opt=value, ...)`: how a verifier is shown in outputs."""
    opts = verifier.options() if hasattr(verifier, "options") else {}
    inner = ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in opts.items())
    return f"{verifier.name}({inner})"


def released_predicate(summary: CellSummary, space: ContextSpace, mask: int) -> str:
    schema = summary.schema
    return context_predicate(space, mask, cast_varchar=schema.cast_varchar, omit_full=True, not_null=schema.not_null)
