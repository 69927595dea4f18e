"""The two measurements the pipeline runs (`pcor_sql.pipeline`), each with its privacy map.

- `ReleaseJob`: a PCOR release per selected record, each costing the request's ε under OCDP
  (the search's declared map: ε split into ε1 per EM call by `core.accounting`).
- `AnswerJob`: an anomaly answer per selected record, each costing ε under ε-DP or (ε, k)-SP
  (Construction 1 of the sensitive-privacy paper; sequential composition over records).

Each states its cost per record (`items`) before anything is reserved, reads what it needs
(`read`), and runs once paid for (`run`). A job never charges: the pipeline does.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from pcor_sql.core.accounting import Cost
from pcor_sql.core.randomness import make_source
from pcor_sql.core.selection import resolve_selection
from pcor_sql.engine.progress import report_phase
from pcor_sql.engine.record_search import SelectedRecord
from pcor_sql.errors import InternalError
from pcor_sql.ledger.charge_rules import ChargeItem
from pcor_sql.ledger.records import new_release_id
from pcor_sql.ledger.seams import Charged
from pcor_sql.pipeline import Policy, Progress, RecordFailure, ReleaseSession, failed
from pcor_sql.release_searches import shape_releases
from pcor_sql.request_values import AnomalyRequest, OutlierRequest
from pcor_sql.results import AnomalyResult, Charge, Explanation, NotReleased
from pcor_sql.sqltext.build import quoted, select_from
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal

if TYPE_CHECKING:  # annotations only: `anomaly.batch` is imported where a job reads
    from pcor_sql.anomaly.batch import AnomalyAnswer, AnomalyBatch
    from pcor_sql.engine.schema import Schema

#: What a release reads per record: the record, or why it could not be read (an analyst's key).
ReadRecord = SelectedRecord | RecordFailure


def release_mechanism(request: OutlierRequest) -> str:
    """The mechanism's name in the history: `pcor/<search>/<accounting>`."""
    return "/".join(("pcor", str(request.search), str(request.accounting)))


def answer_mechanism(request: AnomalyRequest) -> str:
    """`anomaly/<privacy>`, with `/k=<k>` under (ε, k)-SP: the request's mechanism's own name."""
    return request.mechanism.name


class _PerRecord(abc.ABC):
    """What both jobs share: one charge per record, each of the job's declared cost (each job is
    a `pipeline.Measurement`: that Protocol is what the pipeline asks of it)."""

    request: OutlierRequest | AnomalyRequest
    label: str | None

    @abc.abstractmethod
    def cost(self) -> Cost:
        """The typed privacy cost of one record's output (its notion and ε)."""

    @abc.abstractmethod
    def mechanism(self) -> str:
        """The mechanism's name in the history."""

    def items(self, keys: Sequence[str], policy: Policy, statement: str | None = None) -> list[ChargeItem]:
        """The cost, stated before anything runs: one item per record, with fresh release ids.
        `statement`: what the history says was asked (`describe`), else the request's text."""
        r, cost, mechanism = self.request, self.cost(), self.mechanism()
        text = statement if statement is not None else r.statement
        return [ChargeItem(new_release_id(), cost, mechanism, key, text, seeded=r.seed is not None,
                           role=str(policy.role), dataset=self.label) for key in keys]

    def not_released(self, failure: RecordFailure, item: ChargeItem, policy: Policy) -> NotReleased:
        """What a failed record of a batch returns: the owner hears the error, an analyst the one
        generic refusal (DESIGN.md §6: after the reservation, nothing that depends on the data)."""
        if policy.generic_failures:
            return NotReleased(failure.key, "not-answered", failed().problem, item.epsilon, True, dataset=self.label)
        key = failure.key
        if key is None and failure.record is not None:
            key = NotReleased.key_of(self.request.selector, failure.record)
        return NotReleased(key, failure.reason, str(failure.error), item.epsilon, not policy.refunds_failures,
                           record=failure.record, dataset=self.label)

    def relation_shown(self, policy: Policy) -> str:
        """The relation as the asker named it: an analyst, the registered dataset."""
        return self.label if self.label is not None and not policy.is_owner else self.request.relation


