"""The Python API for apps: private contextual outlier release on a DuckDB connection.

    import duckdb, pcor_sql
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    r = pcor_sql.explain_outlier(con, "SELECT salary FROM salaries WHERE id = 42", epsilon=0.2, seed=7)
    r.context, r.predicate, r.explanation_sql

Only the released context and the privacy parameters are in a result; population sizes,
utilities and search diagnostics are in `.owner`, filled only with `owner_view=True`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import duckdb

from pcor_sql.core.accounting import derive_budget, validate_samples
from pcor_sql.core.randomness import make_source
from pcor_sql.core.searches import DEFAULT_SAMPLES
from pcor_sql.core.start import DEFAULT_DESCENTS
from pcor_sql.engine.coe import DEFAULT_MAX_ADMISSIBLE
from pcor_sql.engine.evaluator import UTILITIES
from pcor_sql.engine.ledger import ChargeItem, Ledger, dataset_key, new_release_id
from pcor_sql.engine.release import OwnerView, release_one, released_predicate
from pcor_sql.engine.session import Session, make_verifier, verifier_spec
from pcor_sql.errors import UserError
from pcor_sql.frontend.rewrite import explanation_sql
from pcor_sql.frontend.select import parse_select

Warn = Callable[[str], None]


@dataclass(frozen=True)
class Explanation:
    """One released explanation: the context in which the record is an outlier."""

    record: dict[str, Any]
    context: dict[str, list[Any]]
    predicate: str
    explanation_sql: str
    epsilon: float
    epsilon1: float
    accounting: str
    search: str
    samples: int
    descents: int
    em_calls: int
    verifier: str
    utility: str
    start_source: str
    seeded: bool
    dataset: str
    budget_spent: float | None = None
    budget_limit: float | None = None
    owner: OwnerView | None = field(default=None, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The stable JSON shape (documented in the README)."""
        out: dict[str, Any] = {
            "record": self.record,
            "context": self.context,
            "predicate": self.predicate,
            "explanation_sql": self.explanation_sql,
            "epsilon": self.epsilon,
            "epsilon1": self.epsilon1,
            "accounting": self.accounting,
            "search": self.search,
            "samples": self.samples,
            "descents": self.descents,
            "em_calls": self.em_calls,
            "verifier": self.verifier,
            "utility": self.utility,
            "start_source": self.start_source,
            "seeded": self.seeded,
            "dataset": self.dataset,
        }
        if self.seeded:
            out["warning"] = "seeded run: reproducible, not for real releases"
        if self.budget_limit is not None:
            out["budget"] = {"spent": self.budget_spent, "limit": self.budget_limit}
        if self.owner is not None:
            out["owner"] = self.owner.as_dict()
        return out


def explain_outlier(
    con: duckdb.DuckDBPyConnection,
    query: str,
    *,
    by: Sequence[str] | None = None,
    domains: Mapping[str, Sequence[Any]] | None = None,
    epsilon: float = 0.2,
    search: str = "bfs",
    samples: int = DEFAULT_SAMPLES,
    verifier: Any = "lof",
    verifier_options: Mapping[str, Any] | None = None,
    utility: str = "population",
    start: str | Mapping[str, Sequence[Any]] | None = None,
    accounting: str = "tight",
    seed: int | None = None,
    dataset: str | None = None,
    owner_view: bool = False,
    max_contexts: int | None = DEFAULT_MAX_ADMISSIBLE,
    descents: int = DEFAULT_DESCENTS,
    warn: Warn | None = None,
    progress: Callable[[int, int], None] | None = None,
    session: Session | None = None,
) -> Explanation | tuple[Explanation, ...]:
    """Release, under ε-OCDP, a context in which the record(s) picked by `query` are outliers.

    `query` is `SELECT <metric> FROM <relation> WHERE <record selector>`. One selected row gives
    one `Explanation`; several give a tuple, one per row, each charged ε to the budget ledger
    (all charges in one transaction, before anything is returned). Every argument is checked
    before any work; bad input raises `UserError`. `descents` (bfs only) seeds the search's
    frontier with that many validity-only random descents from the full context — free under
    OCDP; 0 runs the paper's Algorithm 5 exactly.
    """
    results = explain_outliers(
        con, query, by=by, domains=domains, epsilon=epsilon, search=search, samples=samples,
        verifier=verifier, verifier_options=verifier_options, utility=utility, start=start,
        accounting=accounting, seed=seed, dataset=dataset, owner_view=owner_view,
        max_contexts=max_contexts, descents=descents, warn=warn, progress=progress, session=session,
    )
    return results[0] if len(results) == 1 else results


