"""One pipeline for every release and every anomaly answer, the owner's and the analyst's alike.

    resolve units → check the policy → state the cost → reserve → read → run → shape

`run(session, job, policy)` is the only function that charges the ledger for a job. What
differs between callers is a `Policy` value (DESIGN.md §6):

| | owner (`OWNER`) | analyst (`analyst_policy(name)`) |
|---|---|---|
| options | every one | those whose spec says `Who.ANALYST`; ε ≥ the owner's minimum |
| rows read before the reservation | yes: the selected records (their count is the cost) | none: the cost is ε per key given |
| a limit or quota refusal | the ledger's words: unit, limit, spent | one message naming only the request's cost (`limit_reached`) |
| a failure after the reservation | detailed error, **refunded** (history: failed, not charged) | one generic `RequestFailed`, charge kept |
| Ctrl-C | refunded, "interrupted: not charged" | charge kept, "interrupted: ε stays charged" |
| what a result carries | everything, owner view if asked | key, context, predicate, privacy parameters |
| result order | the records' order | the order the analyst gave the keys |

A job (`jobs.ReleaseJob`, `jobs.AnswerJob`) is a `Measurement` with its privacy map, OpenDP's
habit: it states its cost per record (`job.items`) before anything is reserved, and the ledger
checks that cost against every unit's limit and the analyst's quota in one transaction. The
cost check that decides happens once, there; `admit` checks the cost against the limits and the
quota without charging, to refuse early (the analyst service, before a request waits for a worker).
"""

from __future__ import annotations

import logging
import math
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterator, Protocol, Sequence

from pcor_sql.core.option_spec import Who
from pcor_sql.core.verifiers.base import Verifier
from pcor_sql.core.work import WorkMeter, metered
from pcor_sql.errors import (
    AnalystRefused,
    BudgetExceeded,
    Interrupted,
    LedgerUnreachable,
    Refused,
    RequestFailed,
    UserError,
    option_hint,
    register_spelling,
    warn_privacy,
)

Progress = Callable[[int, int], None]
if TYPE_CHECKING:  # annotations only: the CLI imports this module's constants, and these import DuckDB
    from pcor_sql.backends.base import DataAccess
    from pcor_sql.engine.record_search import OutlierRun, SelectedRecord
    from pcor_sql.engine.schema import Schema
    from pcor_sql.engine.search_processes import SearchProcess
    from pcor_sql.ledger.admission_memory import AdmissionMemory
    from pcor_sql.ledger.charge_rules import ChargeItem
    from pcor_sql.ledger.seams import Charged, ChargingLedger

LOG = logging.getLogger("pcor_sql")

#: Above this ε a release protects almost nothing (e^10 ≈ 22,000: any likelihood ratio up to that).
WARN_EPSILON = 10.0
register_spelling("max_records", "--max-records", None)

#: The smallest ε an analyst may ask for by default (DESIGN.md §6: probing at ε = 1e-300 is refused, not free).
DEFAULT_MIN_EPSILON = 0.01
#: An analyst request's default work cap in the service: validity checks + EM candidates
#: (`core.work`). A compiled check costs ~5-10 µs and the search's own step as much, so this is
#: ~1-3 s of one core — ~8× the checks of a default BFS release on the scale benchmark's table.
DEFAULT_MAX_WORK = 50_000


@dataclass(frozen=True)
class Policy:
    """Who is asking, and so how the pipeline treats the request (see the module docstring).
    `analyst`: whose quota pays (None: no named analyst — the in-process handle)."""

    role: Who
    analyst: str | None = None
    min_epsilon: float = 0.0
    #: The most work (validity checks + EM candidates, `core.work`) one request may do; None: no cap.
    max_work: int | None = None
    #: Set when the service stops: a request in flight is interrupted at its next unit of work.
    stop: threading.Event | None = field(default=None, compare=False, repr=False)

    @property
    def cache_partition(self) -> Hashable:
        """Whose caches this request may read and fill (`core.work.partition`)."""
        return "owner" if self.is_owner else ("analyst", self.analyst)

    @property
    def is_owner(self) -> bool:
        return self.role is Who.OWNER

    @property
    def reads_before_reserving(self) -> bool:
        """The owner may read the selected records first (their count is the cost); an
        analyst's cost is fixed by the request alone, so nothing is read before it is paid."""
        return self.is_owner

    @property
    def refunds_failures(self) -> bool:
        return self.is_owner

    @property
    def generic_failures(self) -> bool:
        return not self.is_owner


