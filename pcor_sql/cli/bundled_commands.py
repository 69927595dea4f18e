"""`pcor-sql examples list|export`: the example datasets bundled with pcor-sql (salaries,
homicides, diamonds) — not the owner's registered datasets, which are `pcor-sql dataset`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pcor_sql.cli import parameters as o
from pcor_sql.cli.console import stdout_console
from pcor_sql.cli.render import print_table, write_json

app = typer.Typer(
    name="examples",
    help="The example datasets bundled with pcor-sql: list them, export them to Parquet or a DuckDB file "
    "(your own registered datasets are `pcor-sql dataset`).",
    short_help="The bundled example datasets: list, export.",
)


@app.command("list", short_help="The bundled datasets: metric, attributes, planted outliers.")
def list_(
    fmt: Annotated[o.ListFormat, o.choice(o.ListFormat, "--format", help="table, json (one document: a list) or jsonl (one "
                                                               "object per line).")] = o.ListFormat.table,
) -> None:
    """The bundled datasets with their metric, context attributes and planted outliers.

    \b
    Example:
        pcor-sql examples list --format json
    """
    from pcor_sql.api import bundled_datasets as list_datasets, planted_outliers

    infos = [(info, planted_outliers(info.name)) for info in list_datasets()]
    if fmt is not o.ListFormat.table:
        write_json(({
            "name": info.name, "rows": info.rows, "id_column": info.id_column, "metric": info.metric,
            "attributes": list(info.attributes), "planted_outliers": planted,
            "description": info.description, "source": info.source, "licence": info.licence,
        } for info, planted in infos), fmt.value)
        return
    rows = []
    for info, planted in infos:
        shown = ", ".join(str(i) for i in planted[:3]) + (", …" if len(planted) > 3 else "")
        rows.append([
            info.name, f"{info.rows:,}", info.metric, ", ".join(info.attributes),
            f"{len(planted)} ({shown})" if planted else "none", info.description,
        ])
    print_table(stdout_console(), ["name", "rows", "metric", "attributes", "planted outliers (ids)", "description"], rows)


@app.command("export", short_help="Write a bundled dataset to Parquet or a DuckDB file.")
def export(
    name: Annotated[str, typer.Argument(help="salaries, homicides or diamonds.", show_default=False)],
    path: Annotated[Path, typer.Argument(help="File to write.", show_default=False)],
    fmt: Annotated[
        o.ExportFormat,
        o.choice(o.ExportFormat, "--format", help="parquet (plain strings) or duckdb (a database file with the ENUM types)."),
    ] = o.ExportFormat.parquet,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing file.")] = False,
) -> None:
    """Write a bundled dataset to a Parquet file or a DuckDB database file.

    \b
    Example:
        pcor-sql examples export salaries salaries.duckdb --format duckdb
    """
    from pcor_sql.api import export_dataset

    written = export_dataset(None, name, path, fmt.value, overwrite=overwrite)
    stdout_console().print(f"wrote {name} to {written} ({fmt.value})", markup=False)
