"""How results look: released explanations, anomaly answers and query results as text
tables (rich), JSON Lines, or SQL.

JSON output is one object per line (JSON Lines) with the library's stable keys
(`Explanation.as_dict()`); values DuckDB returns that JSON lacks are converted: decimals to
numbers, dates and times to ISO 8601 text, bytes to hex, NaN and ±inf to null.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import math
import uuid
from typing import Any, Iterable, Mapping, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pcor_sql.cli.console import stdout_console, write_line
from pcor_sql.readable import round_epsilon

TABLE = "table"
JSON = "json"
SQL = "sql"
CSV = "csv"

#: At most this many rows are drawn in a text table; JSON output has them all.
TABLE_ROWS = 100
#: The last line of a text release: where the words it uses are explained.
GLOSSARY_POINTER = "terms (ε, ε1, OCDP, utility, ...): pcor-sql glossary"

_START_SOURCES = {
    "user": "given (--start / start = ...), checked to hold the record and be valid",
    "search": "found by a validity-only search (free under OCDP)",
    "none": "none needed (the search does not walk from a start)",
}


def jsonable(value: Any) -> Any:
    """`value` with every part JSON can carry as is, or converted (see the module docstring)."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        return jsonable(float(value))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, (_dt.date, _dt.time, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if callable(getattr(value, "tolist", None)):  # numpy scalars and arrays
        return jsonable(value.tolist())
    return str(value)


def json_text(obj: Any) -> str:
    return json.dumps(jsonable(obj), ensure_ascii=False, allow_nan=False)


