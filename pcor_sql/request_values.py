"""Requests: one frozen value per job, holding everything a release or an answer needs.

CLI flags, the `EXPLAIN OUTLIER` / `IDENTIFY ANOMALY` statements and Python keywords each
*build* a request (`pcor_sql.frontend.request_builders`); a `Session` runs it. A request is validated
once, here, at construction: a request that exists is well formed, so nothing downstream
re-checks its options, and a new option is one field here plus its one consumer.

Requests hold parsed values only — SQL pieces DuckDB's parser rendered (relation, metric,
selector), attribute names, literal values — never text still to be parsed; so building one
needs no database and the engine never imports the front end.

The field metadata (`help`, `example`, and for statement options `kind`, `choices`,
`minimum`) is the one place an option is described: the statement's `WITH (...)` list and the
CLI help read it.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Sequence, Union, cast

from pcor_sql.anomaly.mechanisms import AnomalyParams, validate_params
from pcor_sql.core.accounting import Budget, derive_budget, validate_epsilon, validate_samples
from pcor_sql.core.option_spec import Kind, OptionSpec, fold_word
from pcor_sql.core.search_specs import search_option_specs, search_spec
from pcor_sql.core.bins import Bins, declared_bins
from pcor_sql.core.verifiers.base import Verifier
from pcor_sql.errors import UserError
from pcor_sql.core.choices import Privacy
from pcor_sql.request_specs import (
    ACCOUNTING, BINS, BY, DATASET, DOMAINS, EPSILON_ANSWER, EPSILON_RELEASE, MONOTONE_UTILITIES, NORM, OWNER_VIEW, PRIVACY,
    SEARCH, SEED, START, UTILITY, VERIFIER, BETA, RADIUS, K, explain_specs, identify_specs,
)

Selection = tuple[tuple[str, tuple[Any, ...]], ...]


def option(spec: OptionSpec, default: Any = ...) -> Any:
    """A request field described by its spec (the one place an option is described)."""
    return field(default=spec.default if default is ... else default, metadata={"spec": spec})


@dataclass(frozen=True)
class VerifierSpec:
    """A verifier by name with its options, e.g. `lof(k=20)`. The session's verifier registry
    resolves the name and checks the options (a custom verifier is known only there)."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise UserError(f"invalid verifier {self.name!r}", "name one, e.g. 'lof' or 'grubbs'")
        # Names in any ASCII case, as every fixed-value option (`core.option_spec.fold_word`).
        object.__setattr__(self, "name", fold_word(self.name.strip()))
        object.__setattr__(self, "options", tuple((fold_word(str(k)), v) for k, v in dict(self.options).items()))

    def options_dict(self) -> dict[str, Any]:
        return dict(self.options)


#: A request's verifier: a spec the session's registry resolves, or a trusted verifier object of
#: the owner's, used as it is (DESIGN.md §2 "Verifiers").
VerifierChoice = Union[VerifierSpec, Verifier]


