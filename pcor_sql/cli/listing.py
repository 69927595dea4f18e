"""A listing command's output: one JSON object a line (`--format json`) or a table."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from pcor_sql.cli.console import stdout_console, write_line
from pcor_sql.cli.parameters import DataFormat
from pcor_sql.cli.render import json_text, print_table


def print_listing(
    fmt: DataFormat, records: Iterable[Mapping[str, Any]], columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """`records` as JSON lines, or `rows` under `columns` as a table. Only the one the format asks
    for is read, so generators keep the other from being built."""
    if fmt is DataFormat.json:
        for record in records:
            write_line(json_text(record))
        return
    print_table(stdout_console(), columns, list(rows))