def show_value(value: Any) -> str:
    """A value as a person reads it; text that could be misread (commas, braces, quotes,
    outer spaces, empty) is quoted SQL-style."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.10g}"
    text = str(value)
    if isinstance(value, str) and (not text or text != text.strip() or any(c in text for c in ",{}'=")):
        return "'" + text.replace("'", "''") + "'"
    return text


def number(value: float | None) -> str:
    if value is None:
        return "—"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.6g}"


def record_text(record: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={show_value(v)}" for k, v in record.items())


def context_lines(context: Mapping[str, Sequence[Any]]) -> list[Text]:
    """One line per attribute: `job_title ∈ {Nurse, Professor}`."""
    width = max((len(a) for a in context), default=0)
    lines = []
    for attribute, values in context.items():
        line = Text("  ")
        line.append(attribute.ljust(width), style="bold")
        line.append(" ∈ {" + ", ".join(show_value(v) for v in values) + "}")
        lines.append(line)
    return lines


# ---- explanations ------------------------------------------------------------------------

def print_explanations(explanations: Sequence[Any], fmt: str, console: Console | None = None) -> None:
    """Released explanations: a text block each, one JSON object per line, or their SQL."""
    if fmt == JSON:
        for e in explanations:
            write_line(json_text(e.as_dict()))
        return
    if fmt == SQL:
        for e in explanations:
            write_line(e.explanation_sql.rstrip().rstrip(";") + ";")
        return
    console = console or stdout_console()
    for i, e in enumerate(explanations):
        if i:
            console.print()
        _explanation_block(console, e, i + 1, len(explanations))
    if explanations:
        console.print(Text(GLOSSARY_POINTER, style="dim"))


def _field(console: Console, name: str, value: str, style: str | None = None) -> None:
    line = Text("  ")
    line.append(f"{name:<12}", style="dim")
    line.append(value, style=style)
    console.print(line)


def _explanation_block(console: Console, e: Any, number_: int, total: int) -> None:
    # The first line says what was concluded, in words and from released values only.
    title = Text(f"{number_} of {total}: " if total > 1 else "", style="bold")
    title.append(e.summary, style="bold")
    console.print(title)
    console.print(Text("  released context:", style="dim"))
    for line in context_lines(e.context):
        console.print(line)
    _field(console, "explanation", e.explanation_sql)
    _field(console, "privacy", e.privacy_summary)
    _field(console, "search", f"{e.search}, {e.samples} samples; verifier {e.verifier}; utility {e.utility}")
    _field(console, "start", _START_SOURCES.get(e.start_source, e.start_source))
    _field(console, "record", record_text(e.record))
    units = ", ".join(e.units) + (f" (dataset {e.dataset})" if e.dataset else "")
    if e.budget_limit is not None:
        spent = round_epsilon(e.budget_spent)
        _field(console, "budget", f"charged to {units}: spent ε = {spent:.6g} of limit {e.budget_limit:.6g}")
    else:
        _field(console, "budget", f"charged to {units} (no budget limit set)")
    if e.seeded:
        console.print(Text("  seeded: not for real releases", style="bold yellow"))
    if e.owner is not None:
        owner = dict(e.owner.as_dict())
        owner.pop("not_for_release", None)
        notes = owner.pop("notes", [])
        console.print(Text("  NOT FOR RELEASE — owner diagnostics", style="bold red"))
        console.print(Text("    " + ", ".join(f"{k.replace('_', ' ')} {number(v)}" for k, v in owner.items())))
        for note in notes:
            console.print(Text(f"    note: {note}"))


# ---- anomaly answers ---------------------------------------------------------------------

def answer_rows(answers: Iterable[Any], owner_view: bool) -> list[dict[str, Any]]:
    """Each answer's `as_dict(owner_view)` flattened for a table: the record's columns first,
    then the other keys (a nested mapping's keys joined with '.'); the sentences, which the
    table's caption says once, are left out."""
    rows = []
    for answer in answers:
        flat: dict[str, Any] = {}
        for key, value in answer.as_dict(owner_view).items():
            if key in ("summary", "privacy_summary"):
                continue
            if key == "record" and isinstance(value, Mapping):
                flat.update(value)
            elif isinstance(value, Mapping):
                flat.update({f"{key}.{k}": v for k, v in value.items()})
            else:
                flat[key] = value
        rows.append(flat)
    return rows


def print_answers(answers: Sequence[Any], fmt: str, owner_view: bool, console: Console | None = None) -> None:
    """Anomaly answers: one JSON object per answered row, or a table (owner columns marked)."""
    if fmt == JSON:
        for answer in answers:
            write_line(json_text(answer.as_dict(owner_view)))
        return
    console = console or stdout_console()
    rows = answer_rows(answers, owner_view)
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    title = f"{len(rows)} answer{'s' if len(rows) != 1 else ''}"
    if rows and "epsilon" in rows[0]:
        total = round_epsilon(sum(float(r.get("epsilon") or 0) for r in rows))
        title += f", total ε = {total:.6g} (sequential composition)"
    if answers:
        first = answers[0]
        title += (
            f"\nanomaly = true: at most β = {first.beta:g} records (itself included) lie within r = {first.radius:g} "
            f"(each answer is randomized); each answer's {first.privacy_summary}"
        )
    print_table(console, columns, [[row.get(c) for c in columns] for row in rows], title=title)
    if owner_view:
        console.print(Text("owner columns (true answer, counts, λ, flip probability): NOT FOR RELEASE", style="bold red"))


# ---- ordinary query results --------------------------------------------------------------

def print_relation(
    result: tuple[Sequence[str], Sequence[Sequence[Any]]] | None, fmt: str, console: Console | None = None
) -> None:
    """What an ordinary statement returned, as (columns, rows): a table or one JSON object per row."""
    if result is None:
        return
    columns, rows = result
    if fmt == JSON:
        for row in rows:
            write_line(json_text(dict(zip(columns, row))))
        return
    print_table(console or stdout_console(), columns, rows)


def print_table(
    console: Console, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None
) -> None:
    table = Table(title=Text(title) if title else None, title_justify="left")
    for column in columns:
        table.add_column(Text(str(column)))
    for row in rows[:TABLE_ROWS]:
        table.add_row(*[Text(show_value(v) if not isinstance(v, str) else v) for v in row])
    console.print(table)
    if len(rows) > TABLE_ROWS:
        console.print(Text(f"… {len(rows) - TABLE_ROWS:,} more rows (use --format json for all)", style="dim"))
