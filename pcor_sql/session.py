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

import contextlib
import copy
import warnings
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Sequence

from pcor_sql import pipeline
from pcor_sql.backends import open_access
from pcor_sql.core.space import ContextSpace
from pcor_sql.core.verifiers.base import Verifier
from pcor_sql.core.verifiers.builtins import unserved
from pcor_sql.core.verifiers.capabilities import capabilities_of
from pcor_sql.core.verifiers.registry import VerifierRegistry, default_registry
from pcor_sql.engine.context_sql import context_predicate
from pcor_sql.engine.progress import report_phase
from pcor_sql.engine.record_search import OutlierRun, SelectedRecord
from pcor_sql.engine.schema import Schema
from pcor_sql.engine.search_pool import check_workers
from pcor_sql.engine.summary import CellSummary
from pcor_sql.errors import Refused, UserError, warn_privacy
from pcor_sql.jobs import AnswerJob, ReleaseJob, start_selection
from pcor_sql.ledger.location import open_ledger
from pcor_sql.ledger.seams import LedgerChoice
from pcor_sql.ledger.store import Ledger
from pcor_sql.request_values import AnomalyRequest, OutlierRequest, VerifierSpec
from pcor_sql.readable import uniform_choice_warning
from pcor_sql.results import AnomalyResult, CoeResult, Explanation, Results
from pcor_sql.backends.base import DataAccess, Engine