@dataclass(frozen=True, init=False)
class OutlierRequest:
    """Release, under ε-OCDP, a context in which each record the selector picks is an outlier.

    `relation`, `metric`, `selector` and `select_list` are SQL rendered by DuckDB's parser
    (`SELECT <select_list> FROM <relation> WHERE <selector>`); `statement` is the text the
    request came from (kept in the ledger history). `verifier` is a `VerifierSpec` or a
    verifier object (a trusted object of the data owner's). The options are keywords: the
    request-wide ones are fields, the searches' own (`core.searches`, e.g. `descents`) are kept
    in `search_settings` and read as attributes (`request.descents`)."""

    relation: str
    metric: str
    selector: str
    select_list: str = ""
    statement: str | None = None
    by: tuple[str, ...] | None = option(BY)
    domains: Selection | None = option(DOMAINS)
    bins: tuple[tuple[str, Bins], ...] | None = option(BINS)
    verifier: VerifierChoice = option(VERIFIER, VerifierSpec("lof"))
    epsilon: float = option(EPSILON_RELEASE)
    search: str = option(SEARCH)
    samples: int | None = option(search_option_specs()["samples"])
    utility: str = option(UTILITY)
    start: Selection | None = option(START)
    accounting: str = option(ACCOUNTING)
    seed: int | None = option(SEED)
    dataset: str | None = option(DATASET)
    owner_view: bool = option(OWNER_VIEW)
    #: The searches' own options given (name → value, validated by their specs).
    search_settings: tuple[tuple[str, Any], ...] = ()

    def __init__(self, relation: str, metric: str, selector: str, select_list: str = "", statement: str | None = None,
                 *, search_settings: Any = (), **options: Any):
        known = explain_specs()
        unknown = [name for name in options if name not in known]
        if unknown:
            raise UserError(f"unknown option {unknown[0]!r} for OutlierRequest", f"known options: {', '.join(known)}")
        own = {f.name for f in fields(self)}
        settings = dict(search_settings)
        for name, value in options.items():
            if name not in own:
                settings[name] = value
        for f in fields(self):
            if f.name in ("relation", "metric", "selector", "select_list", "statement"):
                continue
            _set(self, f.name, options.get(f.name, f.default) if f.name != "search_settings" else settings)
        for name, value in (("relation", relation), ("metric", metric), ("selector", selector),
                            ("select_list", select_list), ("statement", statement)):
            _set(self, name, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        for name in ("relation", "metric", "selector"):
            _require_text(getattr(self, name), name)
        _set(self, "select_list", self.select_list or self.metric)
        _set(self, "by", _names(self.by, "by"))
        bins, domains = declared_bins(self.bins, self.domains)  # DOMAIN (age BINS (...)) joins the bins
        _set(self, "bins", bins)
        _set(self, "domains", _selection(domains, "domains"))
        _set(self, "start", _selection(self.start, "start"))
        _set(self, "verifier", _verifier(self.verifier))
        # Each fixed-value option parsed once, by its spec, into its canonical value (DESIGN.md §6).
        _set(self, "utility", UTILITY.check(self.utility))
        _set(self, "accounting", ACCOUNTING.check(self.accounting))
        spec = search_spec(SEARCH.check(self.search))
        _set(self, "search", spec.name)
        # Left out, n is the search's own; remembered so that `replace(search=...)` gives the
        # new search its own n rather than the old one's.
        object.__setattr__(self, "_samples_given", self.samples is not None)
        _set(self, "samples", validate_samples(spec.default_samples if self.samples is None else self.samples))
        specs = search_option_specs()
        checked = {name: specs[name].check(value) for name, value in dict(self.search_settings).items()}
        _set(self, "search_settings", tuple(sorted(checked.items())))
        _set(self, "epsilon", validate_epsilon(self.epsilon))
        _common(self)
        self.budget  # noqa: B018 — the accounting rule and utility must agree now, not at release

    def __getattr__(self, name: str) -> Any:
        # A search's own option (`request.descents`): the value given, else its default — and
        # 0/None for a search that does not read it, so outputs show what the search used.
        specs = search_option_specs()
        if name in specs and name != "samples":
            return self.search_options().get(name, None if specs[name].nullable else 0)
        raise AttributeError(name)

    @property
    def budget(self) -> Budget:
        """ε split into ε1 by the search's declared privacy map under the accounting rule."""
        return derive_budget(
            self.epsilon, self.search, self.samples, self.accounting, monotone=self.utility in MONOTONE_UTILITIES
        )

    def search_options(self) -> dict[str, Any]:
        """The options the chosen search declares it reads, by name, with their defaults."""
        given = dict(self.search_settings)
        options = search_spec(self.search).options
        return {o.name: (self.samples if o.name == "samples" else given.get(o.name, o.default)) for o in options}

    def setting(self, name: str) -> Any:
        """A search option as given, else its declared default, whichever search reads it
        (`coe` reads `max_contexts` whatever the search)."""
        return dict(self.search_settings).get(name, search_option_specs()[name].default)

    def replace(self, **changes: Any) -> "OutlierRequest":
        """A copy with some fields changed (validated again). A request whose n was left to
        its search keeps it so: a new search gets its own default n."""
        if "samples" not in changes and not getattr(self, "_samples_given", True):
            changes["samples"] = None
        current = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "search_settings"}
        settings = dict(self.search_settings)
        for name in list(changes):
            if name in search_option_specs() and name != "samples":
                settings[name] = changes.pop(name)
        return OutlierRequest(**{**current, **changes}, search_settings=settings)


