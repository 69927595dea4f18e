"""How results look: released explanations, anomaly answers and query results as text
tables (rich), one JSON document, JSON Lines, CSV, or SQL.

`json` is one JSON document, a list with one object per result (`python -m json.tool` reads
it); `jsonl` is the same objects one per line. Both carry the library's stable keys
(`Explanation.as_dict()`); values DuckDB returns that JSON lacks are converted as everywhere
(`pcor_sql.jsonable`): decimals to numbers, dates and times to ISO 8601 text, a timedelta to
seconds, bytes to hex, NaN and ±inf to null. `csv` has flat
columns: a nested mapping's keys joined with '.' (`record.id`, `context.year`), a list's items
joined with '|', so no cell holds JSON.
"""

from __future__ import annotations

import csv
import json
import sys
from typing import Any, Iterable, Mapping, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pcor_sql.cli.console import stdout_console, write_line
from pcor_sql.jsonable import jsonable
from pcor_sql.readable import certificate_words, round_epsilon, start_words

TABLE = "table"
JSON = "json"
JSONL = "jsonl"
SQL = "sql"
CSV = "csv"

#: At most this many rows are drawn in a text table; JSON output has them all.
TABLE_ROWS = 100
#: The last line of a text release: where the words it uses are explained.
GLOSSARY_POINTER = "terms (ε, ε1, OCDP, utility, ...): pcor-sql glossary"


def json_text(obj: Any) -> str:
    return json.dumps(jsonable(obj), ensure_ascii=False, allow_nan=False)


class JsonOut:
    """Writes objects as one JSON list (`json`) or one per line (`jsonl`), streaming either way:
    each object is written when it is given, so the first comes before the last is made."""

    def __init__(self, fmt: str) -> None:
        self.lines = fmt == JSONL
        self.count = 0

    def __enter__(self) -> "JsonOut":
        return self

    def write(self, obj: Any = None, *, text: str | None = None) -> None:
        """One object (or its JSON `text`, already made)."""
        body = json_text(obj) if text is None else text
        if self.lines:
            write_line(body)
        else:
            sys.stdout.write(("[\n" if self.count == 0 else ",\n") + body)
        self.count += 1

    def __exit__(self, kind: Any, *_: Any) -> None:
        if self.lines or kind is not None:  # a failure midway leaves what was written, unclosed
            return
        write_line("[]" if self.count == 0 else "\n]")


def write_json(objects: Iterable[Any], fmt: str) -> None:
    """`objects` as one JSON document (a list) or as JSON Lines."""
    with JsonOut(fmt) as out:
        for obj in objects:
            out.write(obj)


