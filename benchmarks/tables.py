"""Result tables shared by the Markdown writer and the CLI's rich renderer, and number formats."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass(frozen=True)
class Table:
    """A titled table of already formatted cells, with notes printed under it."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {"title": self.title, "columns": list(self.columns), "rows": [list(r) for r in self.rows],
                "notes": list(self.notes)}


def make_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], notes: Sequence[str] = ()) -> Table:
    return Table(title, tuple(columns), tuple(tuple(str(c) for c in r) for r in rows), tuple(notes))


def markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table with its title as a heading and notes as a list."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [f"### {table.title}", ""]
    lines.append("| " + " | ".join(cell(c) for c in table.columns) + " |")
    lines.append("|" + "|".join("---" for _ in table.columns) + "|")
    for row in table.rows:
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    if table.notes:
        lines.append("")
        lines.extend(f"- {n}" for n in table.notes)
    lines.append("")
    return "\n".join(lines)


def seconds(x: float | None) -> str:
    """A duration with a sensible unit: µs, ms, s or min."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if x < 1e-3:
        return f"{x * 1e6:.0f} µs"
    if x < 1.0:
        return f"{x * 1e3:.1f} ms"
    if x < 120.0:
        return f"{x:.2f} s"
    return f"{x / 60:.1f} min"


def ratio(x: float | None, lower_bound: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    text = f"{x:,.0f}×" if x >= 10 else f"{x:.1f}×"
    return ("≥ " + text) if lower_bound else text


def fraction(x: float | None, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f}"


def percent(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{100 * x:.1f}%"


def mib(n_bytes: float | None) -> str:
    if n_bytes is None:
        return "—"
    return f"{n_bytes / 2**20:,.0f} MiB"
