"""Targets printed next to the measured figures, each stated as met or missed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Target:
    """One target: what, the goal as text, the measured figure as text, and the verdict
    (None when the figure was not measured in this run)."""

    name: str
    goal: str
    measured: str
    met: bool | None
    value: float | None = None
    note: str = ""

    @property
    def verdict(self) -> str:
        return "not measured" if self.met is None else ("met" if self.met else "MISSED")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "goal": self.goal, "measured": self.measured, "met": self.met,
                "value": self.value, "note": self.note}


def at_most(name: str, value: float | None, limit: float, fmt: Callable[[float], str], *, strict: bool = False,
            note: str = "") -> Target:
    goal = ("< " if strict else "≤ ") + fmt(limit)
    if value is None:
        return Target(name, goal, "—", None, None, note)
    met = value < limit if strict else value <= limit
    return Target(name, goal, fmt(value), met, value, note)


def at_least(name: str, value: float | None, limit: float, fmt: Callable[[float], str], *,
             lower_bound: bool = False, note: str = "") -> Target:
    goal = "≥ " + fmt(limit)
    if value is None:
        return Target(name, goal, "—", None, None, note)
    shown = ("≥ " if lower_bound else "") + fmt(value)
    # A lower bound that already reaches the limit proves the target; one below it proves nothing.
    met: bool | None = value >= limit
    if lower_bound and not met:
        met = None
    return Target(name, goal, shown, met, value, note)
