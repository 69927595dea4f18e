"""Verifiers by name: the built-ins, user Python verifiers and user SQL-aggregate verifiers.

A `VerifierRegistry` is an ordinary object (no module-level state): `default_registry()`
returns a fresh one holding grubbs, histogram, lof and zscore, and an app or session adds
its own verifiers to its own registry. The `lof(k=20, threshold=1.5)` text of `USING ...` and
`--verifier` is read by the front end (`pcor_sql.frontend.option_lists.parse_verifier_spec`).

Privacy: verifiers only decide validity, which OCDP treats as public structure; a user
verifier is trusted code of the data owner and costs nothing either.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

from pcor_sql.core.option_spec import fold_word
from pcor_sql.core.verifiers.base import Population, Verifier
from pcor_sql.core.verifiers.builtins import BUILTINS
from pcor_sql.core.verifiers.capabilities import Capabilities, Reads
from pcor_sql.errors import InternalError, PcorError, UserError

_NAME = re.compile(r"[a-z_][a-z0-9_]*\Z")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_SQL_PLACEHOLDERS = ("metric", "v")


@dataclass(frozen=True)
class PythonVerifier:
    """A user verifier `fn(values, v) -> bool` over the population's sorted metric values."""

    name: str
    fn: Callable[[np.ndarray, float], Any]
    # The user's code may read state the verdict cache does not key: checked every time.
    capabilities: ClassVar[Capabilities] = Capabilities(Reads.ALL_VALUES, deterministic=False, label="Python verifier")

    def check(self, pop: Population) -> bool:
        values = pop.values().view()
        values.flags.writeable = False  # the caller's sorted array must survive the user code
        try:
            verdict = self.fn(values, float(pop.v))
        except PcorError:
            raise
        except Exception as exc:  # the user's code failed: say whose and why, in one line
            raise UserError(
                f"python verifier '{self.name}' raised {type(exc).__name__}: {exc}",
                "fix the function (it gets a sorted float64 array and v, and returns True or False)",
            ) from exc
        if not isinstance(verdict, (bool, np.bool_)):
            raise UserError(
                f"python verifier '{self.name}' returned {type(verdict).__name__}, not a bool",
                "return True when v is an outlier of the values, else False",
            )
        return bool(verdict)

    def score(self, pop: Population) -> float:
        """1.0 for an outlier, 0.0 otherwise (a user verifier has no statistic to show)."""
        return 1.0 if self.check(pop) else 0.0

    def options(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class SqlVerifier:
    """A user SQL-aggregate verifier: a boolean aggregate over `{metric}` and `{v}`.

    The engine evaluates it over the population's rows; the pure core can only render it.
    """

    name: str
    template: str
    capabilities: ClassVar[Capabilities] = Capabilities(Reads.SQL, deterministic=False, label="SQL verifier")

    def sql(self, metric_sql: str, v_param: str) -> str:
        """The template with `{metric}` and `{v}` filled in one pass, parenthesized."""
        fill = {"metric": metric_sql, "v": v_param}
        return "(" + _PLACEHOLDER.sub(lambda m: fill[m.group(1)], self.template) + ")"

    def sql_expression(self, metric_sql: str, v_param: str) -> str:
        return self.sql(metric_sql, v_param)

    def check(self, pop: Population) -> bool:
        raise InternalError(f"SQL verifier '{self.name}' must be evaluated by the engine, not by check()")

    def score(self, pop: Population) -> float:
        raise InternalError(f"SQL verifier '{self.name}' must be evaluated by the engine, not by score()")

    def options(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class _Entry:
    factory: Callable[..., Any]
    option_names: tuple[str, ...]


def _init_options(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def _class_name(cls: type) -> str:
    for f in dataclasses.fields(cls):
        if f.name == "name" and isinstance(f.default, str):
            return f.default
    raise InternalError(f"verifier class {cls.__name__} has no default name")


class VerifierRegistry:
    """Verifier factories by (lower-case) name."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._entries))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and fold_word(name) in self._entries

    def option_names(self, name: str) -> tuple[str, ...]:
        return self._entry(name).option_names

    def register_class(self, cls: type) -> None:
        """A frozen-dataclass verifier: its name field's default names it, its init fields are its options."""
        self._add(_class_name(cls), _Entry(cls, _init_options(cls)))

    def register_python(self, name: str, fn: Callable[[np.ndarray, float], Any]) -> None:
        """A verifier `fn(values, v) -> bool` over the population's sorted float64 values."""
        if not callable(fn):
            raise UserError(
                f"python verifier '{name}' is not callable",
                "pass a function fn(values, v) -> bool",
            )
        self._add(name, _Entry(lambda: PythonVerifier(name, fn), ()))

    def register_sql(self, name: str, sql_template: str) -> None:
        """A boolean SQL aggregate over the placeholders {metric} and {v}, run by the engine."""
        if not isinstance(sql_template, str) or not sql_template.strip():
            raise UserError(
                f"SQL verifier '{name}' has an empty template",
                "give a boolean aggregate such as abs({v} - median({metric})) > 3 * mad({metric})",
            )
        found = _PLACEHOLDER.findall(sql_template)
        unknown = sorted(set(found) - set(_SQL_PLACEHOLDERS))
        if unknown:
            raise UserError(
                f"SQL verifier '{name}' uses the unknown placeholder {{{unknown[0]}}}",
                "use only {metric} (the metric column) and {v} (the record's value)",
            )
        missing = [p for p in _SQL_PLACEHOLDERS if p not in found]
        if missing:
            raise UserError(
                f"SQL verifier '{name}' does not use {{{missing[0]}}}",
                "a verifier compares the record's value {v} with the population's {metric}",
            )
        template = sql_template.strip()
        self._add(name, _Entry(lambda: SqlVerifier(name, template), ()))

    def make(self, name: str, **options: Any) -> Verifier:
        """A verifier from its name and options; unknown names, options or values are UserErrors."""
        entry = self._entry(name)
        key = fold_word(name)
        for option in options:
            if option not in entry.option_names:
                takes = ", ".join(entry.option_names) if entry.option_names else "no options"
                raise UserError(f"unknown option '{option}' for {key}", f"{key} takes: {takes}")
        return entry.factory(**options)

    def _entry(self, name: str) -> _Entry:
        entry = self._entries.get(fold_word(name)) if isinstance(name, str) else None
        if entry is None:
            raise UserError(f"unknown verifier {name!r}", f"use one of: {', '.join(self.names())}")
        return entry

    def _add(self, name: str, entry: _Entry) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise UserError(
                f"invalid verifier name {name!r}",
                "use lower-case letters, digits and underscores, starting with a letter",
            )
        if name in self._entries:
            raise UserError(f"verifier '{name}' is already registered", "choose another name")
        self._entries[name] = entry


def default_registry() -> VerifierRegistry:
    """A fresh registry with the built-ins (`core.verifiers.builtins`)."""
    registry = VerifierRegistry()
    for cls in BUILTINS:
        registry.register_class(cls)
    return registry
