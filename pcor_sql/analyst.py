"""The analyst's handle (DESIGN.md §6): private outputs only, paid for before any row is read.

    analyst = owner.analyst()
    analyst.sql("EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 WITH (epsilon = 0.2)")
    analyst.explain_outlier("salaries", 42, epsilon=0.2)
    analyst.identify_anomaly("salaries", 42, beta=5, radius=1000, epsilon=0.5)

What an analyst may send: `EXPLAIN OUTLIER` and `IDENTIFY ANOMALY` over a registered dataset,
picking records by key equality (`WHERE id = 42`, `WHERE id IN (42, 43)`), with the options
that shape the mechanism (ε, verifier, search, samples, utility, start, BY among the
registered attributes, accounting unless the owner fixed it, β, r, k, norm, privacy).
Refused: ordinary SQL, owner options (owner_view, seed, dataset, domains, bins, max_contexts).

Reserve, then read. Everything checked before the reservation depends only on the request and
the registry. Then the cost (ε per key) is charged to the dataset's units; only after that is
any row read. From there every failure — a key that is missing or not unique, a NULL metric,
a conversion error, no valid context, an internal error — raises the same `RequestFailed`,
whose text depends on nothing in the data, and the charge stands. What comes back is the key,
the context (its predicate and SQL) and the privacy parameters: no other column, no counts.
"""

from __future__ import annotations

from typing import Any, Sequence

from pcor_sql import pipeline
from pcor_sql.errors import Refused, UserError
from pcor_sql.frontend.keyed import KeyedSelect, parse_keyed_select
from pcor_sql.frontend.request_builders import verifier_spec
from pcor_sql.frontend.statement_parser import ExplainOutlier, IdentifyAnomaly, parse_statement
from pcor_sql.jobs import AnswerJob, ReleaseJob
from pcor_sql.ledger.dataset_registry import RegisteredDataset, get_dataset
from pcor_sql.pipeline import failed
from pcor_sql.request_specs import Job, analyst_options, owner_options
from pcor_sql.requests import AnomalyRequest, OutlierRequest
from pcor_sql.results import AnalystAnswer, AnalystExplanation
from pcor_sql.sqltext.build import over_context
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal

#: What an analyst may set: generated from the option specs (`Who.ANALYST`), plus the handle's
#: own words (`metric`/`columns` pick among the registered ones; `verifier_options` merge).
EXPLAIN_ALLOWED = analyst_options(Job.EXPLAIN) | {"verifier_options", "metric"}
IDENTIFY_ALLOWED = analyst_options(Job.IDENTIFY) | {"columns"}
OWNER_ONLY = owner_options(Job.EXPLAIN) | owner_options(Job.IDENTIFY)