@dataclass
class ReleaseJob(_PerRecord):
    """PCOR releases of `request` (one per selected record), each costing the request's ε
    under OCDP."""

    request: OutlierRequest
    label: str | None = None
    #: Units charged besides those the statement reads now (a registered dataset's, frozen at registration).
    extra_units: tuple[str, ...] = ()
    #: An analyst's keys as (key, selector of that key alone): read one by one once paid for,
    #: so that a key that is missing (or whose row cannot be released) fails alone.
    keyed: tuple[tuple[Any, str], ...] = ()
    #: Worker processes for the searches of a batch (`engine.search_pool`; 1: this process).
    workers: int = 1

    def cost(self) -> Cost:
        return self.request.budget.cost

    def mechanism(self) -> str:
        return release_mechanism(self.request)

    def units_sql(self) -> str:
        r = self.request
        # An analyst's keys are literals: they read nothing, and without them requests share one resolution.
        return select_from([r.select_list], r.relation, where=None if self.keyed else r.selector)

    def key_label(self) -> str:
        return self.request.selector

    def describe(self, session: ReleaseSession, policy: Policy) -> str:
        """What was asked, as one `EXPLAIN OUTLIER` statement with every option resolved (the
        verifier with its options, the search, ε, ...): the history's statement column."""
        from pcor_sql.engine.record_search import verifier_label

        r = self.request
        text = f"EXPLAIN OUTLIER SELECT {r.select_list} FROM {self.relation_shown(policy)} WHERE {r.selector}"
        if r.by:
            text += " BY " + ", ".join(quote_identifier(b) for b in r.by)
        text += f" USING {verifier_label(session.verifier(r.verifier))}"
        options: dict[str, Any] = {"epsilon": r.epsilon, "search": r.search, "samples": r.samples,
                                   "utility": r.utility, "accounting": r.accounting, **dict(r.search_settings)}
        if r.start:
            options["start"] = " AND ".join(f"{quote_identifier(a)} IN ({', '.join(quote_literal(v) for v in vs)})"
                                            for a, vs in r.start)
        if r.seed is not None:
            options["seed"] = r.seed
        return text + _with(options)

    def read(self, session: ReleaseSession, progress: Progress | None) -> tuple[ReadRecord, ...]:
        r = self.request
        session.verifier(r.verifier)  # an unknown verifier, a bad schema or start: the request's fault
        start_selection(r, session.schema(r))
        if not self.keyed:
            return session.access.records(r.relation, r.metric, r.selector)
        return tuple(_keyed_record(session, r, key, selector) for key, selector in self.keyed)

    def count(self, records: Sequence[ReadRecord]) -> int:
        return len(records)

    def run(self, session: ReleaseSession, records: Sequence[ReadRecord], charge: Charged, units: tuple[str, ...],
            progress: Progress | None) -> list[Explanation | RecordFailure]:
        """One result per record, in the records' order: an Explanation, or the RecordFailure
        of a record that was missing or whose search failed (the others are still released)."""
        found = [rec for rec in records if not isinstance(rec, RecordFailure)]
        shaped: Iterator[Explanation | RecordFailure] = iter(())
        if found:
            prepared = session.prepare_records(self.request, found, progress)
            shaped = iter(shape_releases(session, prepared, Charge(units, self.label, *_spent(charge)), progress,
                                         self.workers))
        return [rec if isinstance(rec, RecordFailure) else next(shaped) for rec in records]


def _keyed_record(session: ReleaseSession, request: OutlierRequest, key: Any, selector: str) -> ReadRecord:
    """The one row of an analyst's key, or the RecordFailure saying why there is none."""
    from pcor_sql.errors import NoRecord, UserError

    try:
        rows = session.access.records(request.relation, request.metric, selector)
    except NoRecord as exc:
        return RecordFailure(exc, "missing", key)
    except UserError as exc:  # a NULL metric, a failed conversion: this record's data
        return RecordFailure(exc, "data", key)
    if len(rows) != 1:
        return RecordFailure(UserError("the key selects several rows", "keys must be unique"), "data", key)
    return rows[0]


