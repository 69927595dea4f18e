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
A refusal by the ledger names none of the owner's units, limits or spending: a quota or limit
that would be passed is one `BudgetExceeded` naming only the request's cost
(`pipeline.limit_reached`); `admit` refuses such a request early, without charging.

The analyst policy also holds (DESIGN.md §6): ε per request at least the owner's minimum
(`pipeline.analyst_policy(min_epsilon=...)`); keys only among the dataset's releasable keys,
frozen at registration (none declared: no key may be asked), refused with one message whether
or not the key exists; `identify_value` asks about a point of the metric space instead.
Every input must be plain data of exact type — str, int, float, bool, None, lists and dicts of
them — never a subclass or another object.

This handle is no security boundary against hostile code in the same process: code that holds
it can reach the owner's connection and the ledger (`vars()`, `gc`, monkeypatching). Serve
people who must not see the data through the analyst service (`pcor-sql serve`,
`pcor_sql.service`), which runs this same handle behind HTTP and accepts only JSON.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from pcor_sql import analyst_account, pipeline
from pcor_sql.errors import Refused, UserError
from pcor_sql.analyst_keys import RELEASABLE_PAGE, RequestCost, canonical, key_value, selector, shown
from pcor_sql.analyst_inputs import check_key_types, check_page, check_start, key_kind, keys_of, plain_data
from pcor_sql.analyst_statements import parse_analyst_statement
from pcor_sql.frontend.keyed import KeyedSelect
from pcor_sql.frontend.request_builders import verifier_spec
from pcor_sql.jobs import AnswerJob, PointAnswerJob, ReleaseJob
from pcor_sql.ledger.admission_memory import KEYS_SIZE
from pcor_sql.ledger.dataset_registry import (
    RegisteredDataset, all_releasable, get_dataset, list_datasets, releasable_page, releasable_set, releasable_text,
)
from pcor_sql.pipeline import failed
from pcor_sql.request_specs import Job, analyst_options, owner_options
from pcor_sql.request_values import AnomalyRequest, OutlierRequest
from pcor_sql.results import AnalystAnswer, AnalystExplanation, NotReleased
from pcor_sql.sqltext.build import over_context
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal
from pcor_sql_client.analyst_interface import PRICED, deprecated_value, priced

if TYPE_CHECKING:
    from pcor_sql.ledger.admission_memory import AdmissionMemory
    from pcor_sql.session import Session

#: What an analyst may set: generated from the option specs (`Who.ANALYST`), plus the handle's
#: own words (`metric`/`columns` pick among the registered ones; `verifier_options` merge).
EXPLAIN_ALLOWED = analyst_options(Job.EXPLAIN) | {"verifier_options", "metric"}
IDENTIFY_ALLOWED = analyst_options(Job.IDENTIFY) | {"columns"}
OWNER_ONLY = owner_options(Job.EXPLAIN) | owner_options(Job.IDENTIFY)