if TYPE_CHECKING:  # annotations only: each is imported where it runs
    from pcor_sql.anomaly.batch import AnomalyBatch
    from pcor_sql.engine.search_processes import SearchProcess

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
    unless this is True. `per_user_ledger`: with no ledger given and no `$PCOR_SQL_LEDGER`, data
    outside a DuckDB file is charged to the per-user ledger file rather than memory (the CLI)."""

    def __init__(
        self,
        con: Any,
        *,
        ledger: LedgerChoice = None,
        warn: Warn | None = None,
        registry: VerifierRegistry | None = None,
        allow_seeded: bool = False,
        per_user_ledger: bool = False,
    ):
        self.access = open_access(con)
        self._per_user_ledger = per_user_ledger or self.access.engine != Engine.DUCKDB
        self.con = con
        self.warn = warn
        self.registry = registry or default_registry()
        self.allow_seeded = bool(allow_seeded)
        self._ledger_choice = ledger
        self._schemas: dict[tuple, Schema] = {}
        self._summaries: dict[tuple, CellSummary] = {}
        #: Around every summary build: the service raises DuckDB's threads for it (`ServingThreads`).
        self.building: Callable[[], ContextManager[Any]] = contextlib.nullcontext
        self._ledger: Ledger | None = None
        #: A service's search process for this Session's requests (`engine.search_processes`),
        #: set by the service's worker pool; None: searches run in this thread.
        self.searches: SearchProcess | None = None

    # ---- the jobs ------------------------------------------------------------------------

    def explain(
        self, request: OutlierRequest, *, progress: Progress | None = None, single: bool = False,
        max_records: int | None = None, workers: int = 1,
    ) -> list[Explanation]:
        """One private release per selected record, through the pipeline under the owner's
        policy (`pcor_sql.pipeline`): bad input raises UserError and a refused charge
        BudgetExceeded/Refused before anything is charged; the records are read first (their
        count is the cost), then the charge is reserved, then the summary is built and the
        search runs; if that fails the charge is refunded (an owner's failure is not charged).
        `single`: a selector picking several rows is a UserError, raised before any charge.
        `workers`: processes the searches of a batch run in (`engine.search_pool`)."""
        _expect(request, OutlierRequest, "explain")
        job = ReleaseJob(request, self.dataset_label(request.dataset), workers=check_workers(workers))
        self.check_seed(request.seed)
        return Results(pipeline.run(self, job, pipeline.OWNER, single="explain_outlier" if single else None,
                                    max_records=max_records, progress=progress))

    def prepare_records(self, request: OutlierRequest, records: Sequence[SelectedRecord],
                        progress: Progress | None = None) -> OutlierRun:
        """What the releases of `request` read for the given selected `records`: the schema,
        the verifier, the start selection and the per-cell summary."""
        verifier = self.verifier(request.verifier)
        schema = self.schema(request)
        start = start_selection(request, schema)
        summary = self.summary(schema, with_values=capabilities_of(verifier).needs_values, progress=progress)
        uniform = uniform_choice_warning(request.epsilon, request.budget.epsilon1, summary.n_rows)
        if uniform is not None:  # said to the owner (a service logs it): the row count is data
            self.warn(uniform) if self.warn is not None else warnings.warn(uniform, UserWarning, stacklevel=4)
        return OutlierRun(self.access, request, summary, verifier, records, start)

    def coe(self, request: OutlierRequest, *, progress: Progress | None = None) -> list[CoeResult]:
        """COE(D, V) of every selected record: each valid context with its utility (paper
        Alg. 1, lines 1–7). The owner's exact tool: not private, not charged, never to release."""
        _expect(request, OutlierRequest, "coe")
        prepared = self._prepare(request, progress)
        schema = prepared.summary.schema
        limit = request.setting("max_contexts")
        limit = limit if limit is not None else 1 << 64
        out = []
        for i, rec in enumerate(prepared.records):
            oracle = prepared.oracle(i, utility=request.utility)
            report_phase(progress, "checking contexts")
            masks, utilities = oracle.coe(limit, progress)
            space = oracle.space

            def predicate(mask: int, space: ContextSpace = space) -> str:
                return context_predicate(space, mask, cast_varchar=schema.cast_varchar, not_null=schema.not_null)

            out.append(
                CoeResult(
                    record=rec.record, verifier=prepared.verifier_label, utility=request.utility,
                    admissible=space.n_admissible, size=len(masks),
                    max_utility=float(utilities.max()) if len(utilities) else None,
                    _space=space, _masks=masks, _utilities=utilities, _predicate=predicate,
                )
            )
        return Results(out)

    def identify(
        self, request: AnomalyRequest, *, single: bool = False, progress: Progress | None = None,
        max_records: int | None = None, workers: int = 1,
    ) -> list[AnomalyResult]:
        """Private (β, r)-anomaly answers for the selected records, each costing ε (sequential
        composition) under its own notion (ε-DP or (ε, k)-SP): announced as a warning for a
        batch, refused up front past a unit's limit, charged before any coin is drawn.
        `workers` is checked and then has nothing to do: DuckDB counts the balls on every core,
        and the answers are one vectorised draw, with no per-record search to hand over."""
        _expect(request, AnomalyRequest, "identify")
        check_workers(workers)
        job = AnswerJob(request, self.dataset_label(request.dataset))
        self.check_seed(request.seed)

        def announce(count: int, batch: AnomalyBatch | None) -> None:
            if count > 1 and batch is not None:
                cost = batch.cost
                warn_privacy(f"answering {count:,} records costs {count:,} × ε = {cost.epsilon_total:g} in total "
                             f"({cost.guarantee})", self.warn)

        return Results(pipeline.run(self, job, pipeline.OWNER, single="identify_anomaly" if single else None,
                                    max_records=max_records, announce=announce, progress=progress))

    # ---- the trust model -----------------------------------------------------------------

    def units(self, relation: str) -> tuple[str, ...]:
        """The privacy units (base tables and files) `relation` — or a whole SELECT statement —
        reads, resolved by the engine's binder/analyzer from the catalog alone (no rows read),
        against the catalog as it is at every request: a view redefined since the last one
        charges its new tables (`engine.units.resolve_units`: what is kept, and under what)."""
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

    def _prepare(self, request: OutlierRequest, progress: Progress | None = None) -> OutlierRun:
        self.verifier(request.verifier)
        self.schema(request)
        records = self.access.records(request.relation, request.metric, request.selector)
        return self.prepare_records(request, records, progress)

    def verifier(self, spec: VerifierSpec | Verifier) -> Verifier:
        """The verifier a request names, made by this session's registry (or the object given);
        a UserError when this session's engine cannot serve what it reads. Every job asks for
        its verifier here before the reservation, so such a request is refused uncharged."""
        verifier = self.registry.make(spec.name, **spec.options_dict()) if isinstance(spec, VerifierSpec) else spec
        refusal = unserved(verifier, self.access.serves, self.access.engine)
        if refusal is not None:
            raise UserError(*refusal)
        return verifier

    def close(self) -> None:
        """Close the ledger if this Session opened one (a ledger file it owns)."""
        if self._ledger is not None:
            self._ledger.close()

    def ledger(self) -> Ledger:
        """The budget ledger (opened once, so its in-memory warning shows once)."""
        if self._ledger is None:
            # A DuckDB connection's own database anchors the ledger (pinned to its file, if any);
            # an engine with no DuckDB file of its own defaults to the per-user ledger file.
            self._ledger = open_ledger(self.access.ledger_con, self._ledger_choice, warn=self.warn,
                                       per_user_default=self._per_user_ledger)
        return self._ledger

    def schema(self, request: OutlierRequest) -> Schema:
        key = (request.relation, request.metric, request.by, request.domains, request.bins)
        if key not in self._schemas:
            described, _ = self.access.describe(request.relation, request.metric)
            domains = None if request.domains is None else {k: list(v) for k, v in request.domains}
            if request.bins:  # a declared Bins is an ordinal attribute's domain (`engine.schema`)
                domains = {**(domains or {}), **dict(request.bins)}
            self._schemas[key] = self.access.schema(
                request.relation, request.metric, by=request.by, domains=domains,
                warn=lambda message: warn_privacy(message, self.warn, stacklevel=7), described=described,
            )
        return self._schemas[key]

    def reading_nothing(self) -> "Session":
        """A Session like this one whose data access refuses every use (`NotKept`: see
        `ledger.admission_memory.kept_only`): for the service's admissions tried on its event loop,
        where no statement may run."""
        self.__dict__.setdefault("_key_kinds", {})  # shared: what this Session learns of key types, the twin uses
        twin = copy.copy(self)
        twin._ledger = self.ledger()  # opened here, where the access may still be used
        twin._schemas, twin._summaries = {}, {}
        twin.access = _ReadsNothing(self.access)
        return twin

    def summary(self, schema: Schema, *, with_values: bool = False, progress: Progress | None = None) -> CellSummary:
        """The per-cell summary of `schema`'s relation, built once per Session. `with_values`
        reads the sorted metric in the same query (LOF and histogram need it; one statement
        instead of two). `progress` hears how the build query goes (a large table's is long)."""
        key = (schema.relation_sql, schema.metric_sql, schema.attributes, schema.cast_varchar)
        if key not in self._summaries:
            with self.building(), self.access.watch(progress, "building the summary"):
                self._summaries[key] = self.access.summary(schema, with_values=with_values)
        return self._summaries[key]


    def cached_summaries(self) -> list[CellSummary]:
        """The summaries this Session has built (a service shares them with its search process)."""
        return list(self._summaries.values())


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


def _expect(request: object, cls: type, method: str) -> None:
    if not isinstance(request, cls):
        raise UserError(
            f"Session.{method} takes an {cls.__name__}, got {type(request).__name__}",
            "build one with pcor_sql.outlier_request(...) / pcor_sql.anomaly_request(...)",
        )


class _ReadsNothing:
    """A data access that says what its engine is and serves (constants: checking a verifier
    needs them) and refuses every other use (`Session.reading_nothing`)."""

    def __init__(self, real: DataAccess):
        self.engine, self.serves = real.engine, real.serves

    def __getattr__(self, name: str) -> Any:
        from pcor_sql.ledger.admission_memory import NotKept

        raise NotKept()