class Analyst:
    """A restricted handle made by `Owner.analyst()` (see the module docstring)."""

    def __init__(self, owner: Any, policy: pipeline.Policy | None = None):
        self._owner = owner
        self._session = owner.session
        self._policy = policy or pipeline.analyst_policy()

    # ---- statements ----------------------------------------------------------------------

    def sql(self, text: str) -> list[AnalystExplanation] | list[AnalystAnswer]:
        """Run one `EXPLAIN OUTLIER` or `IDENTIFY ANOMALY` statement (see the module docstring)."""
        con = self._session.access.parser  # parses only: the rows are read through the access
        statement = parse_statement(con, text)
        if isinstance(statement, ExplainOutlier):
            keyed = parse_keyed_select(con, statement.query.original)
            options: dict[str, Any] = dict(statement.options())
            if statement.by is not None:
                options["by"] = statement.by
            if statement.domains is not None:  # a DOMAIN clause: the registration fixed them
                raise Refused("the data owner declares the domains (a DOMAIN clause is the owner's)",
                              "drop the DOMAIN clause")
            if statement.verifier is not None:
                options["verifier"] = statement.verifier
            if len(keyed.columns) != 1:
                raise UserError("EXPLAIN OUTLIER explains one metric", "select one metric column")
            return self._explain(keyed, options, statement=text)
        if isinstance(statement, IdentifyAnomaly):
            keyed = parse_keyed_select(con, statement.query.original, multiple=True)
            return self._identify(keyed, dict(statement.options()), statement=text)
        raise Refused("an analyst may run only EXPLAIN OUTLIER and IDENTIFY ANOMALY statements",
                      "ask the data owner for anything else")

    # ---- calls ---------------------------------------------------------------------------

    def explain_outlier(self, dataset: str, key: Any, **options: Any) -> AnalystExplanation:
        """The private explanation of the record with `key` in registered `dataset`."""
        [result] = self.explain_outliers(dataset, [key], **options)
        return result

    def explain_outliers(self, dataset: str, keys: Sequence[Any], **options: Any) -> list[AnalystExplanation]:
        """One explanation per key, each charged ε; all or nothing."""
        registered = self._dataset(dataset)
        metric = options.pop("metric", registered.metrics[0])
        return self._explain(KeyedSelect(registered.name, (metric,), registered.key, _keys(keys)), options)

    def identify_anomaly(self, dataset: str, key: Any, **options: Any) -> AnalystAnswer:
        """The private anomaly answer for the record with `key` in registered `dataset`."""
        [result] = self.identify_anomalies(dataset, [key], **options)
        return result

    def identify_anomalies(self, dataset: str, keys: Sequence[Any], **options: Any) -> list[AnalystAnswer]:
        registered = self._dataset(dataset)
        columns = options.pop("columns", registered.metrics)
        columns = (columns,) if isinstance(columns, str) else tuple(columns)
        return self._identify(KeyedSelect(registered.name, columns, registered.key, _keys(keys)), options)

    # ---- the reserved path ---------------------------------------------------------------

    def _explain(self, keyed: KeyedSelect, options: dict[str, Any], statement: str | None = None,
                 ) -> list[AnalystExplanation]:
        session = self._session
        registered = self._checked(keyed, options, EXPLAIN_ALLOWED)
        [metric] = keyed.columns
        if metric not in registered.metrics:
            raise UserError(f"{metric!r} is not a metric of dataset {registered.name!r}",
                            f"its metrics: {', '.join(registered.metrics)}")
        if "accounting" in options and registered.accounting is not None:
            raise Refused("the data owner fixed this dataset's accounting", "drop the accounting option")
        by = options.pop("by", registered.attributes)
        by = tuple(b.strip() for b in by.split(",")) if isinstance(by, str) else tuple(by)
        unknown = [b for b in by if b not in registered.attributes]
        if unknown or not by:
            raise UserError(f"BY may name only the dataset's attributes, not {unknown[:1] or 'nothing'}",
                            f"its attributes: {', '.join(registered.attributes)}")
        if "verifier" in options or "verifier_options" in options:
            options["verifier"] = verifier_spec(options.get("verifier", "lof"), options.pop("verifier_options", None))
        if isinstance(options.get("start"), str):
            from pcor_sql.frontend.start_predicate import parse_start_predicate

            options["start"] = parse_start_predicate(session.access.parser, options["start"], None)
        if registered.accounting is not None:
            options["accounting"] = registered.accounting
        frozen, binned = dict(registered.domains), dict(registered.bins)
        if options.get("start") is not None:
            _check_start(options["start"], by, frozen)
        request = OutlierRequest(
            relation=registered.relation, metric=quote_identifier(metric), selector=_selector(keyed),
            select_list=quote_identifier(metric), statement=statement, by=by,
            domains=tuple((b, frozen[b]) for b in by if b not in binned),
            bins=tuple((b, binned[b]) for b in by if b in binned) or None, **options,
        )
        session.verifier(request.verifier)  # an unknown verifier is the request's fault: before the charge
        results = self._run(ReleaseJob(request, registered.name, registered.units), keyed)
        return [
            AnalystExplanation(
                dataset=registered.name, key=key, metric=metric, context=e.context, predicate=e.predicate,
                explanation_sql=over_context(quote_identifier(metric), registered.name, e.predicate),
                epsilon=e.epsilon, epsilon1=e.epsilon1, accounting=e.accounting, search=e.search,
                samples=e.samples, verifier=e.verifier, utility=e.utility, full_attributes=e.full_attributes,
            )
            for key, e in results
        ]

    def _identify(self, keyed: KeyedSelect, options: dict[str, Any], statement: str | None = None,
                  ) -> list[AnalystAnswer]:
        registered = self._checked(keyed, options, IDENTIFY_ALLOWED)
        outside = [c for c in keyed.columns if c not in registered.metrics]
        if outside:
            raise UserError(f"{outside[0]!r} is not a metric of dataset {registered.name!r}",
                            f"its metrics: {', '.join(registered.metrics)}")
        request = AnomalyRequest(relation=registered.relation, columns=keyed.columns, selector=_selector(keyed),
                                 statement=statement, **options)
        results = self._run(AnswerJob(request, registered.name, registered.units), keyed)
        return [
            AnalystAnswer(
                dataset=registered.name, key=key, columns=keyed.columns, anomaly=a.anomaly,
                epsilon=a.epsilon, privacy=a.privacy, k=a.k, beta=a.beta, radius=a.radius, norm=a.norm,
            )
            for key, a in results
        ]

    def _run(self, job: Any, keyed: KeyedSelect) -> list[tuple[Any, Any]]:
        """The pipeline under the analyst policy; results paired with the keys in the order the
        analyst gave them — never in an order the rows or the storage decide."""
        registered = self._dataset(keyed.dataset)
        results = pipeline.run(self._session, job, self._policy, keys=[_shown(k) for k in keyed.keys])
        try:
            by_key = {_canonical(r.record[registered.key]): r for r in results}
            return [(key, by_key[_canonical(key)]) for key in keyed.keys]
        except (KeyError, TypeError):
            raise failed() from None

    # ---- checks that read only the request and the registry ------------------------------

    def _dataset(self, name: Any) -> RegisteredDataset:
        return get_dataset(self._session.ledger(), name)

    def _checked(self, keyed: KeyedSelect, options: dict[str, Any], allowed: frozenset[str]) -> RegisteredDataset:
        owner_only = sorted(set(options) & OWNER_ONLY)
        if owner_only:
            raise Refused(f"{owner_only[0]} is the data owner's option", f"drop {owner_only[0]}")
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise UserError(f"unknown option {unknown[0]!r}", f"options an analyst may set: {', '.join(sorted(allowed))}")
        registered = self._dataset(keyed.dataset)
        if keyed.key_column != registered.key:
            raise UserError(f"records of {registered.name!r} are picked by {registered.key!r}, not {keyed.key_column!r}",
                            f"e.g. WHERE {registered.key} = 42")
        if not keyed.keys:
            raise UserError("no key given", f"pick records by {registered.key}")
        return registered