def explain_outliers(
    con: duckdb.DuckDBPyConnection,
    query: str,
    *,
    by: Sequence[str] | None = None,
    domains: Mapping[str, Sequence[Any]] | None = None,
    epsilon: float = 0.2,
    search: str = "bfs",
    samples: int = DEFAULT_SAMPLES,
    verifier: Any = "lof",
    verifier_options: Mapping[str, Any] | None = None,
    utility: str = "population",
    start: str | Mapping[str, Sequence[Any]] | None = None,
    accounting: str = "tight",
    seed: int | None = None,
    dataset: str | None = None,
    owner_view: bool = False,
    max_contexts: int | None = DEFAULT_MAX_ADMISSIBLE,
    descents: int = DEFAULT_DESCENTS,
    warn: Warn | None = None,
    progress: Callable[[int, int], None] | None = None,
    session: Session | None = None,
) -> tuple[Explanation, ...]:
    """As `explain_outlier`, always returning a tuple (one Explanation per selected row)."""
    q = _record_query(con, query, utility)
    budget = derive_budget(epsilon, search, validate_samples(samples), accounting, monotone=True)
    if isinstance(descents, bool) or not isinstance(descents, int) or descents < 0:
        raise UserError(f"descents must be an integer ≥ 0, got {descents!r}", "pass e.g. descents=24 (0: the paper's BFS)")
    descents = descents if search == "bfs" else 0
    verifier_obj = make_verifier(verifier, verifier_options)
    session = session or Session(con, warn=warn)
    schema = session.schema(q.relation_sql, q.metric_sql[0], by=by, domains=domains)
    start_sel = session.start_selection(start, schema)
    ledger = session.ledger()
    name = dataset or dataset_key(q.relation_sql)
    rows = session.records(q.relation_sql, q.metric_sql[0], q.selector_sql)
    ledger.precheck(name, budget.epsilon * len(rows))
    summary = session.summary(schema)
    source, seeded = make_source(seed)
    releases = []
    for row, v in rows:
        rel = release_one(
            con, summary, row, v, verifier_obj, budget, source,
            search=search, samples=samples, utility=utility, start=start_sel,
            owner_view=owner_view, max_contexts=max_contexts, progress=progress, descents=descents,
        )
        releases.append((row, rel))
    items = [
        ChargeItem(new_release_id(), budget.epsilon, f"pcor/{search}/{accounting}", _record_key(q, i, row), query)
        for i, (row, _) in enumerate(releases)
    ]
    spent = ledger.charge_many(name, items)
    limit = ledger.status(name).limit
    out = []
    for row, rel in releases:
        predicate = released_predicate(summary, rel.space, rel.mask)
        out.append(
            Explanation(
                record=row,
                context=rel.space.values(rel.mask),
                predicate=predicate,
                explanation_sql=explanation_sql(q, predicate),
                epsilon=budget.epsilon,
                epsilon1=budget.epsilon1,
                accounting=budget.accounting,
                search=search,
                samples=samples,
                descents=descents,
                em_calls=rel.trace.n_em_calls,
                verifier=verifier_spec(verifier_obj),
                utility=utility,
                start_source=rel.start_source,
                seeded=seeded,
                dataset=name,
                budget_spent=spent if limit is not None else None,
                budget_limit=limit,
                owner=rel.owner,
            )
        )
    return tuple(out)


def _record_query(con: duckdb.DuckDBPyConnection, query: str, utility: str) -> Any:
    """The parsed `SELECT <metric> FROM <relation> WHERE <selector>`; the utility name checked."""
    q = parse_select(con, query)
    if q.selector_sql is None:
        raise UserError(
            "the query has no WHERE clause picking the record to explain",
            "add one, e.g. SELECT salary FROM salaries WHERE id = 42",
        )
    if utility not in UTILITIES:
        raise UserError(f"unknown utility {utility!r}", f"use one of: {', '.join(UTILITIES)}")
    return q


