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
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pcor_sql.core.bins import Bins, declared_bins
from pcor_sql.core.accounting import ACCOUNTINGS, Budget, derive_budget, validate_epsilon, validate_samples
from pcor_sql.anomaly.mechanisms import NORMS, PRIVACY_MODES, validate_norm, validate_params
from pcor_sql.core.searches import (
    DEFAULT_EXPLORE_CHECKS, DEFAULT_EXPLORE_SAMPLES, DEFAULT_MAX_ADMISSIBLE, DEFAULT_SAMPLES, SEARCH_SPECS, search_spec,
)
from pcor_sql.core.start import DEFAULT_DESCENTS
from pcor_sql.errors import UserError

UTILITIES = ("population", "overlap")
#: Utilities for which adding a row never lowers the utility (so `tight` accounting holds).
MONOTONE_UTILITIES = frozenset(UTILITIES)

Selection = tuple[tuple[str, tuple[Any, ...]], ...]


def option(default: Any, help: str, example: str | None = None, **statement: Any) -> Any:
    """A request field. `statement` (kind, choices, minimum, minimum_inclusive) marks it as a
    `WITH (...)` option of the SQL statement; `example` is how it is written there."""
    meta = {"help": help, "example": example, "statement": statement or None}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class VerifierSpec:
    """A verifier by name with its options, e.g. `lof(k=20)`. The session's verifier registry
    resolves the name and checks the options (a custom verifier is known only there)."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise UserError(f"invalid verifier {self.name!r}", "name one, e.g. 'lof' or 'grubbs'")
        object.__setattr__(self, "name", self.name.strip().lower())
        object.__setattr__(self, "options", tuple((str(k).lower(), v) for k, v in dict(self.options).items()))

    def options_dict(self) -> dict[str, Any]:
        return dict(self.options)


@dataclass(frozen=True)
class OutlierRequest:
    """Release, under ε-OCDP, a context in which each record the selector picks is an outlier.

    `relation`, `metric`, `selector` and `select_list` are SQL rendered by DuckDB's parser
    (`SELECT <select_list> FROM <relation> WHERE <selector>`); `statement` is the text the
    request came from (kept in the ledger history). `verifier` is a `VerifierSpec` or a
    verifier object (a trusted object of the data owner's)."""

    relation: str
    metric: str
    selector: str
    select_list: str = ""
    statement: str | None = None
    by: tuple[str, ...] | None = option(None, "context attributes (default: the ENUM / declared-domain columns)")
    domains: Selection | None = option(None, "declared domains: attribute → values")
    bins: tuple[tuple[str, Bins], ...] | None = option(
        None, "ordinal attributes: attribute → bin edges, e.g. {'age': [18, 25, 35, 45, 55, 65, 81]} "
        "(or 'auto:5': quantile bins from the data, with a privacy warning)")
    verifier: Any = option(VerifierSpec("lof"), "outlier test: grubbs, histogram, lof or zscore, with options")
    epsilon: float = option(
        0.2, "total privacy cost ε of each release (> 0)", "epsilon = 0.2", kind="number", minimum=0.0,
        minimum_inclusive=False,
    )
    search: str = option(
        "bfs", "direct, uniform, random-walk, dfs, bfs or explore", "search = 'bfs'", kind="string",
        choices=tuple(SEARCH_SPECS),
    )
    samples: int | None = option(
        None, f"samples n of the search (default: the search's own — {DEFAULT_SAMPLES}; explore: "
        f"{DEFAULT_EXPLORE_SAMPLES:,} valid contexts)", "samples = 50", kind="integer", minimum=1,
    )
    utility: str = option(
        "population", "utility of a context: population or overlap", "utility = 'population'",
        kind="string", choices=UTILITIES,
    )
    start: Selection | None = option(
        None, "starting context (default: found by a validity-only search)",
        "start = 'job_title IN (''Nurse'') AND year = 2019'", kind="string",
    )
    accounting: str = option(
        "tight", "tight (monotone utility) or paper (the paper's 2ε1 rules)", "accounting = 'tight'",
        kind="string", choices=ACCOUNTINGS,
    )
    seed: int | None = option(None, "reproducible randomness; labelled not for real releases", "seed = 7",
                              kind="integer", minimum=0)
    dataset: str | None = option(None, "budget ledger name to charge", "dataset = 'salaries'", kind="string")
    owner_view: bool = option(False, "also return the owner's private diagnostics", "owner_view = TRUE",
                              kind="boolean")
    descents: int = option(
        DEFAULT_DESCENTS,
        "bfs: validity-only random descents from the full context that seed the frontier "
        "(free under OCDP; 0 = the paper's Algorithm 5)",
        "descents = 24", kind="integer", minimum=0,
    )
    max_checks: int = option(
        DEFAULT_EXPLORE_CHECKS,
        "explore: the most contexts it verifies (a count, never a time limit: see the search's documentation)",
        "max_checks = 2000", kind="integer", minimum=1,
    )
    max_contexts: int | None = option(
        DEFAULT_MAX_ADMISSIBLE, "refuse to enumerate more admissible contexts than this (direct search, coe)"
    )

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
        if self.utility not in UTILITIES:
            raise UserError(f"unknown utility {self.utility!r}", f"use one of: {', '.join(UTILITIES)}")
        spec = search_spec(self.search)
        # Left out, n is the search's own; remembered so that `replace(search=...)` gives the
        # new search its own n rather than the old one's.
        object.__setattr__(self, "_samples_given", self.samples is not None)
        _set(self, "samples", validate_samples(spec.default_samples if self.samples is None else self.samples))
        _set(self, "max_checks", _count(self.max_checks, "max_checks", "max_checks=2000", minimum=1))
        _set(self, "descents", _count(self.descents, "descents", "descents=24 (0: the paper's BFS)"))
        if "descents" not in spec.options:
            _set(self, "descents", 0)  # only bfs reads it; shown as 0 elsewhere
        _set(self, "epsilon", validate_epsilon(self.epsilon))
        if self.max_contexts is not None:
            _set(self, "max_contexts", _count(self.max_contexts, "max_contexts", "max_contexts=1000", minimum=1))
        _common(self)
        self.budget  # noqa: B018 — the accounting rule and utility must agree now, not at release

    @property
    def budget(self) -> Budget:
        """ε split into ε1 by the search's declared privacy map under the accounting rule."""
        return derive_budget(
            self.epsilon, self.search, self.samples, self.accounting, monotone=self.utility in MONOTONE_UTILITIES
        )

    def search_options(self) -> dict[str, Any]:
        """The options the chosen search declares it reads, by name (`SearchSpec.options`)."""
        return {name: getattr(self, name) for name in search_spec(self.search).options}

    def replace(self, **changes: Any) -> "OutlierRequest":
        """A copy with some fields changed (validated again). A request whose n was left to
        its search keeps it so: a new search gets its own default n."""
        if "samples" not in changes and not getattr(self, "_samples_given", True):
            changes["samples"] = None
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class AnomalyRequest:
    """Answer, with a private randomized bit, whether each selected record is a (β, r)-anomaly.

    `columns` are plain numeric columns of `relation` (distance |a − b| for one, the `norm`
    for several); `selector` None asks about every row."""

    relation: str
    columns: tuple[str, ...]
    selector: str | None = None
    statement: str | None = None
    beta: float = option(None, "β: an anomaly has at most β other records within the radius", "beta = 5",
                         kind="number", minimum=1.0)
    radius: float = option(None, "r: the ball radius", "radius = 1000", kind="number", minimum=0.0)
    epsilon: float = option(None, "privacy cost ε of each answer (> 0)", "epsilon = 0.5", kind="number",
                            minimum=0.0, minimum_inclusive=False)
    privacy: str = option("sp", "sp: (ε, k)-sensitive privacy; dp: ε-differential privacy", "privacy = 'sp'",
                          kind="string", choices=PRIVACY_MODES)
    k: int | None = option(1, "k of (ε, k)-sensitive privacy, 1 ≤ k ≤ β + 1", "k = 1", kind="integer", minimum=1)
    norm: str = option("l2", "l1, l2 or linf, for several columns", "norm = 'l2'", kind="string", choices=NORMS)
    seed: int | None = option(None, "reproducible randomness; labelled not for real releases", "seed = 7",
                              kind="integer", minimum=0)
    dataset: str | None = option(None, "budget ledger name to charge", "dataset = 'homicides'", kind="string")
    owner_view: bool = option(False, "also return the owner's private diagnostics", "owner_view = TRUE",
                              kind="boolean")

    def __post_init__(self) -> None:
        _require_text(self.relation, "relation")
        _set(self, "columns", _names(self.columns, "columns"))
        if not self.columns:
            raise UserError("no column to measure distances on", "select one or more numeric columns")
        if self.selector is not None:
            _require_text(self.selector, "selector")
        params = validate_params(self.beta, self.radius, self.epsilon, self.privacy, self.k)
        _set(self, "norm", validate_norm(self.norm))
        _set(self, "k", params.k if params.privacy == "sp" else self.k)
        _common(self)

    def replace(self, **changes: Any) -> "AnomalyRequest":
        return dataclasses.replace(self, **changes)


def request_options(cls: type) -> dict[str, dataclasses.Field]:
    """The fields of a request class that a caller sets by name (all but the parsed SQL)."""
    return {f.name: f for f in dataclasses.fields(cls) if "help" in f.metadata}


def statement_options(cls: type) -> dict[str, dataclasses.Field]:
    """The fields of a request class that its SQL statement accepts in `WITH (...)`."""
    return {name: f for name, f in request_options(cls).items() if f.metadata.get("statement")}


def _set(request: Any, name: str, value: Any) -> None:
    object.__setattr__(request, name, value)


def _common(request: Any) -> None:
    if request.seed is not None:
        _set(request, "seed", _count(request.seed, "seed", "seed=7"))
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


def _verifier(value: Any) -> Any:
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
        return value
    raise UserError(f"invalid verifier {value!r}", "pass a name such as 'lof' or a verifier object")
