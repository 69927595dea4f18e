"""The built-in verifiers, listed once: the default registry, the help texts and refusals that
name them and the tests that run every one read this tuple."""

from __future__ import annotations

from typing import Any, Iterable

from pcor_sql.core.option_spec import one_of
from pcor_sql.core.verifiers.capabilities import Reads, capabilities_of
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers.zscore import ZScore

BUILTINS = (Grubbs, Histogram, Lof, ZScore)


def builtin_name(cls: type) -> str:
    """A built-in's name: the default of its `name` field."""
    return cls.__dataclass_fields__["name"].default


BUILTIN_NAMES = tuple(builtin_name(cls) for cls in BUILTINS)


def builtin_label(name: str) -> str | None:
    """A built-in's name in words (`capabilities.label`: 'lof' → 'LOF'); None for any other name."""
    return next((c.capabilities.label for c in BUILTINS if builtin_name(c) == name), None)


def builtin_list(serves: Iterable[Reads] | None = None) -> str:
    """'grubbs, histogram, lof or zscore': the built-ins (those whose reads `serves` holds)."""
    keep = None if serves is None else frozenset(serves)
    names = [builtin_name(c) for c in BUILTINS if keep is None or c.capabilities.reads in keep]
    return one_of(names)


def unserved(verifier: object, serves: Iterable[Reads], engine: str) -> tuple[str, str] | None:
    """(problem, fix) when an engine that serves `serves` cannot run `verifier`, else None."""
    caps = capabilities_of(verifier)
    if caps.reads in serves:
        return None
    name = getattr(verifier, "name", type(verifier).__name__)
    return (
        f"verifier '{name}' reads {caps.reads} of each context, which the {engine} engine does not serve",
        f"use {builtin_list(serves)} here, or run '{name}' on DuckDB",
    )
