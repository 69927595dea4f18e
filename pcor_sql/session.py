"""The Session: owns a DuckDB connection, its verifier registry, its budget ledger and the
summaries built on it, and runs requests.

    session = pcor_sql.Session(con)
    request = pcor_sql.outlier_request(con, "SELECT salary FROM salaries WHERE id = 42", epsilon=0.2)
    [explanation] = session.explain(request)

`explain` releases (charged to the ledger before anything is returned), `identify` answers
anomaly questions (charged before the coins are drawn), `coe` is the owner's exact,
uncharged enumeration, and `prepare` is the documented hook for timing the engine alone
(benchmarks): it builds what a release reads and hands the owner the oracles, uncharged.

The caches are a snapshot: a summary built before a table changes does not see the change;
make a new Session to read fresh data.
"""

from __future__ import annotations

from typing import Any, Callable

from pcor_sql.backends import open_access
from pcor_sql.core.accounting import DpCost, SpCost
from pcor_sql.core.randomness import make_source
from pcor_sql.core.space import resolve_selection
from pcor_sql.core.verifiers.registry import VerifierRegistry, default_registry
from pcor_sql.engine.compile import context_predicate
from pcor_sql.engine.dataset_key import dataset_key
from pcor_sql.engine.ledger import LOCATION_SQL, ChargeItem, Ledger, PendingCharge, new_release_id
from pcor_sql.engine.release import OutlierRun, released_predicate
from pcor_sql.engine.schema import Schema
from pcor_sql.engine.summary import CellSummary
from pcor_sql.errors import UserError
from pcor_sql.requests import AnomalyRequest, OutlierRequest, VerifierSpec
from pcor_sql.results import AnomalyResult, CoeResult, Explanation
from pcor_sql.sqltext.build import over_context

Warn = Callable[[str], None]
Progress = Callable[[int, int], None]


