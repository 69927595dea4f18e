"""The analyst's command line in words, shared by `pcor-sql-remote` (this distribution) and
`pcor-sql remote` (pcor-sql's CLI): how a key and a point are typed, how a released context and
the service's rows are shown. Plain strings only: each command line prints them its own way.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from pcor_sql_client.errors import UserError

#: The environment variables an analyst sets once: the token `pcor-sql analyst add` printed, the URL.
TOKEN_VARIABLE = "PCOR_SQL_TOKEN"
URL_VARIABLE = "PCOR_SQL_URL"

# A bin's label as the service sends it (`pcor_sql.core.bins.run_label`): `[18, 25)`, `[65, 81]`, `(-inf, 25)`.
_BIN = re.compile(r"^([\[(])(.+), (.+)([)\]])$")


def key_value(text: str) -> Any:
    """A key as typed: an integer's digits are sent as a number (`42`), anything else as text
    (`a17`, `007` — a leading zero is part of a text key)."""
    stripped = text.strip()
    body = stripped[1:] if stripped[:1] == "-" else stripped
    if body.isdigit() and (body == "0" or not body.startswith("0")):
        return int(stripped)
    return text


def point(texts: Sequence[str] | None) -> dict[str, float | int]:
    """`--value salary=250000 --value age=40` → {"salary": 250000, "age": 40}."""
    out: dict[str, float | int] = {}
    for text in texts or []:
        name, sep, number = text.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--value {text!r} is not METRIC=NUMBER", "write e.g. --value salary=250000")
        try:
            value: float | int = int(number) if key_value(number) == int(number) else float(number)
        except ValueError:
            try:
                value = float(number)
            except ValueError:
                raise UserError(f"--value {text!r}: {number!r} is not a number", "write e.g. --value salary=250000") from None
        if name.strip() in out:
            raise UserError(f"--value names {name.strip()!r} twice", "give each metric once")
        out[name.strip()] = value
    if not out:
        raise UserError("identify-anomaly needs a point of the metric space", "pass --value METRIC=NUMBER")
    return out


def bin_run(values: Sequence[Any]) -> str | None:
    """Consecutive bins as the one interval the owner sees: `[0, 6)`, `[6, 9)`, `[9, 15)` →
    `[0, 15)`; None when `values` are not bin labels that follow one another."""
    parsed = [_BIN.match(v) if isinstance(v, str) else None for v in values]
    if not parsed or not all(parsed):
        return None
    if any(a.group(3) != b.group(2) for a, b in zip(parsed, parsed[1:])):  # type: ignore[union-attr]
        return None
    first, last = parsed[0], parsed[-1]
    return f"{first.group(1)}{first.group(2)}, {last.group(3)}{last.group(4)}"  # type: ignore[union-attr]


def context_lines(context: dict[str, Sequence[Any]]) -> list[str]:
    """One line per attribute, as the owner's output writes it: `dept ∈ {a, b}`, and an
    ordinal attribute's run of bins as one range, `hour ∈ [0, 15)`."""
    width = max((len(a) for a in context), default=0)
    lines = []
    for attribute, values in context.items():
        shown = bin_run(values) or "{" + ", ".join(str(v) for v in values) + "}"
        lines.append(f"  {attribute.ljust(width)} ∈ {shown}")
    return lines


def explanation_lines(item: dict[str, Any]) -> list[str]:
    """A released explanation (the service's JSON) in words: the conclusion, the context, the
    SQL and the privacy cost."""
    lines = [str(item.get("summary") or f"key {item.get('key')!r}")]
    lines += context_lines(item.get("context") or {})
    if item.get("explanation_sql"):
        lines.append(f"  explanation  {item['explanation_sql']}")
    lines.append(f"  privacy      {item.get('privacy_summary', '')}")
    return lines


def sql_line(item: dict[str, Any]) -> str:
    """The explanation's SQL, one statement ending in `;`."""
    return str(item.get("explanation_sql", "")).rstrip().rstrip(";") + ";"


def cell(value: Any) -> Any:
    """A JSON value in one table cell: a dict as `k: v; ...`, a list as `a, b`."""
    if isinstance(value, dict):
        return "; ".join(f"{k}: {cell(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(str(cell(v)) for v in value)
    return value


def table_rows(items: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """The columns (every key, in first-seen order) and the cells of `items`."""
    columns: list[str] = []
    for item in items:
        columns.extend(k for k in item if k not in columns)
    return columns, [[cell(item.get(c)) for c in columns] for item in items]


def me_rows(found: dict[str, Any]) -> list[dict[str, Any]]:
    """`/v1/me` as one row per (notion, dataset) quota, with the analyst's name."""
    usage = found.get("usage")
    if not isinstance(usage, list) or not all(isinstance(u, dict) for u in usage):
        return [found]
    return [{"analyst": found.get("analyst"), **u, "dataset": u.get("dataset") or "(all)"} for u in usage]


def answer_row(item: dict[str, Any]) -> dict[str, Any]:
    """An anomaly answer's fields for a table (its sentences go in the title)."""
    return {k: v for k, v in item.items() if k not in ("summary", "privacy_summary")}


def releasable_title(page: dict[str, Any]) -> str:
    """`12 releasable keys of salaries; 1–10 shown` (or that the owner declared none)."""
    if page.get("total") is None:
        return f"no releasable keys of {page.get('dataset')}: the data owner declared none"
    first, shown = int(page.get("offset") or 0), len(page.get("keys") or [])
    span = f"{first + 1}–{first + shown} shown" if shown else "none from there"
    return f"{page['total']:,} releasable keys of {page.get('dataset')}; {span}"
