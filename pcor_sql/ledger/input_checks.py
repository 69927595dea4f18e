"""Checks of the values the ledger is given: ε and limits, unit names, privacy notions."""

from __future__ import annotations

import math
import numbers

from pcor_sql.errors import UserError
from pcor_sql.core.choices import Notion
from pcor_sql.core.option_spec import parse_choice

#: The privacy notions the ledger keeps apart: OCDP ε (PCOR releases), ε-DP and (ε, k)-SP
#: (anomaly answers).
NOTIONS = Notion.names()


def check_positive(value: object, what: str) -> float:
    bad = UserError(f"the {what} must be a finite number > 0, got {_short(value)}", f"pass a positive {what}")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise bad
    try:  # an int past the float range (10**400) raises OverflowError here, not later
        number = float(value)
    except (OverflowError, ValueError, TypeError):
        raise bad from None
    if not math.isfinite(number) or number <= 0:
        raise bad
    return number


def _short(value: object) -> str:
    if isinstance(value, int) and abs(value) >= 10**30:  # str() of a huge int is slow, or refused past 4300 digits
        return f"an integer of about {int(abs(value).bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_unit(unit: object) -> None:
    if not isinstance(unit, str) or not unit.strip():
        raise UserError(f"invalid unit name {unit!r}", "name the unit with a non-empty string")
    if "\x00" in unit:
        raise UserError("a unit name contains a NUL character", "remove it")


def check_notion(notion: object) -> str:
    """The canonical (lower-case) notion `notion` spells in any ASCII case (DESIGN.md §5: one
    spelling rule for every fixed-value option); the ledger keys its rows by what this returns."""
    return parse_choice("privacy notion", notion, tuple(NOTIONS))
