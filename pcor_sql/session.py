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
from pcor_sql.ledger.store import ChargeItem, Ledger, PendingCharge, new_release_id
from pcor_sql.ledger.location import open_ledger
from pcor_sql.engine.progress import report_phase
from pcor_sql.engine.release import OutlierRun, released_predicate
from pcor_sql.engine.schema import Schema
from pcor_sql.engine.summary import CellSummary
from pcor_sql.errors import Refused, UserError, warn_privacy
from pcor_sql.requests import AnomalyRequest, OutlierRequest, VerifierSpec
from pcor_sql.results import AnomalyResult, CoeResult, Explanation
from pcor_sql.sqltext.build import over_context, quoted, select_from

Warn = Callable[[str], None]
Progress = Callable[[int, int], None]


class Session:
    """A connection with its registry, ledger and caches — the owner's handle (DESIGN.md §6).

    `con` is a DuckDB connection or a pyspark SparkSession (rows stay in Spark). Every read of
    rows goes through `self.access` (`pcor_sql.backends`); the ledger never goes through it.

    `ledger`: where charges go — None pins it to the data (the connection's database file, else
    `$PCOR_SQL_LEDGER`, else in memory with a PrivacyWarning), a path to a ledger file,
    `":memory:"`, or a Ledger. A SparkSession has no DuckDB file of its own, so its ledger is
    `ledger`, else `$PCOR_SQL_LEDGER`, else the per-user ledger file — in memory only when
    asked for (`":memory:"`, one per SparkSession, with the warning). `warn(message)` receives
    privacy warnings instead of `warnings.warn` (the CLI prints them). `registry` holds the
    verifiers requests may name. `allow_seeded`: seeded runs are refused on a persistent ledger
    unless this is True."""

    def __init__(
        self,
        con: Any,
        *,
        ledger: Any = None,
        warn: Warn | None = None,
        registry: VerifierRegistry | None = None,
        allow_seeded: bool = False,
    ):
        self.access = open_access(con)
        self.con = con
        self.warn = warn
        self.registry = registry or default_registry()
        self.allow_seeded = bool(allow_seeded)
        self._ledger_choice = ledger
        self._schemas: dict[tuple, Schema] = {}
        self._summaries: dict[tuple, CellSummary] = {}
        self._ledger: Ledger | None = None

    # ---- the jobs ------------------------------------------------------------------------

    def explain(
        self, request: OutlierRequest, *, progress: Progress | None = None, single: bool = False
    ) -> list[Explanation]:
        """One private release per selected record. The owner's path: bad input raises
        UserError and a refused charge BudgetExceeded/Refused before anything is charged; the
        charge is committed once the records are read and before the summary is built or the
        search runs (so their running time is paid for), and it stands if they fail.
        `single`: a selector picking several rows is a UserError, raised before any charge."""
        _expect(request, OutlierRequest, "explain")
        label = self.dataset_label(request.dataset)
        seeded = self.check_seed(request.seed)
        units = self.units(select_from(request.select_list, request.relation, where=request.selector))
        ledger = self.ledger()
        ledger.ensure_writable()
        charged: list[PendingCharge] = []

        def reserve(rows: int) -> None:
            if single:
                _one_row(rows, "explain_outlier", "explain_outliers")
            items = self.outlier_items(request, [f"{request.selector} #{i + 1}" for i in range(rows)], label=label)
            with ledger.open_charge(units, items) as pending:
                charged.append(pending.commit())

        prepared = self._prepare(request, reserve, progress)
        return self.released(request, prepared, charged[0], units, label, seeded, progress)

    def outlier_items(self, request: OutlierRequest, keys: list[str], *, label: str | None,
                      role: str = "owner") -> list[ChargeItem]:
        """One charge per release of `request`, with fresh release ids."""
        mechanism = f"pcor/{request.search}/{request.accounting}"
        return [
            ChargeItem(new_release_id(), request.budget.cost, mechanism, key, request.statement,
                       seeded=request.seed is not None, role=role, dataset=label)
            for key in keys
        ]

    def released(self, request: OutlierRequest, prepared: OutlierRun, charged: PendingCharge | None,
                 units: tuple[str, ...], label: str | None, seeded: bool, progress: Progress | None = None,
                 ) -> list[Explanation]:
        """Run the (already paid for) searches of `prepared` and shape what they release."""
        budget = request.budget
        source, seeded = make_source(request.seed)
        runs = _release_all(prepared, source, progress)
        spent, limit = (charged.spent, charged.limit) if charged is not None else (None, None)
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
                    start_source=run.start_source, seeded=seeded, dataset=label, units=units,
                    budget_spent=spent if limit is not None else None, budget_limit=limit,
                    metric=request.metric, selector=request.selector, full_attributes=_whole(run.space, run.mask),
                    owner=run.owner if request.owner_view else None,
                )
            )
        return out

    def coe(self, request: OutlierRequest, *, progress: Progress | None = None) -> list[CoeResult]:
        """COE(D, V) of every selected record: each valid context with its utility (paper
        Alg. 1, lines 1–7). The owner's exact tool: not private, not charged, never to release."""
        _expect(request, OutlierRequest, "coe")
        prepared = self._prepare(request, progress=progress)
        schema = prepared.summary.schema
        limit = request.max_contexts if request.max_contexts is not None else 1 << 64
        out = []
        for i, rec in enumerate(prepared.records):
            oracle = prepared.oracle(i, utility=request.utility)
            report_phase(progress, "checking contexts")
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

    def identify(
        self, request: AnomalyRequest, *, single: bool = False, progress: Progress | None = None
    ) -> list[AnomalyResult]:
        """Private (β, r)-anomaly answers for the selected records, each costing ε (sequential
        composition) under its own notion (ε-DP or (ε, k)-SP): announced as a warning for a
        batch, refused up front past a unit's limit, charged before any coin is drawn."""
        from pcor_sql.anomaly.batch import prepare_anomaly_queries

        _expect(request, AnomalyRequest, "identify")
        label = self.dataset_label(request.dataset)
        self.check_seed(request.seed)
        units = self.units(select_from(quoted(request.columns), request.relation, where=request.selector))
        ledger = self.ledger()
        ledger.ensure_writable()
        with self.access.watch(progress, "counting neighbours"):
            batch = prepare_anomaly_queries(
                None, request.relation, request.columns, request.selector, beta=request.beta,
                radius=request.radius, epsilon=request.epsilon, privacy=request.privacy, k=request.k,
                norm=request.norm, counts=self.access.ball_counts,
            )
        if single:
            _one_row(batch.size, "identify_anomaly", "identify_anomalies")
        cost = batch.cost
        if batch.size > 1:
            warn_privacy(f"answering {batch.size:,} records costs {batch.size:,} × ε = {cost.epsilon_total:g} in total "
                         f"({cost.guarantee})", self.warn)
        key = request.selector or "all rows"
        report_phase(progress, "charging the budget ledger")
        ledger.charge_many(units, self.anomaly_items(request, [f"{key} #{i + 1}" for i in range(batch.size)], label=label))
        report_phase(progress, "drawing the answers")
        return self.answered(request, batch, units, label)

    def anomaly_items(self, request: AnomalyRequest, keys: list[str], *, label: str | None,
                      role: str = "owner") -> list[ChargeItem]:
        """One charge per answer of `request`, typed by its notion, with fresh release ids."""
        k = request.k if request.privacy == "sp" else None
        mechanism = f"anomaly/{request.privacy}" + (f"/k={k}" if k is not None else "")
        typed = DpCost(request.epsilon) if k is None else SpCost(request.epsilon, k)
        return [
            ChargeItem(new_release_id(), typed, mechanism, key, request.statement,
                       seeded=request.seed is not None, role=role, dataset=label)
            for key in keys
        ]

    def answered(self, request: AnomalyRequest, batch: Any, units: tuple[str, ...], label: str | None,
                 ) -> list[AnomalyResult]:
        """Draw the (already paid for) coins of `batch`."""
        source, seeded = make_source(request.seed)
        params = batch.params
        return [
            AnomalyResult(
                record=a.record, anomaly=a.anomaly, epsilon=a.epsilon, privacy=a.privacy, k=a.k,
                beta=params.beta, radius=params.radius, norm=batch.norm, seeded=seeded, dataset=label, units=units,
                owner=_anomaly_owner(a) if request.owner_view else None,
            )
            for a in batch.answer(source)
        ]

    # ---- the trust model -----------------------------------------------------------------

    def units(self, relation: str) -> tuple[str, ...]:
        """The privacy units (base tables and files) `relation` — or a whole SELECT statement —
        reads, resolved by the engine's binder/analyzer from the catalog alone (no rows read),
        afresh for every request: a view redefined since the last one charges its new tables."""
        return tuple(u.name for u in self.access.units(relation))

    def dataset_label(self, name: str | None) -> str | None:
        """`dataset=` only labels a registered dataset; it never opens an account of its own."""
        if name is None:
            return None
        from pcor_sql.ledger.dataset_registry import get_dataset

        return get_dataset(self.ledger(), name).name

    def check_seed(self, seed: int | None) -> bool:
        """A seed makes the output a deterministic function of the data: refused on a
        persistent ledger unless the owner allowed it, and always warned about."""
        if seed is None:
            return False
        if self.ledger().persistent and not self.allow_seeded:
            raise Refused(
                "a seed makes the output a deterministic function of the data, so seeded runs are refused on "
                "a persistent ledger",
                "drop the seed for a real release, or allow seeded test runs: allow_seeded=True (CLI --allow-seeded)",
            )
        warn_privacy("seeded run: the output is a deterministic function of the data — not private, "
                     "never release it", self.warn, stacklevel=4)
        return True

    # ---- what the jobs share -------------------------------------------------------------

    def prepare(self, request: OutlierRequest) -> OutlierRun:
        """The owner's lab hook: resolve the schema, read the selected records and build the
        per-cell summary — everything a release reads — without charging or drawing anything.
        The result hands out oracles and uncharged search runs: owner-only, never an analyst's."""
        _expect(request, OutlierRequest, "prepare")
        return self._prepare(request)

    def _prepare(
        self, request: OutlierRequest, check: Callable[[int], Any] | None = None, progress: Progress | None = None
    ) -> OutlierRun:
        """`check(number of records)` runs before the summary is built (a budget precheck);
        `progress` hears how the summary build goes."""
        verifier = self.verifier(request.verifier)
        schema = self.schema(request)
        start = None
        if request.start is not None:
            start = resolve_selection(dict(request.start), schema.names, "the start context")
        records = self.access.records(request.relation, request.metric, request.selector)
        if check is not None:
            check(len(records))
        summary = self.summary(schema, with_values=bool(getattr(verifier, "needs_values", False)), progress=progress)
        return OutlierRun(self.access, request, summary, verifier, records, start)

    def verifier(self, spec: Any) -> Any:
        """The verifier a request names, made by this session's registry (or the object given)."""
        if isinstance(spec, VerifierSpec):
            return self.registry.make(spec.name, **spec.options_dict())
        return spec

    def ledger(self) -> Ledger:
        """The budget ledger (opened once, so its in-memory warning shows once)."""
        if self._ledger is None:
            # A DuckDB connection's own database anchors the ledger (pinned to its file, if any);
            # an engine with no DuckDB file of its own defaults to the per-user ledger file.
            self._ledger = open_ledger(self.access.ledger_con, self._ledger_choice, warn=self.warn,
                                       per_user_default=self.access.engine != "duckdb")
        return self._ledger

    def schema(self, request: OutlierRequest) -> Schema:
        key = (request.relation, request.metric, request.by, request.domains)
        if key not in self._schemas:
            described, _ = self.access.describe(request.relation, request.metric)
            domains = None if request.domains is None else {k: list(v) for k, v in request.domains}
            self._schemas[key] = self.access.schema(
                request.relation, request.metric, by=request.by, domains=domains,
                warn=lambda message: warn_privacy(message, self.warn, stacklevel=7), described=described,
            )
        return self._schemas[key]

    def summary(self, schema: Schema, *, with_values: bool = False, progress: Progress | None = None) -> CellSummary:
        """The per-cell summary of `schema`'s relation, built once per Session. `with_values`
        reads the sorted metric in the same query (LOF and histogram need it; one statement
        instead of two). `progress` hears how the build query goes (a large table's is long)."""
        key = (schema.relation_sql, schema.metric_sql, schema.attributes, schema.cast_varchar)
        if key not in self._summaries:
            with self.access.watch(progress, "building the summary"):
                self._summaries[key] = self.access.summary(schema, with_values=with_values)
        return self._summaries[key]