def _record_key(q: Any, index: int, row: Mapping[str, Any]) -> str:
    return f"{q.selector_sql} #{index + 1}"


@dataclass(frozen=True)
class ValidContext:
    """One member of COE(D, V) (owner's view: utilities are private)."""

    context: dict[str, list[Any]]
    predicate: str
    utility: float


@dataclass(frozen=True)
class CoeResult:
    """The owner's exact enumeration of one record's valid contexts. NOT a private release."""

    record: dict[str, Any]
    verifier: str
    utility: str
    admissible: int
    size: int
    max_utility: float | None
    _space: Any = field(repr=False)
    _masks: Any = field(repr=False)
    _utilities: Any = field(repr=False)
    _cast: frozenset[str] = field(repr=False, default=frozenset())
    _not_null: frozenset[str] = field(repr=False, default=frozenset())

    def __iter__(self):
        from pcor_sql.engine.compile import context_predicate

        for mask, u in zip(self._masks, self._utilities):
            mask = int(mask)
            yield ValidContext(
                self._space.values(mask),
                context_predicate(self._space, mask, cast_varchar=self._cast, not_null=self._not_null),
                float(u),
            )

    def __len__(self) -> int:
        return self.size

    def best(self) -> ValidContext | None:
        """The valid context of largest utility (first in enumeration order among ties)."""
        if self.size == 0:
            return None
        import numpy as np
        from pcor_sql.engine.compile import context_predicate

        i = int(np.argmax(self._utilities))
        mask = int(self._masks[i])
        return ValidContext(
            self._space.values(mask),
            context_predicate(self._space, mask, cast_varchar=self._cast, not_null=self._not_null),
            float(self._utilities[i]),
        )