OWNER = Policy(Who.OWNER)


def analyst_policy(name: str | None = None, *, min_epsilon: float = DEFAULT_MIN_EPSILON, max_work: int | None = None,
                   stop: threading.Event | None = None) -> Policy:
    return Policy(Who.ANALYST, name, float(min_epsilon), max_work, stop)


def failed() -> RequestFailed:
    """The one failure after an analyst's reservation: its text depends on nothing in the data."""
    return RequestFailed(
        "the request could not be answered; its cost stays charged",
        "check the keys and options (a failure after the reservation says nothing more, by design)",
    )


def limit_reached(items: Sequence[ChargeItem]) -> BudgetExceeded:
    """What an analyst is told when a charge would pass a limit — their quota or a unit's, in one
    message. A unit's name is the owner's catalog, and its limit and spent ε depend on the owner's
    and other analysts' spending, none of it paid for by this analyst; so the message names only
    what the request itself says (its ε, count and notion), and the same words whichever limit
    refused. What an analyst may learn of accounts is their own quota (GET /v1/me)."""
    first = items[0]
    total = math.fsum(item.epsilon for item in items)
    cost = f"ε = {first.epsilon:g}" if len(items) == 1 else f"{len(items)} × ε = {first.epsilon:g}, {total:g} in total"
    return BudgetExceeded(
        f"this request ({cost}, {first.notion}) would pass a privacy limit (your quota, or a limit the data owner "
        "set on the data): nothing was charged",
        "see your quota and spending (GET /v1/me, `pcor-sql remote me`); ask with a smaller ε or fewer keys, "
        "or ask the data owner",
    )


def not_open() -> Refused:
    """What an analyst is told when the owner's ledger refuses a charge for a reason of its own (a
    unit without a limit in a strict ledger, totals that need repair, a read-only or busy ledger):
    those messages name units and files, which are the owner's."""
    return Refused("the data owner's budget ledger cannot take this request now; nothing was charged",
                   "ask the data owner (the reason is in their own tools)")


@contextmanager
def analyst_words(policy: Policy, items: Sequence[ChargeItem] = ()) -> Iterator[None]:
    """Refusals of the ledger as the policy may hear them: the owner gets the ledger's detailed
    message; an analyst gets `limit_reached` or `not_open` — except a refusal about the analyst
    themselves (`AnalystRefused`: unknown, revoked, a dataset not theirs), which names only them.
    The detail goes to the `pcor_sql` log, for the owner."""
    try:
        yield
    except UserError as exc:
        if not policy.generic_failures or isinstance(exc, AnalystRefused):
            raise
        LOG.info("refused a request of analyst %s: %s", policy.analyst, exc)
        if isinstance(exc, LedgerUnreachable):  # a reservation perhaps committed: never "nothing was charged"
            raise failed() from None
        if isinstance(exc, BudgetExceeded) and items:
            raise limit_reached(items) from None
        raise not_open() from None


class ReleaseSession(Protocol):
    """What the release path asks of a connection's session (`pcor_sql.session.Session`, and
    the service's `Session.reading_nothing()`): where rows are read, the units a statement
    reads, the ledger that charges, and what the jobs resolve before and after the charge."""

    access: DataAccess
    #: Where a privacy warning goes (None: Python's warnings).
    warn: Callable[[str], None] | None
    #: A service's search process for this session's releases (`engine.search_processes`), or None.
    searches: SearchProcess | None

    def units(self, relation: str) -> tuple[str, ...]: ...

    def ledger(self) -> ChargingLedger: ...

    def verifier(self, spec: Any) -> Verifier: ...

    def schema(self, request: Any) -> Schema: ...

    def prepare_records(self, request: Any, records: Sequence[SelectedRecord],
                        progress: Progress | None = None) -> OutlierRun: ...


class PricedRequest(Protocol):
    """What the pipeline reads of a job's request (`request_values.OutlierRequest`,
    `AnomalyRequest`): its ε per record, for the early checks and the privacy warning (the
    typed cost the ledger checks is the job's `items`)."""

    @property
    def epsilon(self) -> float: ...