class Analyst:
    """A restricted handle made by `Owner.analyst()` (see the module docstring)."""

    def __init__(self, owner: Any, policy: pipeline.Policy | None = None, *, session: Session | None = None,
                 registry: Mapping[str, RegisteredDataset] | None = None, admission: AdmissionMemory | None = None):
        self._owner = owner
        # `session`: a Session of the owner's on its own cursor (the service: one per worker thread).
        self._session = session if session is not None else owner.session
        # `registry`: datasets the caller read for this one request (the service makes a handle per
        # request): a request reads its dataset's row once, not once per check.
        self._registry = dict(registry or {})
        # `admission`: the service's AdmissionMemory, which `admit` may answer from (it never refuses).
        self._admission = admission
        self._policy = policy or pipeline.analyst_policy()
        self._quote: pipeline.Quote | None = None
        #: None: requests run; "cost": only the part before the reservation; "admit": that and the limits.
        self._quoting: str | None = None

    # ---- statements ----------------------------------------------------------------------

    def sql(self, text: str) -> list[AnalystExplanation] | list[AnalystAnswer]:
        """Run one `EXPLAIN OUTLIER` or `IDENTIFY ANOMALY` statement (see the module docstring)."""
        parsed = parse_analyst_statement(self._session, text)
        if parsed.kind == "value":
            return [self._identify_value(parsed.dataset, parsed.point, parsed.options, statement=text)]
        assert parsed.keyed is not None
        if parsed.kind == "explain":
            return self._explain(parsed.keyed, parsed.options, statement=text)
        return self._identify(parsed.keyed, parsed.options, statement=text)

    # ---- calls ---------------------------------------------------------------------------

    def explain_outlier(self, dataset: str, key: Any, **options: Any) -> AnalystExplanation:
        """The private explanation of the record with `key` in registered `dataset`."""
        [result] = self.explain_outliers(dataset, [key], **options)
        return result

    def explain_outliers(self, dataset: str, keys: Sequence[Any], **options: Any
                         ) -> list[AnalystExplanation | NotReleased]:
        """One explanation per key, in the keys' order, each charged ε before any row is read.
        A key that cannot be released (missing, no valid context, ...) is a `NotReleased` in its
        place, with the one generic message (its ε stays charged); the others are released.
        One key alone raises RequestFailed instead."""
        plain_data(options, "an option")
        registered = self._dataset(dataset)
        metric = options.pop("metric", registered.metrics[0])
        return self._explain(KeyedSelect(registered.name, (metric,), registered.key, keys_of(keys)), options)

    def identify_anomaly(self, dataset: str, key: Any, **options: Any) -> AnalystAnswer:
        """The private anomaly answer for the record with `key` in registered `dataset`."""
        [result] = self.identify_anomalies(dataset, [key], **options)
        return result

    def identify_anomalies(self, dataset: str, keys: Sequence[Any], **options: Any) -> list[AnalystAnswer]:
        """One answer per key (among the releasable keys), in the keys' order, each charged ε."""
        plain_data(options, "an option")
        registered = self._dataset(dataset)
        columns = options.pop("columns", registered.metrics)
        columns = (columns,) if isinstance(columns, str) else tuple(columns)
        return self._identify(KeyedSelect(registered.name, columns, registered.key, keys_of(keys)), options)

    def identify_value(self, dataset: str, point: Mapping[str, float] | None = None, **options: Any) -> AnalystAnswer:
        """The private anomaly answer for a point of the metric space (`{"income": 50000}`: one
        number per metric column), in the data or not — the randomized bit of Construction 1,
        whose law covers absent points (x_i = 0), so asking reveals nothing by being answered."""
        return self._identify_value(dataset, deprecated_value(point, options), options)

    def _identify_value(self, dataset: str, value: Any, options: dict[str, Any], statement: str | None = None,
                        ) -> AnalystAnswer:
        registered = self._dataset(dataset)
        plain_data(options, "an option")
        plain_data(value, "value")
        if not isinstance(value, dict) or not value:
            raise UserError("value must map metric columns to numbers", f"e.g. {{{registered.metrics[0]!r}: 50000}}")
        for column, number in value.items():
            if column not in registered.metrics:
                raise UserError(f"{column!r} is not a metric of dataset {registered.name!r}",
                                f"its metrics: {', '.join(registered.metrics)}")
            if type(number) not in (int, float) or not math.isfinite(number):
                raise UserError(f"the value of {column} must be a finite number, got {number!r}", f"e.g. {column}: 50000")
        keyed = KeyedSelect(registered.name, tuple(value), registered.key, ())
        self._checked(keyed, options, IDENTIFY_ALLOWED - {"columns"}, by_key=False)
        request = AnomalyRequest(relation=registered.relation, columns=keyed.columns, statement=statement, **options)
        point = tuple((c, float(v)) for c, v in value.items())
        job = PointAnswerJob(request, registered.name, registered.units, point=point)
        answers = self._paid(job, [job.key_label()], lambda results: [
            AnalystAnswer.of(a, registered.name, dict(value), keyed.columns) for a in results])
        if self._quoting:
            return None  # type: ignore[return-value]  # `cost` reads the quote
        return answers[0]

    def releasable_keys(self, dataset: str, limit: int = 100, offset: int = 0) -> dict[str, Any]:
        """One page of the keys the owner declared releasable for `dataset` (public by that
        declaration, DESIGN.md §6: read from the registry, never the data), in their frozen
        order, as JSON values of the key column's kind: {dataset, total, offset, keys}; total is
        None (and keys empty) when the owner declared none."""
        for name, value, low in (("limit", limit, 1), ("offset", offset, 0)):
            if type(value) is not int or value < low:
                raise UserError(f"{name} must be a whole number ≥ {low}, got {value!r}", f"pass e.g. {name}={low}")
        registered = self._dataset(dataset)
        found = releasable_page(self._session.ledger(), registered.name, offset, min(limit, RELEASABLE_PAGE))
        if found is None:
            return {"dataset": registered.name, "total": None, "offset": offset, "keys": []}
        total, texts = found
        kind = self._key_kind(registered)
        keys = [key_value(t, kind) for t in texts]
        return {"dataset": registered.name, "total": total, "offset": offset, "keys": keys}

    # ---- what may be asked (the service's GET endpoints read the same: `analyst_account`) -----

    def datasets(self) -> list[dict[str, Any]]:
        """The registered datasets this analyst may use (see `AnalystInterface.datasets`)."""
        ledger = self._session.ledger()
        allowed = analyst_account.allowed_datasets(ledger, self._policy.analyst)
        return analyst_account.dataset_rows(d for d in list_datasets(ledger) if allowed is None or d.name in allowed)

    def me(self) -> dict[str, Any]:
        """This analyst's name, datasets, bounds and usage (see `AnalystInterface.me`); in-process
        no bound on the keys per request (None)."""
        ledger, policy = self._session.ledger(), self._policy
        return analyst_account.me(ledger, policy.analyst, analyst_account.allowed_datasets(ledger, policy.analyst),
                                  min_epsilon=policy.min_epsilon, max_keys=None, max_work=policy.max_work)

    def history(self, limit: int | None = None, before: str | None = None) -> list[dict[str, Any]]:
        """This analyst's own requests (see `AnalystInterface.history`)."""
        check_page(limit=limit, before=before)
        return analyst_account.history(self._session.ledger(), self._policy.analyst, limit, before)

    def cost(self, method: str, dataset: str, target: Any, **options: Any) -> "RequestCost":
        """What `getattr(self, method)(dataset, target, **options)` would charge, without charging
        or reading a row: the same checks, then the cost the pipeline would reserve (data
        independent). `method`: one of `analyst_interface.PRICED`."""
        return self._preview("cost", *priced(method, dataset, target), options)

    def admit(self, method: str, *args: Any, **options: Any) -> "RequestCost":
        """An early refusal, cheaply: the request's checks (as `cost`, without resolving units from
        the catalog), then BudgetExceeded if its cost would pass the dataset's limits or the
        analyst's quota now (`pipeline.admit`) — nothing charged, no row read. Passing reserves
        nothing: the request itself checks everything again. `method`: explain_outliers,
        identify_anomalies, identify_value (then `args` is dataset and target) or sql (the text)."""
        return self._preview("admit", method, args, options)

    def _preview(self, mode: str, method: str, args: tuple[Any, ...], options: dict[str, Any]) -> "RequestCost":
        if method not in ("explain_outliers", "identify_anomalies", "identify_value", "sql"):
            raise UserError(f"no cost preview for {method!r}", f"use one of: {', '.join(PRICED)}")
        twin = Analyst(self._owner, self._policy, session=self._session, registry=self._registry,
                       admission=self._admission if mode == "admit" else None)
        twin._quoting = mode
        getattr(twin, method)(*args, **options)
        quote = twin._quote
        if quote is None or not quote.items:
            raise failed()
        first = quote.items[0]
        return RequestCost(first.notion, first.epsilon, getattr(first.cost, "k", None), len(quote.items),
                           sum(item.epsilon for item in quote.items))

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
            check_start(options["start"], by, frozen)
        request = OutlierRequest(
            relation=registered.relation, metric=quote_identifier(metric), selector=selector(keyed),
            select_list=quote_identifier(metric), statement=statement, by=by,
            domains=tuple((b, frozen[b]) for b in by if b not in binned),
            bins=tuple((b, binned[b]) for b in by if b in binned) or None, **options,
        )
        session.verifier(request.verifier)  # an unknown verifier is the request's fault: before the charge
        one = quote_identifier(keyed.key_column)
        job = ReleaseJob(request, registered.name, registered.units,
                         keyed=tuple((key, f"{one} = {quote_literal(key)}") for key in keyed.keys))
        return self._run(job, keyed, lambda key, e: AnalystExplanation(
            dataset=registered.name, key=key, metric=metric, context=e.context, predicate=e.predicate,
            explanation_sql=over_context(quote_identifier(metric), registered.name, e.predicate),
            epsilon=e.epsilon, epsilon1=e.epsilon1, accounting=e.accounting, search=e.search,
            samples=e.samples, verifier=e.verifier, utility=e.utility, full_attributes=e.full_attributes,
            ranges=e.ranges,
        ))

    def _identify(self, keyed: KeyedSelect, options: dict[str, Any], statement: str | None = None,
                  ) -> list[AnalystAnswer]:
        registered = self._checked(keyed, options, IDENTIFY_ALLOWED)
        outside = [c for c in keyed.columns if c not in registered.metrics]
        if outside:
            raise UserError(f"{outside[0]!r} is not a metric of dataset {registered.name!r}",
                            f"its metrics: {', '.join(registered.metrics)}")
        request = AnomalyRequest(relation=registered.relation, columns=keyed.columns, selector=selector(keyed),
                                 statement=statement, **options)
        return self._run(AnswerJob(request, registered.name, registered.units), keyed, lambda key, a: AnalystAnswer.of(
            a, registered.name, key, keyed.columns))

    def _run(self, job: ReleaseJob | AnswerJob, keyed: KeyedSelect, make: Callable[[Any, Any], Any]) -> list[Any]:
        """The pipeline under the analyst policy; `make(key, result)` for each key, in the order the
        analyst gave them — never in an order the rows or the storage decide. The pairing and the
        making run inside the charged part, so a failure there is recorded as failed, never as
        answered (the history says what the analyst was told)."""
        registered = self._dataset(keyed.dataset)

        def shape(results: list) -> list[Any]:
            if getattr(job, "keyed", ()):  # read key by key: the results are in the keys' order
                return [make(key, r) if r.released else replace(r, key=key) for key, r in zip(keyed.keys, results)]
            try:
                by_key = {canonical(r.record[registered.key]): r for r in results}
                return [make(key, by_key[canonical(key)]) for key in keyed.keys]
            except (KeyError, TypeError):
                raise failed() from None

        return self._paid(job, [shown(k) for k in keyed.keys], shape)

    def _paid(self, job: pipeline.Measurement, keys: list[str], shape: Callable[[list], Any] | None = None) -> Any:
        """The pipeline under the analyst policy — or, for `cost`, only its part before the
        reservation (then nothing is charged and no result exists)."""
        if self._quoting == "admit":
            items = pipeline.admit(self._session, job, self._policy, keys=keys, memory=self._admission)
            self._quote = pipeline.Quote(tuple(job.extra_units), items)
            return []
        if self._quoting:
            self._quote = pipeline.quote(self._session, job, self._policy, keys=keys)
            return []
        return pipeline.run(self._session, job, self._policy, keys=keys, shape=shape)

    # ---- checks that read only the request and the registry ------------------------------

    def _dataset(self, name: Any) -> RegisteredDataset:
        plain_data(name, "the dataset name")
        known = self._registry.get(name) if isinstance(name, str) else None
        return known if known is not None else get_dataset(self._session.ledger(), name)

    def _key_kind(self, registered: RegisteredDataset) -> str:
        """The JSON kind a key of `registered` must have, from its key column's type in the
        catalog (never a row): cached on the Session, since a type is the same for every asker."""
        cache = self._session.__dict__.setdefault("_key_kinds", {})
        found = cache.get((registered.relation, registered.key))
        if found is None:
            described, _ = self._session.access.describe(registered.relation, quote_identifier(registered.metrics[0]))
            types = {c: t for c, t, _ in described[0]}
            found = cache[(registered.relation, registered.key)] = key_kind(str(types.get(registered.key, "")))
        return found

    def _checked(self, keyed: KeyedSelect, options: dict[str, Any], allowed: frozenset[str], *,
                 by_key: bool = True) -> RegisteredDataset:
        plain_data(list(keyed.columns), "a column")
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
        if not by_key:
            return registered
        if not keyed.keys:
            raise UserError("no key given", f"pick records by {registered.key}")
        if registered.releasable is None:
            raise Refused(f"dataset {registered.name!r} has no releasable keys: its owner declared none, so no "
                          "request may name a key", "ask the data owner to declare releasable keys (pcor-sql dataset "
                          "add ... --releasable-keys), or ask IDENTIFY ANOMALY about a value")
        check_key_types(keyed.keys, registered, self._key_kind(registered))
        if not self._releasable(registered, keyed.keys):
            # One message, whether or not the key exists: the set is public, the data is not read.
            raise Refused(f"a key asked about is not among the releasable keys of dataset {registered.name!r}",
                          "ask about the keys the data owner declared releasable")
        return registered

    def _releasable(self, registered: RegisteredDataset, keys: list[Any]) -> bool:
        ledger, name = self._session.ledger(), registered.name
        if self._admission is None or (registered.releasable or 0) > KEYS_SIZE:
            return all_releasable(ledger, name, keys)
        return self._admission.releasable(self._policy.analyst or "", name, [releasable_text(k) for k in keys],
                                          lambda: releasable_set(ledger, name))