def _check_start(start: Any, by: Sequence[str], frozen: dict[str, Sequence[str]]) -> None:
    """A start's attributes and values against the domains frozen at registration — data
    independent, so a typo is refused before the reservation; only whether the start holds the
    record and is valid for it (data) is left to the charged part."""
    from pcor_sql.core.space import domain_indices, resolve_selection

    if not hasattr(start, "items"):
        raise UserError("start must map attributes to lists of values", "e.g. start={'dept': ['a', 'b']}")
    for name, values in resolve_selection(start, by, "start").items():
        if isinstance(values, (str, bytes)) or not values:
            raise UserError(f"start needs a list of values for {name!r}", f"e.g. start={{{name!r}: [...]}}")
        domain_indices(name, frozen[name], values, "registered", f"its values: {', '.join(frozen[name])}")


def _keys(keys: Any) -> tuple[Any, ...]:
    if isinstance(keys, (str, bytes)) or not isinstance(keys, (list, tuple)):
        raise UserError("keys must be a list of key values", "e.g. [42, 43]")
    out: list[Any] = []
    for key in keys:
        if isinstance(key, bool) or not isinstance(key, (int, float, str)):
            raise UserError(f"a key must be a number or a string, got {type(key).__name__}", "pass e.g. 42 or 'a17'")
        if key not in out:
            out.append(key)
    return tuple(out)


def _selector(keyed: KeyedSelect) -> str:
    column = quote_identifier(keyed.key_column)
    return f"{column} IN ({', '.join(quote_literal(k) for k in keyed.keys)})"


def _shown(key: Any) -> str:
    return f"key = {key!r}"


def _canonical(key: Any) -> Any:
    """A key as a comparable value: DuckDB returns 42 for an INTEGER key given as 42 or 42.0."""
    if isinstance(key, bool):
        return key
    if isinstance(key, (int, float)):
        return float(key)
    return str(key)
