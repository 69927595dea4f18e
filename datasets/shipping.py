"""Writing the shipped dataset files: shared by the generators and the diamonds converter."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def write_parquet(table: pa.Table, path: Path) -> None:
    """zstd Parquet: dictionaries for the string columns, delta encoding for the ids (a
    dictionary of unique ids would be most of the file), row groups DuckDB reads in parallel."""
    strings = [f.name for f in table.schema if pa.types.is_string(f.type)]
    pq.write_table(
        table,
        path,
        compression="zstd",
        compression_level=19,
        use_dictionary=strings,
        column_encoding={"id": "DELTA_BINARY_PACKED"},
        row_group_size=32_768,
    )


def update_json(path: Path, key: str, value) -> None:
    """Set one dataset's entry in a shared JSON file, keeping the other datasets' entries."""
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data[key] = value
    order = ["salaries", "homicides", "diamonds"]
    ordered = {k: data[k] for k in sorted(data, key=lambda k: (order.index(k) if k in order else len(order), k))}
    path.write_text(json.dumps(ordered, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def ship(here: Path, name: str, table: pa.Table, domains: dict, planted: list) -> None:
    """Write one generated dataset: its Parquet file and its entries in the shared JSON files."""
    write_parquet(table, here / f"{name}.parquet")
    update_json(here / "domains.json", name, domains)
    update_json(here / "planted_outliers.json", name, planted)
    size = (here / f"{name}.parquet").stat().st_size
    print(f"wrote {name}.parquet: {table.num_rows} rows, {size:,} bytes; {len(planted)} planted outliers")