def session_for(con: Any, session: Session | None = None, warn: Warn | None = None, **kwargs: Any) -> Session:
    """`session` if given (then `con`, if given too, must be its connection), else a fresh
    Session on `con`: how the module-level conveniences accept either."""
    if session is not None:
        if not isinstance(session, Session):
            raise UserError(f"invalid session: {type(session).__name__}", "pass a pcor_sql.Session")
        if con is not None and con is not session.con:
            raise UserError("the connection given is not the session's", "pass con=None with session=")
        if kwargs:
            raise UserError(f"{', '.join(kwargs)} belong(s) to the Session", "pass them to pcor_sql.Session(...)")
        return session
    return Session(con, warn=warn, **kwargs)


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


def _release_all(prepared: OutlierRun, source: Any, progress: Progress | None) -> list[Any]:
    """Every selected record's search: one record reports its search's own progress (direct
    enumerates contexts); a batch reports records done."""
    n = len(prepared.records)
    if n == 1:
        report_phase(progress, "searching")
        return [prepared.release(0, source, progress=progress)]
    report_phase(progress, "releasing records")
    runs = []
    for i in range(n):
        runs.append(prepared.release(i, source))
        if progress is not None:
            progress(i + 1, n)
    return runs


def _whole(space: Any, mask: int) -> tuple[str, ...]:
    """The attributes a released context keeps whole (for the plain-words summary)."""
    return tuple(a.name for i, a in enumerate(space.attributes) if space.is_full(mask, i))


def _anomaly_owner(answer: Any) -> dict[str, Any]:
    return {
        "not_for_release": True,
        "true_answer": answer.true_answer,
        "ball_count": answer.ball_count,
        "multiplicity": answer.multiplicity,
        "lambda": answer.lambda_,
        "flip_probability": answer.flip_probability,
    }