@dataclass(frozen=True)
class AnomalyRequest:
    """Answer, with a private randomized bit, whether each selected record is a (β, r)-anomaly.

    `columns` are plain numeric columns of `relation` (distance |a − b| for one, the `norm`
    for several); `selector` None asks about every row."""

    relation: str
    columns: tuple[str, ...]
    selector: str | None = None
    statement: str | None = None
    beta: float = option(BETA)
    radius: float = option(RADIUS)
    epsilon: float = option(EPSILON_ANSWER)
    privacy: str = option(PRIVACY)
    k: int | None = option(K)
    norm: str = option(NORM)
    seed: int | None = option(SEED)
    dataset: str | None = option(DATASET)
    owner_view: bool = option(OWNER_VIEW)

    def __post_init__(self) -> None:
        _require_text(self.relation, "relation")
        _set(self, "columns", _names(self.columns, "columns"))
        if not self.columns:
            raise UserError("no column to measure distances on", "select one or more numeric columns")
        if self.selector is not None:
            _require_text(self.selector, "selector")
        # Parsed once, by their specs (DESIGN.md §6): `privacy` becomes the mechanism's own
        # `Privacy`, and the mechanism object is kept, so the notion charged is the one that runs.
        params = validate_params(self.beta, self.radius, self.epsilon, PRIVACY.check(self.privacy), self.k)
        _set(self, "privacy", params.privacy)
        _set(self, "norm", NORM.check(self.norm))
        _set(self, "k", params.k if params.privacy is Privacy.SP else self.k)
        _common(self)
        object.__setattr__(self, "_mechanism", params)

    @property
    def mechanism(self) -> AnomalyParams:
        """The anomaly mechanism that answers this request: its λ, its notion and the cost of one
        answer (`AnomalyParams.answer_cost`) — what the reservation charges and the read runs."""
        return self._mechanism  # type: ignore[attr-defined]

    def replace(self, **changes: Any) -> "AnomalyRequest":
        return dataclasses.replace(self, **changes)


def request_options(cls: type) -> dict[str, OptionSpec]:
    """The options a caller sets by name on a request class (all but the parsed SQL)."""
    return explain_specs() if cls is OutlierRequest else identify_specs()


def _set(request: Any, name: str, value: Any) -> None:
    object.__setattr__(request, name, value)


def _common(request: Any) -> None:
    if request.seed is not None:
        _set(request, "seed", _count(request.seed, "seed", "seed=7"))
    # Every numeric option's declared bounds (DESIGN.md §8 "Bounded work"), whoever built the request.
    for f in fields(request):
        spec = f.metadata.get("spec")
        value = getattr(request, f.name)
        if spec is not None and spec.kind in (Kind.NUMBER, Kind.INTEGER) and value is not None:
            spec.bounded(value, f"e.g. {spec.hint()}")
    if request.dataset is not None:
        _require_text(request.dataset, "dataset")
    if not isinstance(request.owner_view, bool):
        raise UserError(f"owner_view must be True or False, got {request.owner_view!r}", "pass owner_view=True")


def _require_text(value: Any, name: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"the request's {name} must be non-empty text, got {value!r}", f"give the {name} as a string")
    if "\x00" in value:
        raise UserError(f"the request's {name} contains a NUL character", "remove it")


def _count(value: Any, name: str, example: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise UserError(f"{name} must be an integer ≥ {minimum}, got {value!r}", f"pass e.g. {example}")
    return int(value)


def _names(value: Any, name: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        # "region,product" is two names, as on the command line (never ten characters); names
        # holding commas or quotes are written as a list (or parsed by frontend.compact.parse_by).
        if '"' in value or "`" in value:
            raise UserError(f"{name} {value!r} quotes a name in text", f"pass a list: {name}=['job, title', 'year']")
        value = [part.strip() for part in value.split(",")]
    elif not isinstance(value, Sequence):
        raise UserError(f"{name} must be a list of names, got {value!r}", f"pass e.g. {name}=['job_title', 'year']")
    names = tuple(value)
    for n in names:
        _require_text(n, f"{name} entry")
    if len(set(names)) != len(names):
        raise UserError(f"{name} names an attribute twice", "name each once")
    return names


def _selection(value: Any, name: str) -> Selection | None:
    """attribute → values as a hashable, ordered tuple of pairs."""
    if value is None:
        return None
    items = value.items() if isinstance(value, Mapping) else value
    out = []
    try:
        for attr, values in items:
            _require_text(attr, f"{name} attribute")
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
                raise UserError(f"{name}[{attr!r}] must be a list of values, got {values!r}", "pass e.g. ['a', 'b']")
            out.append((attr, tuple(values)))
    except (TypeError, ValueError):
        raise UserError(f"{name} must map attribute names to lists of values", "pass e.g. {'year': [2019]}") from None
    return tuple(out)


def _verifier(value: object) -> VerifierChoice:
    if isinstance(value, VerifierSpec):
        return value
    if isinstance(value, str):
        if "(" in value:
            raise UserError(
                f"verifier {value!r} carries options in its text",
                "parse it with pcor_sql.frontend.request_builders (or pass VerifierSpec(name, options))",
            )
        return VerifierSpec(value)
    if hasattr(value, "check") or hasattr(value, "needs_sql"):
        # The owner's trusted object, used as it is: what it lacks of the protocol the engine
        # reads as an older verifier's (`core.verifiers.capabilities.capabilities_of`).
        return cast(Verifier, value)
    raise UserError(f"invalid verifier {value!r}", "pass a name such as 'lof' or a verifier object")