def coe(
    con: duckdb.DuckDBPyConnection,
    query: str,
    *,
    by: Sequence[str] | None = None,
    domains: Mapping[str, Sequence[Any]] | None = None,
    verifier: Any = "lof",
    verifier_options: Mapping[str, Any] | None = None,
    utility: str = "population",
    start: str | Mapping[str, Sequence[Any]] | None = None,
    max_contexts: int | None = DEFAULT_MAX_ADMISSIBLE,
    warn: Warn | None = None,
    progress: Callable[[int, int], None] | None = None,
    session: Session | None = None,
) -> tuple[CoeResult, ...]:
    """COE(D, V) for each selected record: every valid context with its utility (paper Alg. 1,
    lines 1–7). This is the data owner's exact tool: it is not differentially private, is not
    charged to the ledger, and must not be released."""
    from pcor_sql.engine.evaluator import Evaluator
    from pcor_sql.engine.release import prepare_space, resolve_start

    q = _record_query(con, query, utility)
    verifier_obj = make_verifier(verifier, verifier_options)
    session = session or Session(con, warn=warn)
    schema = session.schema(q.relation_sql, q.metric_sql[0], by=by, domains=domains)
    start_sel = session.start_selection(start, schema)
    rows = session.records(q.relation_sql, q.metric_sql[0], q.selector_sql)
    summary = session.summary(schema)
    out = []
    for row, v in rows:
        space = prepare_space(summary, row)
        ev = Evaluator(con, summary, space, v, verifier_obj)
        start_mask = None
        if utility == "overlap":
            start_mask, _ = resolve_start(ev, start_sel)
            ev = Evaluator(con, summary, space, v, verifier_obj, utility="overlap", start=start_mask)
        masks, utilities = ev.coe(max_contexts if max_contexts is not None else 1 << 64, progress)
        out.append(
            CoeResult(
                record=row,
                verifier=verifier_spec(verifier_obj),
                utility=utility,
                admissible=space.n_admissible,
                size=len(masks),
                max_utility=float(utilities.max()) if len(utilities) else None,
                _space=space,
                _masks=masks,
                _utilities=utilities,
                _cast=schema.cast_varchar,
                _not_null=schema.not_null,
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class AnomalyResult:
    """One private answer to "is this record a (β, r)-anomaly?" (DESIGN.md §3)."""

    record: dict[str, Any]
    anomaly: bool
    epsilon: float
    privacy: str
    k: int | None
    beta: float
    radius: float
    norm: str
    seeded: bool
    dataset: str
    owner: dict[str, Any] | None = field(default=None, repr=False)

    def as_dict(self, owner_view: bool | None = None) -> dict[str, Any]:
        """The stable JSON shape; owner fields only when the result carries them (owner_view)."""
        out: dict[str, Any] = {
            "record": self.record,
            "anomaly": self.anomaly,
            "epsilon": self.epsilon,
            "privacy": self.privacy,
            "k": self.k,
            "beta": self.beta,
            "radius": self.radius,
            "norm": self.norm,
            "seeded": self.seeded,
            "dataset": self.dataset,
        }
        if self.seeded:
            out["warning"] = "seeded run: reproducible, not for real releases"
        if self.owner is not None and owner_view is not False:
            out["owner"] = self.owner
        return out


def identify_anomaly(
    con: duckdb.DuckDBPyConnection,
    query: str,
    *,
    beta: float,
    radius: float,
    epsilon: float,
    privacy: str = "sp",
    k: int | None = 1,
    norm: str = "l2",
    seed: int | None = None,
    dataset: str | None = None,
    owner_view: bool = False,
    warn: Warn | None = None,
) -> tuple[AnomalyResult, ...]:
    """Private (β, r)-anomaly answers for the records `query` selects.

    `query` is `SELECT <col>[, <col> ...] FROM <relation> [WHERE <selector>]`; without WHERE
    every row is asked about. Distance: |a − b| on one column, the `norm` (l1, l2, linf) on
    several. `privacy="dp"` is the pareto-optimal ε-DP mechanism, `"sp"` the (ε, k)-sensitively
    private one (far more accurate on true anomalies). Each answer costs ε (sequential
    composition): the batch total is announced through `warn`, refused up front if it would
    pass the dataset's limit, and charged to the ledger before any answer is drawn.
    """
    from pcor_sql.anomaly.batch import prepare_anomaly_queries
    from pcor_sql.frontend.select import expand_star

    q = parse_select(con, query, multiple=True)
    if q.star:
        q = expand_star(con, q)
    columns = []
    for sql_text, name in zip(q.metric_sql, q.metric_names):
        if name is None:
            raise UserError(
                f"{sql_text} is an expression, not a column",
                "select plain numeric columns (make a view for computed ones)",
            )
        columns.append(name)
    ledger = Ledger(con, warn=warn)
    ledger.ensure_writable()
    batch = prepare_anomaly_queries(
        con, q.relation_sql, columns, q.selector_sql,
        beta=beta, radius=radius, epsilon=epsilon, privacy=privacy, k=k, norm=norm,
    )
    cost = batch.cost
    name = dataset or dataset_key(q.relation_sql)
    if warn is not None and batch.size > 1:
        warn(f"answering {batch.size:,} records costs {batch.size:,} × ε = {cost.epsilon_total:g} in total ({cost.guarantee})")
    ledger.precheck(name, cost.epsilon_total)
    mechanism = f"anomaly/{batch.params.privacy}" + (f"/k={batch.params.k}" if batch.params.privacy == "sp" else "")
    ledger.charge_many(
        name,
        [
            ChargeItem(new_release_id(), cost.epsilon_per_answer, mechanism, f"{q.selector_sql or 'all rows'} #{i + 1}", query)
            for i in range(batch.size)
        ],
    )
    source, seeded = make_source(seed)
    answers = batch.answer(source)
    out = []
    for a in answers:
        owner = None
        if owner_view:
            owner = {
                "not_for_release": True,
                "true_answer": a.true_answer,
                "ball_count": a.ball_count,
                "multiplicity": a.multiplicity,
                "lambda": a.lambda_,
                "flip_probability": a.flip_probability,
            }
        out.append(
            AnomalyResult(
                record=a.record,
                anomaly=a.anomaly,
                epsilon=a.epsilon,
                privacy=a.privacy,
                k=a.k,
                beta=batch.params.beta,
                radius=batch.params.radius,
                norm=batch.norm,
                seeded=seeded,
                dataset=name,
                owner=owner,
            )
        )
    return tuple(out)