class Session:
    """A connection with its registry, ledger and caches. `warn(message)` receives warnings
    (the in-memory ledger, data-derived domains); `registry` holds the verifiers requests may
    name (default: the built-ins).

    `con` is a DuckDB connection (the ledger lives in its database) or a pyspark SparkSession
    (rows stay in Spark; `ledger_db`, a DuckDB file path or connection, holds the ledger —
    default: one in-memory ledger per SparkSession). Every read of rows goes through
    `self.access` (`pcor_sql.backends`)."""

    def __init__(
        self,
        con: Any,
        *,
        warn: Warn | None = None,
        registry: VerifierRegistry | None = None,
        ledger_db: Any = None,
    ):
        self.access = open_access(con, ledger_db=ledger_db)
        self.con = con
        self.warn = warn
        self.registry = registry or default_registry()
        self._schemas: dict[tuple, Schema] = {}
        self._summaries: dict[tuple, CellSummary] = {}
        self._ledger: Ledger | None = None

    # ---- the jobs ------------------------------------------------------------------------

    def explain(
        self, request: OutlierRequest, *, progress: Progress | None = None, single: bool = False
    ) -> list[Explanation]:
        """One private release per selected record, all charged in one transaction before any
        is returned; bad input raises UserError before any work, an exhausted budget
        BudgetExceeded before the search runs. `single`: a selector picking several rows is a
        UserError, raised before anything is charged."""
        _expect(request, OutlierRequest, "explain")
        name = request.dataset or dataset_key(request.relation)
        budget = request.budget
        mechanism = f"pcor/{request.search}/{request.accounting}"
        pending: list[PendingCharge] = []

        def reserve(rows: int) -> None:
            # The ledger transaction opens, and refuses, before the summary is built and the
            # searches run; it writes once they are done.
            if single:
                _one_row(rows, "explain_outlier", "explain_outliers")
            items = [
                ChargeItem(new_release_id(), budget.cost, mechanism, f"{request.selector} #{i + 1}", request.statement)
                for i in range(rows)
            ]
            pending.append(self.ledger().open_charge(name, items))

        try:
            prepared = self._prepare(request, reserve)
            source, seeded = make_source(request.seed)
            runs = [prepared.release(i, source, progress=progress) for i in range(len(prepared.records))]
            charged = pending[0].commit()
        finally:
            for p in pending:
                p.close()
        spent, limit = charged.spent, charged.limit
        verifier = prepared.verifier_label
        out = []
        for rec, run in zip(prepared.records, runs):
            predicate = released_predicate(prepared.summary, run.space, run.mask)
            out.append(
                Explanation(
                    record=rec.record, context=run.space.values(run.mask), predicate=self.access.render(predicate),
                    explanation_sql=self.access.render(over_context(request.select_list, request.relation, predicate)),
                    epsilon=budget.epsilon, epsilon1=budget.epsilon1, accounting=budget.accounting,
                    search=request.search, samples=request.samples, descents=request.descents,
                    em_calls=run.trace.n_em_calls, verifier=verifier, utility=request.utility,
                    start_source=run.start_source, seeded=seeded, dataset=name,
                    budget_spent=spent if limit is not None else None, budget_limit=limit,
                    owner=run.owner if request.owner_view else None,
                )
            )
        return out

    def coe(self, request: OutlierRequest, *, progress: Progress | None = None) -> list[CoeResult]:
        """COE(D, V) of every selected record: each valid context with its utility (paper
        Alg. 1, lines 1–7). The owner's exact tool: not private, not charged, never to release."""
        _expect(request, OutlierRequest, "coe")
        prepared = self.prepare(request)
        schema = prepared.summary.schema
        limit = request.max_contexts if request.max_contexts is not None else 1 << 64
        out = []
        for i, rec in enumerate(prepared.records):
            oracle = prepared.oracle(i, utility=request.utility)
            masks, utilities = oracle.coe(limit, progress)
            space = oracle.space

            def predicate(mask: int, space: Any = space) -> str:
                return context_predicate(space, mask, cast_varchar=schema.cast_varchar, not_null=schema.not_null)

            out.append(
                CoeResult(
                    record=rec.record, verifier=prepared.verifier_label, utility=request.utility,
                    admissible=space.n_admissible, size=len(masks),
                    max_utility=float(utilities.max()) if len(utilities) else None,
                    _space=space, _masks=masks, _utilities=utilities, _predicate=predicate,
                )
            )
        return out

    def identify(self, request: AnomalyRequest, *, single: bool = False) -> list[AnomalyResult]:
        """Private (β, r)-anomaly answers for the selected records, each costing ε (sequential
        composition): announced through `warn` for a batch, refused up front past the
        dataset's limit, charged before any coin is drawn."""
        from pcor_sql.anomaly.batch import prepare_anomaly_queries

        _expect(request, AnomalyRequest, "identify")
        ledger = self.ledger()
        ledger.ensure_writable()
        batch = prepare_anomaly_queries(
            None, request.relation, request.columns, request.selector, beta=request.beta,
            radius=request.radius, epsilon=request.epsilon, privacy=request.privacy, k=request.k, norm=request.norm,
            counts=self.access.ball_counts,
        )
        if single:
            _one_row(batch.size, "identify_anomaly", "identify_anomalies")
        cost = batch.cost
        name = request.dataset or dataset_key(request.relation)
        if self.warn is not None and batch.size > 1:
            self.warn(
                f"answering {batch.size:,} records costs {batch.size:,} × ε = {cost.epsilon_total:g} in total "
                f"({cost.guarantee})"
            )
        params = batch.params
        mechanism = f"anomaly/{params.privacy}" + (f"/k={params.k}" if params.privacy == "sp" else "")
        key = request.selector or "all rows"
        typed = DpCost(cost.epsilon_per_answer) if params.privacy == "dp" else SpCost(cost.epsilon_per_answer, params.k)
        items = [
            ChargeItem(new_release_id(), typed, mechanism, f"{key} #{i + 1}", request.statement)
            for i in range(batch.size)
        ]
        ledger.charge_many(name, items)
        source, seeded = make_source(request.seed)
        return [
            AnomalyResult(
                record=a.record, anomaly=a.anomaly, epsilon=a.epsilon, privacy=a.privacy, k=a.k,
                beta=params.beta, radius=params.radius, norm=batch.norm, seeded=seeded, dataset=name,
                owner=_anomaly_owner(a) if request.owner_view else None,
            )
            for a in batch.answer(source)
        ]

    # ---- what the jobs share -------------------------------------------------------------

    def prepare(self, request: OutlierRequest) -> OutlierRun:
        """The owner's lab hook: resolve the schema, read the selected records and build the
        per-cell summary — everything a release reads — without charging or drawing anything.
        The result hands out oracles and uncharged search runs: owner-only, never an analyst's."""
        _expect(request, OutlierRequest, "prepare")
        return self._prepare(request)

    def _prepare(self, request: OutlierRequest, check: Callable[[int], Any] | None = None) -> OutlierRun:
        """`check(number of records)` runs before the summary is built (a budget precheck)."""
        verifier = self.verifier(request.verifier)
        schema = self.schema(request)
        start = None
        if request.start is not None:
            start = resolve_selection(dict(request.start), schema.names, "the start context")
        records = self.access.records(request.relation, request.metric, request.selector)
        if check is not None:
            check(len(records))
        summary = self.summary(schema, with_values=bool(getattr(verifier, "needs_values", False)))
        return OutlierRun(self.access, request, summary, verifier, records, start)

    def verifier(self, spec: Any) -> Any:
        """The verifier a request names, made by this session's registry (or the object given)."""
        if isinstance(spec, VerifierSpec):
            return self.registry.make(spec.name, **spec.options_dict())
        return spec

    def ledger(self) -> Ledger:
        """The budget ledger of this connection (made once, so its in-memory warning shows once)."""
        if self._ledger is None:
            self._ledger = Ledger(self.access.ledger_con, warn=self.warn)
        return self._ledger

    def schema(self, request: OutlierRequest) -> Schema:
        key = (request.relation, request.metric, request.by, request.domains)
        if key not in self._schemas:
            # The ledger's location rides along with the first DESCRIBE: one catalog statement.
            along = LOCATION_SQL if self._ledger is None else None
            described, location = self.access.describe(request.relation, request.metric, along=along)
            if location is not None:
                self._ledger = Ledger(self.access.ledger_con, warn=self.warn, location=location)
            domains = None if request.domains is None else {k: list(v) for k, v in request.domains}
            self._schemas[key] = self.access.schema(
                request.relation, request.metric, by=request.by, domains=domains, warn=self.warn, described=described,
            )
        return self._schemas[key]

    def summary(self, schema: Schema, *, with_values: bool = False) -> CellSummary:
        """The per-cell summary of `schema`'s relation, built once per Session. `with_values`
        reads the sorted metric in the same query (LOF and histogram need it; one statement
        instead of two)."""
        key = (schema.relation_sql, schema.metric_sql, schema.attributes, schema.cast_varchar)
        if key not in self._summaries:
            self._summaries[key] = self.access.summary(schema, with_values=with_values)
        return self._summaries[key]


