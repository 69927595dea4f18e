"""Running a release's searches once they are paid for, and shaping what they release into
`Explanation`s: record i searches with the coins `record_source(seed, i)`, here, in a service's
search process or in forked workers (DESIGN.md §10 "Seeded batches": the same outputs for any
number of workers), and one record's failure does not sink the batch. `jobs.ReleaseJob.run` is
the one caller; the charge is the pipeline's, never this module's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from pcor_sql.core import compile_notice
from pcor_sql.core.space import ContextSpace
from pcor_sql.core.randomness import record_source
from pcor_sql.core.work import WorkCapReached
from pcor_sql.engine import search_pool, search_processes
from pcor_sql.engine.progress import report_phase
from pcor_sql.engine.record_search import OutlierRun, RecordRelease, released_predicate
from pcor_sql.pipeline import Progress, RecordFailure, ReleaseSession, failure_reason
from pcor_sql.request_values import OutlierRequest
from pcor_sql.results import Charge, Explanation
from pcor_sql.sqltext.build import over_context, select_from

if TYPE_CHECKING:  # annotations only
    from pcor_sql.backends.base import DataAccess
    from pcor_sql.engine.search_processes import SearchProcess

#: A record's search: what it released, or why it did not.
Outcome = RecordRelease | RecordFailure


def shape_releases(session: ReleaseSession, prepared: OutlierRun, charge: Charge, progress: Progress | None,
                   workers: int = 1) -> list[Explanation | RecordFailure]:
    """Run the (already paid for) searches of `prepared`, in up to `workers` processes, and
    shape what they release."""
    request = prepared.request
    seeded = request.seed is not None
    runs = _release_all(prepared, progress, workers, session.searches)
    out: list[Explanation | RecordFailure] = []
    for rec, run in zip(prepared.records, runs):
        if isinstance(run, RecordFailure):
            out.append(run)
            continue
        predicate = released_predicate(prepared.summary, run.space, run.mask)
        out.append(Explanation(
            request=request, record=rec.record, context=run.space.values(run.mask),
            predicate=session.access.render(predicate),
            explanation_sql=session.access.render(over_context(request.select_list, request.relation, predicate)),
            em_calls=run.trace.n_em_calls, verifier=prepared.verifier_label, start_source=run.start_source,
            seeded=seeded, charge=charge, full_attributes=_whole(run.space, run.mask), ranges=run.space.ranges(run.mask),
            owner=run.owner if request.owner_view else None, values=_values(session.access, request, predicate),
        ))
    return out


def _values(access: DataAccess, request: OutlierRequest, predicate: str) -> Callable[[], tuple[list[Any], list[Any]]]:
    """The data behind `Explanation.plot()`, read only when asked: the metric over the released
    context and over the whole relation (the owner's view; nothing of it is released)."""
    def read() -> tuple[list[Any], list[Any]]:
        column = f"{request.metric} AS v"
        context = access.arrow(over_context(column, request.relation, predicate)).column(0).to_pylist()
        return context, access.arrow(select_from(column, request.relation)).column(0).to_pylist()

    return read


def _release_all(prepared: OutlierRun, progress: Progress | None, workers: int = 1,
                 searches: SearchProcess | None = None) -> list[Outcome]:
    """Every selected record's search, record i with the coins `record_source(seed, i)`: one
    record reports its search's own progress; a batch reports records done. Where it is safe,
    a service's search process takes every search (`searches`, `engine.search_processes`), and
    with `workers` > 1 forked workers take the records after the first (`engine.search_pool`),
    which runs here to load the kernels they inherit."""
    n = len(prepared.records)
    label = "searching" if n == 1 else "releasing records"
    if searches is not None and search_processes.accepts(prepared):
        report_phase(progress, label)
        done = [0]

        def advance() -> None:
            done[0] += 1
            if progress is not None and n > 1:
                progress(done[0], n)

        outcomes = searches.release_all(prepared, prepared.request.seed, list(range(n)), advance)
        return [_outcome(prepared, i, outcomes[i]) for i in range(n)]

    def compiling(begins: bool) -> None:
        report_phase(progress, COMPILING if begins else label)

    report_phase(progress, label)
    with compile_notice.listening(compiling):
        if n == 1:
            return [_one_release(prepared, 0, progress)]
        runs: list[Outcome] = [_one_release(prepared, 0, None)]
        done = [1]

        def tick() -> None:
            if progress is not None:
                progress(done[0], n)
            done[0] += 1

        tick()
        if workers > 1 and search_pool.can_fork(prepared):
            outcomes = search_pool.release_all(prepared, prepared.request.seed, list(range(1, n)), workers, tick)
            return runs + [_outcome(prepared, i, outcomes[i]) for i in range(1, n)]
        for i in range(1, n):
            runs.append(_one_release(prepared, i, None))
            tick()
        return runs


def _one_release(prepared: OutlierRun, i: int, progress: Progress | None) -> Outcome:
    """Record i's search, or the RecordFailure of a search that failed: one record without a
    valid context does not sink the batch (the pipeline records each record's outcome)."""
    try:
        return prepared.release(i, record_source(prepared.request.seed, i), progress=progress)
    except WorkCapReached:  # the request's cap, not this record's: the whole request stops
        raise
    except Exception as exc:
        return _outcome(prepared, i, exc)


def _outcome(prepared: OutlierRun, i: int, outcome: RecordRelease | BaseException) -> Outcome:
    """A worker's outcome of record i as `_one_release` gives it: the release, or its failure."""
    if isinstance(outcome, WorkCapReached):
        raise outcome
    if isinstance(outcome, BaseException):
        return RecordFailure(outcome, failure_reason(outcome), record=prepared.records[i].record)
    return outcome


#: What a progress display says while numba compiles the checks (first run on a machine).
COMPILING = "compiling the validity checks for this machine (once: later runs load them from numba's cache)"


def _whole(space: ContextSpace, mask: int) -> tuple[str, ...]:
    """The attributes a released context keeps whole (for the plain-words summary)."""
    return tuple(a.name for i, a in enumerate(space.attributes) if space.is_full(mask, i))