def flat(obj: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A mapping with nested mappings' keys joined by '.' and lists as 'a|b' (CSV cells)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat(value, f"{name}."))
        elif isinstance(value, (list, tuple, set, frozenset)):
            out[name] = "|".join(_cell(v) for v in value)
        else:
            out[name] = value
    return out


def _cell(value: Any) -> str:
    value = jsonable(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else (json_text(value) if isinstance(value, (list, dict)) else str(value))


def write_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> None:
    """Rows (mappings, flattened with `flat`) as CSV with a header of every column met."""
    flats = [flat(row) for row in rows]
    if columns is None:
        columns = []
        for row in flats:
            columns.extend(k for k in row if k not in columns)
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(columns)
    for row in flats:
        writer.writerow([_cell(row.get(c)) for c in columns])


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


def context_lines(context: Mapping[str, Sequence[Any]], ranges: Mapping[str, str] | None = None) -> list[Text]:
    """One line per attribute: `job_title ∈ {Nurse, Professor}`; an ordinal attribute in
    `ranges` as its one range of bins, `age ∈ [18, 35)`."""
    width = max((len(a) for a in context), default=0)
    ranges = ranges or {}
    lines = []
    for attribute, values in context.items():
        line = Text("  ")
        line.append(attribute.ljust(width), style="bold")
        shown = ranges[attribute] if attribute in ranges else "{" + ", ".join(show_value(v) for v in values) + "}"
        line.append(" ∈ " + shown)
        lines.append(line)
    return lines


# ---- explanations ------------------------------------------------------------------------

def print_explanations(explanations: Sequence[Any], fmt: str, console: Console | None = None) -> None:
    """Released explanations: a text block each, one JSON list, JSON Lines, CSV or their SQL."""
    if fmt in (JSON, JSONL):
        write_json((e.as_dict() for e in explanations), fmt)
        return
    if fmt == CSV:
        write_csv([e.as_dict() for e in explanations])
        return
    if fmt == SQL:
        for e in explanations:
            if e.released:
                write_line(e.explanation_sql.rstrip().rstrip(";") + ";")
            else:  # a comment: the output still runs as SQL
                write_line("-- " + " ".join(not_released_line(e).split()))
        return
    console = console or stdout_console()
    for i, e in enumerate(explanations):
        if i:
            console.print()
        if e.released:
            _explanation_block(console, e, i + 1, len(explanations))
        else:
            head = Text(f"{i + 1} of {len(explanations)}: " if len(explanations) > 1 else "", style="bold")
            head.append(not_released_line(e), style="bold red")
            console.print(head)
    if explanations:
        console.print(Text(GLOSSARY_POINTER, style="dim"))


def not_released_line(failure: Any) -> str:
    """A record of a batch that was not released, in one line: its key, why, and its ε."""
    cost = f"ε = {failure.epsilon:g} " + ("stays charged" if failure.charged else "given back: not charged")
    return f"{failure.key}: not released ({failure.reason}): {failure.message} ({cost})"


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
    for line in context_lines(e.context, e.ranges):
        console.print(line)
    _field(console, "explanation", e.explanation_sql)
    _field(console, "privacy", e.privacy_summary)
    _field(console, "search", f"{e.search}, {e.samples} samples; verifier {e.verifier}; utility {e.utility}")
    _field(console, "start", start_words(e.start_source))
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
        shown = owner.pop("certificate", None)
        console.print(Text("  NOT FOR RELEASE — owner diagnostics", style="bold red"))
        console.print(Text("    " + ", ".join(f"{k.replace('_', ' ')} {number(v)}" for k, v in owner.items())))
        if shown is not None:
            console.print(Text(f"    verdict: {certificate_words(shown)}"))
        for note in notes:
            console.print(Text(f"    note: {note}"))


# ---- anomaly answers ---------------------------------------------------------------------

def print_answers(answers: Sequence[Any], fmt: str, owner_view: bool, console: Console | None = None) -> None:
    """Anomaly answers: a JSON list, JSON Lines, CSV, or one line per record — which record, and
    the answer in words — with its details indented below it (owner fields marked)."""
    if fmt in (JSON, JSONL):
        write_json((answer.as_dict(owner_view) for answer in answers), fmt)
        return
    if fmt == CSV:
        write_csv([answer.as_dict(owner_view) for answer in answers])
        return
    console = console or stdout_console()
    for i, answer in enumerate(answers[:TABLE_ROWS]):
        head = Text(f"{i + 1} of {len(answers)}: " if len(answers) > 1 else "", style="bold")
        head.append(f"{record_text(answer.record)}: ", style="bold")
        head.append(answer.summary, style="bold")
        console.print(head)
        _field(console, "privacy", answer.privacy_summary)
        _field(console, "test", f"β = {answer.beta:g}, r = {answer.radius:g}, norm {answer.norm}")
        units = ", ".join(answer.units) + (f" (dataset {answer.dataset})" if answer.dataset else "")
        _field(console, "charged to", units or "—")
        if answer.seeded:
            console.print(Text("  seeded: not for real releases", style="bold yellow"))
        if owner_view and answer.owner is not None:
            console.print(Text("  NOT FOR RELEASE — owner: " + ", ".join(
                f"{k.replace('_', ' ')} {show_value(v)}" for k, v in answer.owner.items() if k != "not_for_release"), style="red"))
    if len(answers) > TABLE_ROWS:
        console.print(Text(f"… {len(answers) - TABLE_ROWS:,} more answers (use --format json for all)", style="dim"))
    if len(answers) > 1:
        total = round_epsilon(sum(float(a.epsilon or 0) for a in answers))
        console.print(Text(f"{len(answers)} answers, total ε = {total:.6g} (sequential composition)", style="dim"))


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
    console: Console, columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None
) -> None:
    rows = list(rows)  # any iterable of rows: shown up to TABLE_ROWS, the rest counted
    table = Table(title=Text(title) if title else None, title_justify="left")
    for column in columns:
        table.add_column(Text(str(column)))
    for row in rows[:TABLE_ROWS]:
        table.add_row(*[Text(show_value(v) if not isinstance(v, str) else v) for v in row])
    console.print(table)
    if len(rows) > TABLE_ROWS:
        console.print(Text(f"… {len(rows) - TABLE_ROWS:,} more rows (use --format json for all)", style="dim"))


def draw_budget(rows: Sequence[Mapping[str, Any]], path: Any) -> None:
    """`budget status --plot FILE`: a bar per unit and notion, ε spent against its limit."""
    from pcor_sql.cli.served_files import target
    from pcor_sql.plots import budget_figure

    budget_figure([dict(r) for r in rows], target(path))  # in the service: for the caller to write
