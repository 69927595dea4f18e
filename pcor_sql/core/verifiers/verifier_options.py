"""Validation of verifier options: one place that turns a bad option into a one-line UserError.

Options arrive from the CLI, from `USING verifier(...)` and from Python calls, so types are
checked here (a bool is not a number, a float is not a count) rather than trusted.
"""

from __future__ import annotations

import math
from dataclasses import Field, field
from numbers import Integral, Real
from typing import Any

from pcor_sql.core.option_spec import fold_word
from pcor_sql.core.verifiers.base import Verifier
from pcor_sql.errors import UserError


def whole_number(verifier: str, option: str, value: object, *, minimum: int, example: int) -> int:
    """`value` as an int ≥ minimum, or a UserError naming the option and a valid example."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise UserError(
            f"option {option}={value!r} for {verifier} is not a whole number",
            f"write it without a decimal point, e.g. {verifier}({option}={example})",
        )
    if value < minimum:
        raise UserError(
            f"option {option}={value!r} for {verifier} is below {minimum}",
            f"use {option} ≥ {minimum}, e.g. {verifier}({option}={example})",
        )
    return int(value)


def real_number(
    verifier: str,
    option: str,
    value: object,
    *,
    low: float,
    high: float,
    low_closed: bool,
    high_closed: bool,
    example: float,
) -> float:
    """`value` as a finite float inside the stated interval, or a UserError with the fix."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise UserError(
            f"option {option}={value!r} for {verifier} is not a number",
            f"give a number, e.g. {verifier}({option}={example!r})",
        )
    x = float(value)
    above = x >= low if low_closed else x > low
    below = x <= high if high_closed else x < high
    if not (math.isfinite(x) and above and below):
        interval = (
            ("[" if low_closed else "(")
            + f"{low:g}, {high:g}"
            + ("]" if high_closed else ")")
        )
        raise UserError(
            f"option {option}={value!r} for {verifier} is outside {interval}",
            f"use a value in {interval}, e.g. {verifier}({option}={example!r})",
        )
    return x


def one_of(verifier: str, option: str, value: object, choices: tuple[str, ...]) -> str:
    """`value` as one of the words `choices` (in any ASCII case, the rule of every fixed-value
    option: `core.option_spec.fold_word`), or a UserError listing them."""
    if isinstance(value, str) and fold_word(value) in choices:
        return fold_word(value)
    listed = ", ".join(f"'{c}'" for c in choices)
    raise UserError(
        f"option {option}={value!r} for {verifier} is not one of {listed}",
        f"write e.g. {verifier}({option}='{choices[-1]}')",
    )


def fixed(value: Any) -> Field:
    """A verifier field every instance holds the same value of (its name, what it reads): not a
    constructor argument, not in the repr."""
    return field(default=value, init=False, repr=False)


def store_real(verifier: Verifier, option: str, **interval: Any) -> None:
    """Check the frozen `verifier`'s real-valued `option` (`real_number` with `interval`) and
    store the checked float in place of what was given."""
    value = real_number(verifier.name, option, getattr(verifier, option), **interval)
    object.__setattr__(verifier, option, value)
