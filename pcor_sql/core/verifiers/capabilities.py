"""What a verifier reads and promises, declared once per verifier class and read everywhere.

Every site that used to infer a verifier's nature from its type or its attributes reads
`capabilities_of(verifier)` instead: the verdict cache (`deterministic`), the summary build
(`reads`: values or moments only), the evaluator (`reads is Reads.SQL`), the COE enumerator
(`vectorized`), the data access (which `reads` it can serve: `Session.verifier` refuses the
others before anything is reserved) and the texts that list the built-ins (`BUILTIN_NAMES`).
Compiled kernels are the engine's and register themselves by verifier type
(`engine.compiled_checks.kernel`).

A class declares `capabilities: ClassVar[Capabilities]` in its own body. A subclass that does
not declare its own keeps its base's, but is not taken as deterministic unless it says so
(`deterministic = True`): it may override `check` with code the verdict cache cannot key. An
object of the older protocol (attributes `needs_values`, `needs_sql`, `deterministic`,
`check_many`) is read from those attributes, here and nowhere else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pcor_sql.core.option_spec import StrEnum


class Reads(StrEnum):
    """What a verifier reads of a population (each includes the moments)."""

    MOMENTS = "moments"  # n, mean, m2, min, max
    NEAR = "values near v"  # between, count_between, around: the sorted runs or per-cell windows
    ALL_VALUES = "all values"  # values(): every value of the population
    SQL = "sql"  # an SQL aggregate the engine evaluates over the population's rows


@dataclass(frozen=True)
class Capabilities:
    """`reads`: what the verifier reads (the data access must serve it); `deterministic`: its
    verdict is a function of (data, V, options, context) alone, so the Session may remember it;
    `label`: its name in words; `vectorized`: it has `check_many(n, mean, m2, v)` over moment
    arrays (only with `reads` = MOMENTS), which the exact COE enumeration uses."""

    reads: Reads
    deterministic: bool
    label: str
    vectorized: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "reads", Reads(self.reads))
        if self.vectorized and self.reads is not Reads.MOMENTS:
            raise ValueError("only a verifier that reads moments alone can be vectorized over moment arrays")

    @property
    def needs_values(self) -> bool:
        """The summary must hold the metric's values (sorted runs or per-cell windows)."""
        return self.reads in (Reads.NEAR, Reads.ALL_VALUES)

    @property
    def needs_sql(self) -> bool:
        return self.reads is Reads.SQL


def capabilities_of(verifier: object) -> Capabilities:
    """The verifier's declared capabilities (see the module doc for subclasses and older objects)."""
    cls = type(verifier)
    own = cls.__dict__.get("capabilities")
    if isinstance(own, Capabilities):
        return own
    inherited = getattr(cls, "capabilities", None)
    deterministic = getattr(verifier, "deterministic", False) is True
    if isinstance(inherited, Capabilities):
        return dataclasses.replace(inherited, deterministic=deterministic)
    if getattr(verifier, "needs_sql", False):
        reads = Reads.SQL
    elif getattr(verifier, "needs_values", True):
        reads = Reads.ALL_VALUES
    else:
        reads = Reads.MOMENTS
    vectorized = reads is Reads.MOMENTS and callable(getattr(verifier, "check_many", None))
    return Capabilities(reads, deterministic, str(getattr(verifier, "name", cls.__name__)), vectorized)

