"""An analyst request's keys and what it would cost (`pcor_sql.analyst`): a frozen key text as
the JSON value an analyst sends, the condition that selects the keys (literals, never text
spliced: DESIGN.md §8 "Inputs are exact"), a key as the history shows it and as a comparable
value, and `RequestCost`, the price a request is quoted before it is admitted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pcor_sql.frontend.keyed import KeyedSelect
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal


@dataclass(frozen=True)
class RequestCost:
    """What a request would charge (`Analyst.cost`): ε per record or point under `notion`,
    `k` for (ε, k)-SP, how many charges, and their sum (sequential composition)."""

    notion: str
    epsilon: float
    k: int | None
    count: int
    total: float

    def as_dict(self) -> dict[str, Any]:
        return {"notion": self.notion, "epsilon": self.epsilon, "k": self.k, "count": self.count, "total": self.total}


#: The most releasable keys one page holds.
RELEASABLE_PAGE = 1000


def key_value(text: str, kind: str) -> Any:
    """A frozen key text as the JSON value an analyst sends for it (`releasable_text` reversed)."""
    if kind in ("integer", "number") and text.lstrip("-").isdigit():
        return int(text)
    if kind == "number":
        try:
            return float(text)
        except ValueError:
            return text
    return text


def selector(keyed: KeyedSelect) -> str:
    """The SQL condition selecting the request's keys (each a literal: never spliced as text)."""
    column = quote_identifier(keyed.key_column)
    return f"{column} IN ({', '.join(quote_literal(k) for k in keyed.keys)})"


def shown(key: Any) -> str:
    """A key as the history shows it."""
    return f"key = {key!r}"


def canonical(key: Any) -> Any:
    """A key as a comparable value: DuckDB returns 42 for an INTEGER key given as 42 or 42.0."""
    if isinstance(key, bool):
        return key
    if isinstance(key, (int, float)):
        return float(key)
    return str(key)