class Measurement(Protocol):
    """A measurement (`jobs.ReleaseJob`, `jobs.AnswerJob`): its SQL (for units), its cost per
    record, and its steps — read, then run once paid for."""

    extra_units: tuple[str, ...]
    request: PricedRequest

    def units_sql(self) -> str: ...

    def key_label(self) -> str: ...

    def items(self, keys: Sequence[str], policy: Policy, statement: str | None = None) -> list[ChargeItem]: ...

    def read(self, session: ReleaseSession, progress: Progress | None) -> Any: ...

    def count(self, rows: Any) -> int: ...

    def run(self, session: ReleaseSession, rows: Any, charge: Charged, units: tuple[str, ...],
            progress: Progress | None) -> list: ...

    def not_released(self, failure: "RecordFailure", item: ChargeItem, policy: Policy) -> Any: ...


@dataclass(frozen=True)
class Quote:
    """What a request would cost, stated before anything is reserved: the units it reads, one
    charge item per record (its typed cost), and — for the owner — the rows already read."""

    units: tuple[str, ...]
    items: list[ChargeItem]
    rows: Any = None


def quote(session: ReleaseSession, job: Measurement, policy: Policy, *, keys: Sequence[str] | None = None, single: str | None = None,
          max_records: int | None = None, announce: Callable[[int, Any], None] | None = None,
          progress: Progress | None = None) -> Quote:
    """Everything `run` does before the reservation: units from the catalog, the policy's checks
    and the cost. For an analyst it reads no row, so it is also the data-independent cost
    preview (`Analyst.cost`). Arguments as for `run`."""
    with analyst_words(policy):  # a unit that cannot be resolved is named to the owner only
        # From the catalog, never rows: what the statement reads now, and any units the job carries.
        units = tuple(sorted(set(session.units(job.units_sql())) | set(job.extra_units)))
        session.ledger().ensure_writable()
    rows = job.read(session, progress) if policy.reads_before_reserving else None
    count = job.count(rows) if rows is not None else len(keys or ())
    if single is not None and count != 1:
        raise UserError(
            f"the selector picks several rows, and {single} answers for one record",
            f"narrow the WHERE clause, or call pcor_sql.{single}s (one result per row, each charged)"
            if not single.endswith("y") else
            f"narrow the WHERE clause, or call pcor_sql.{single[:-1]}ies (one result per row, each charged)",
        )
    if max_records is not None and count > max_records:
        epsilon = job.request.epsilon
        raise UserError(
            f"the selector picks {count:,} rows: {count:,} releases of ε = {epsilon:g}, {count * epsilon:g} in total, "
            f"more than the {max_records:,} allowed",
            f"narrow the WHERE clause, or allow them: {option_hint('max_records', str(count))}",
        )
    if job.request.epsilon > WARN_EPSILON:
        warn_privacy(f"ε = {job.request.epsilon:g} protects almost nothing: outputs may be up to "
                     f"e^{job.request.epsilon:g} times likelier on one dataset than on its neighbour",
                     session.warn)
    if announce is not None:
        announce(count, rows)
    shown = list(keys) if keys is not None else [f"{job.key_label()} #{i + 1}" for i in range(count)]
    items = job.items(shown, policy, _described(session, job, policy))
    _check_minimum(items, policy)
    return Quote(units, items, rows)


def _described(session: ReleaseSession, job: Measurement, policy: Policy) -> str | None:
    """What the history says was asked (`job.describe`): never a token, never the rows."""
    describe = getattr(job, "describe", None)
    return describe(session, policy) if describe is not None else None