def session_for(con: Any, session: Session | None = None, warn: Warn | None = None) -> Session:
    """`session` if given (then `con`, if given too, must be its connection), else a fresh
    Session on `con`: how the module-level conveniences accept either."""
    if session is not None:
        if not isinstance(session, Session):
            raise UserError(f"invalid session: {type(session).__name__}", "pass a pcor_sql.Session")
        if con is not None and con is not session.con:
            raise UserError("the connection given is not the session's", "pass con=None with session=")
        return session
    return Session(con, warn=warn)


def _expect(request: Any, cls: type, method: str) -> None:
    if not isinstance(request, cls):
        raise UserError(
            f"Session.{method} takes an {cls.__name__}, got {type(request).__name__}",
            "build one with pcor_sql.outlier_request(...) / pcor_sql.anomaly_request(...)",
        )


def _one_row(rows: int, function: str, several: str) -> None:
    if rows != 1:
        raise UserError(
            f"the selector picks several rows, and {function} answers for one record",
            f"narrow the WHERE clause, or call pcor_sql.{several} (one result per row, each charged)",
        )


def _anomaly_owner(answer: Any) -> dict[str, Any]:
    return {
        "not_for_release": True,
        "true_answer": answer.true_answer,
        "ball_count": answer.ball_count,
        "multiplicity": answer.multiplicity,
        "lambda": answer.lambda_,
        "flip_probability": answer.flip_probability,
    }