@dataclass
class AnswerJob(_PerRecord):
    """Anomaly answers of `request` (one per selected record), each costing ε under ε-DP or
    (ε, k)-SP."""

    request: AnomalyRequest
    label: str | None = None
    extra_units: tuple[str, ...] = ()

    def cost(self) -> Cost:
        # Asked of the mechanism that runs (`read` runs this same object): DESIGN.md §6.
        return self.request.mechanism.answer_cost()

    def mechanism(self) -> str:
        return answer_mechanism(self.request)

    def units_sql(self) -> str:
        r = self.request
        return select_from(quoted(r.columns), r.relation, where=r.selector)

    def key_label(self) -> str:
        return self.request.selector or "all rows"

    def describe(self, session: ReleaseSession, policy: Policy) -> str:
        """What was asked, as one `IDENTIFY ANOMALY` statement with every option resolved."""
        r = self.request
        text = f"IDENTIFY ANOMALY SELECT {', '.join(quoted(r.columns))} FROM {self.relation_shown(policy)}"
        if r.selector is not None and not getattr(self, "point", None):
            text += f" WHERE {r.selector}"
        mechanism = r.mechanism
        options: dict[str, Any] = {"beta": r.beta, "radius": r.radius, "epsilon": r.epsilon,
                                   "privacy": mechanism.privacy.value}
        if mechanism.k is not None:
            options["k"] = mechanism.k
        options["norm"] = r.norm
        if r.seed is not None:
            options["seed"] = r.seed
        return text + _with(options)

    def read(self, session: ReleaseSession, progress: Progress | None) -> AnomalyBatch:
        from pcor_sql.anomaly.batch import anomaly_batch

        r = self.request
        with session.access.watch(progress, "counting neighbours"):
            return anomaly_batch(None, r.relation, r.columns, r.selector, r.mechanism, r.norm,
                                 counts=session.access.ball_counts)

    def count(self, batch: AnomalyBatch) -> int:
        return batch.size

    def run(self, session: ReleaseSession, batch: AnomalyBatch, charge: Charged, units: tuple[str, ...],
            progress: Progress | None) -> list[AnomalyResult]:
        request = self.request
        report_phase(progress, "drawing the answers")
        if batch.params != request.mechanism:  # the mechanism that runs is the one that was charged for
            raise InternalError("the anomaly batch was prepared for another mechanism than the request's")
        source, seeded = make_source(request.seed)
        params = batch.params
        return [
            AnomalyResult(
                record=a.record, anomaly=a.anomaly, epsilon=a.epsilon, privacy=a.privacy, k=a.k,
                beta=params.beta, radius=params.radius, norm=batch.norm, seeded=seeded, dataset=self.label,
                units=units, owner=_anomaly_owner(a) if request.owner_view else None,
            )
            for a in batch.answer(source)
        ]


@dataclass
class PointAnswerJob(AnswerJob):
    """The anomaly answer for one point of the metric space (`IDENTIFY ANOMALY VALUE`): `point`
    maps each of the request's columns to a number, in the data or not. Same cost and output law
    as a record's answer (`anomaly.batch.prepare_point_query`); it reads every row, selects none."""

    point: tuple[tuple[str, float], ...] = ()

    def units_sql(self) -> str:
        r = self.request
        return select_from(list(r.columns), r.relation)

    def key_label(self) -> str:
        return "value (" + ", ".join(f"{c} = {float.__repr__(v)}" for c, v in self.point) + ")"

    def read(self, session: ReleaseSession, progress: Progress | None) -> AnomalyBatch:
        from pcor_sql.anomaly.batch import point_batch

        r = self.request
        with session.access.watch(progress, "counting neighbours"):
            counted = session.access.point_counts(r.relation, r.columns, [v for _, v in self.point], r.radius, r.norm)
        return point_batch(dict(self.point), counted, r.mechanism, r.norm)


def _with(options: dict[str, Any]) -> str:
    """A statement's `WITH (name = value, ...)`: text quoted as SQL, numbers as Python writes them."""
    shown = [f"{name} = " + (quote_literal(str(value)) if isinstance(value, str) else repr(value))
             for name, value in options.items()]
    return f" WITH ({', '.join(shown)})"


def start_selection(request: OutlierRequest, schema: Schema) -> dict[str, list[Any]] | None:
    """The request's start context keyed as the schema spells its attributes (None: no start)."""
    return None if request.start is None else resolve_selection(dict(request.start), schema.names, "the start context")


def _spent(charge: Charged) -> tuple[float | None, float | None]:
    spent, limit = charge.spent, charge.limit
    return (spent if limit is not None else None), limit


def _anomaly_owner(answer: AnomalyAnswer) -> dict[str, Any]:
    return {
        "not_for_release": True,
        "true_answer": answer.true_answer,
        "ball_count": answer.ball_count,
        "multiplicity": answer.multiplicity,
        "lambda": answer.lambda_,
        "flip_probability": answer.flip_probability,
    }