def run(session: ReleaseSession, job: Measurement, policy: Policy, *, keys: Sequence[str] | None = None, single: str | None = None,
        max_records: int | None = None, announce: Callable[[int, Any], None] | None = None,
        progress: Progress | None = None, shape: Callable[[list], Any] | None = None) -> Any:
    """Run `job` for `policy`: charged before any result exists, refused before anything is
    charged when the policy or a limit says no. `keys`: what the analyst asked about, in their
    order (one charge each, read after the reservation); None: the owner's selector, whose
    rows are read first. `single`: the function name when exactly one record must be selected
    (a UserError naming the batch function otherwise, before any charge). `announce(count,
    rows)` hears the batch size (and the owner's rows) before the reservation. `max_records`:
    a selector picking more rows is refused before any charge, with the count and the total ε
    (nothing is multiplied silently). A record of a batch whose release fails is the job's
    `not_released(...)` in its place, recorded failed on its own (the others answered); a lone
    record's failure is the request's. `shape(results)` makes what the caller is told, inside the
    charged part: if it fails, the history says failed — never answered for an answer not given.
    The request's work is metered (`core.work`: `policy.max_work`, `policy.stop`) and its
    caches are the asker's own (`policy.cache_partition`)."""
    from pcor_sql.engine.progress import report_phase

    quoted = quote(session, job, policy, keys=keys, single=single, max_records=max_records, announce=announce,
                   progress=progress)
    rows, count = quoted.rows, len(quoted.items)
    report_phase(progress, "charging the budget ledger")
    with analyst_words(policy, quoted.items):
        reservation = session.ledger().reserve(quoted.units, quoted.items, analyst=policy.analyst)
    try:
        if rows is None:
            rows = job.read(session, None)
            if job.count(rows) != count:
                raise failed()
        with metered(WorkMeter(policy.max_work, policy.stop), policy.cache_partition):
            results = job.run(session, rows, reservation, quoted.units, progress)
        failures = {i: out for i, out in enumerate(results) if isinstance(out, RecordFailure)}
        if failures and len(results) == 1:  # one record: its failure is the request's, as before batches
            raise failures[0].error
        results = [job.not_released(out, quoted.items[i], policy) if i in failures else out
                   for i, out in enumerate(results)]
        if shape is not None:
            results = shape(results)
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        if interrupted:
            reservation.interrupted(refund=policy.refunds_failures)
            total = count * job.request.epsilon
            raise Interrupted("interrupted: not charged" if policy.refunds_failures
                              else f"interrupted: ε = {total:g} stays charged") from None
        else:
            reservation.failed(failure_reason(exc), refund=policy.refunds_failures)
        if policy.generic_failures and isinstance(exc, Exception):
            # Not chained: a traceback shown to the analyst could carry the data.
            raise failed() from None
        raise
    # Each record's own outcome: the failed ones of a batch given back to the owner, kept for an analyst.
    reservation.settle({i: f.reason for i, f in failures.items()}, refund=policy.refunds_failures)
    return results


@dataclass(frozen=True)
class RecordFailure:
    """One record of a batch that failed after the reservation (the others go on): the error,
    its class for the history, and the record — the analyst's `key`, or the owner's row."""

    error: BaseException
    reason: str
    key: Any = None
    record: dict[str, Any] | None = None


def admit(session: ReleaseSession, job: Measurement, policy: Policy, *, keys: Sequence[str],
          memory: AdmissionMemory | None = None) -> list[ChargeItem]:
    """An early, cheap refusal of an analyst's request (nothing charged, no row read, no catalog
    read): its cost (`job.items`, data independent), the minimum ε, and whether that cost would
    pass a limit of the units the job carries (a registered dataset's, frozen at registration:
    the reservation charges them, and perhaps more) or the analyst's quota (`Ledger.check_fit`). A few
    small ledger reads, so the service runs it before a request waits for a worker. It reserves
    nothing and decides nothing else: `run` checks everything again, and its reservation alone
    decides. `memory`: the service's `AdmissionMemory` (it may admit without reading). Returns
    the charge items it checked."""
    with analyst_words(policy):
        session.ledger().ensure_writable()
    items = job.items(list(keys), policy)
    _check_minimum(items, policy)
    with analyst_words(policy, items):
        session.ledger().check_fit(tuple(sorted(set(job.extra_units))), items, analyst=policy.analyst, memory=memory)
    return items


def _check_minimum(items: Sequence[ChargeItem], policy: Policy) -> None:
    """DESIGN.md §6: an analyst's request below the owner's minimum ε per request is refused
    before the reservation (probing membership at ε = 1e-300 is not free, it is refused)."""
    low = [item.epsilon for item in items if item.epsilon < policy.min_epsilon]
    if low:
        raise Refused(f"ε = {low[0]:g} is below the smallest ε the data owner allows per request "
                      f"({policy.min_epsilon:g})", f"ask with epsilon ≥ {policy.min_epsilon:g}")


def failure_reason(exc: BaseException) -> str:
    """The class of a failure, for the history (never its text: that may carry data)."""
    from pcor_sql.core.work import WorkCapReached
    from pcor_sql.engine.search_pool import WorkerLost
    from pcor_sql.errors import InternalError, NoRecord, NoValidContext

    # Most specific first: a class named earlier wins over a base class named later.
    classes = ((WorkCapReached, "work-cap"), (WorkerLost, "worker-lost"), (NoValidContext, "no-valid-context"),
               (NoRecord, "missing"), (RequestFailed, "not-found"), (UserError, "data"), (InternalError, "internal"))
    return next((name for kind, name in classes if isinstance(exc, kind)), "error")

