"""Convert ggplot2's `diamonds` data (as shipped in the plotnine wheel) to `datasets/diamonds.parquet`.

Usage:
    python datasets/convert_diamonds.py                 # downloads plotnine 0.15.9 from PyPI with pip
    python datasets/convert_diamonds.py PATH            # PATH: that wheel, or its plotnine/data/diamonds.csv

The CSV's SHA-256 is checked against the one recorded in diamonds.SOURCE.md, so the shipped
file is always this exact data. The conversion keeps every row, column and value of the CSV,
in the CSV's order, and adds `id` (1..53,940, the CSV row number). It also writes the table's
declared domains to domains.json (the ggplot2 level orders, each extended by one grade that no
diamond in the data has) and an empty list to planted_outliers.json: this is real data, nothing
is planted.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

# The sibling shipping.py, found also when this file is loaded by path (as the tests do).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from shipping import update_json, write_parquet

NAME = "diamonds"
HERE = Path(__file__).resolve().parent
PLOTNINE = "plotnine==0.15.9"
MEMBER = "plotnine/data/diamonds.csv"
CSV_SHA256 = "9574730b03aba241d899c4a97511c5061b19358fab89510774fb6c24168345c4"
ROWS = 53_940

# Declared domains: ggplot2's factor levels in their order, plus one real grade absent from the
# data (GIA's "Poor" cut, "K" colour, "FL" — flawless — clarity), so a released context does not
# reveal which grades occur (PCOR paper, §4).
DOMAINS = {
    "cut": ["Poor", "Fair", "Good", "Very Good", "Premium", "Ideal"],
    "color": ["D", "E", "F", "G", "H", "I", "J", "K"],
    "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF", "FL"],
}


def csv_bytes(source: Path | None) -> bytes:
    """The diamonds CSV from a wheel, a CSV file, or (None) a fresh `pip download` of plotnine."""
    if source is None:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", PLOTNINE, "--no-deps", "--quiet", "-d", tmp], check=True
            )
            (wheel,) = Path(tmp).glob("plotnine-*.whl")
            return csv_bytes(wheel)
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as zf:
            return zf.read(MEMBER)
    return source.read_bytes()


def convert(raw: bytes) -> pa.Table:
    """The shipped table: `id` then the CSV's columns, with exact types."""
    digest = hashlib.sha256(raw).hexdigest()
    if digest != CSV_SHA256:
        raise SystemExit(f"diamonds.csv has SHA-256 {digest}, expected {CSV_SHA256}: not the recorded source data")
    types = {"carat": pa.float64(), "cut": pa.string(), "color": pa.string(), "clarity": pa.string(),
             "depth": pa.float64(), "table": pa.float64(), "price": pa.int32(),
             "x": pa.float64(), "y": pa.float64(), "z": pa.float64()}  # fmt: skip
    csv = pacsv.read_csv(io.BytesIO(raw), convert_options=pacsv.ConvertOptions(column_types=types))
    if csv.num_rows != ROWS or csv.column_names != list(types):
        raise SystemExit(f"unexpected shape: {csv.num_rows} rows, columns {csv.column_names}")
    for column, domain in DOMAINS.items():
        present = set(pc.unique(csv[column]).to_pylist())
        if not present < set(domain):
            raise SystemExit(f"{column}: values {sorted(present - set(domain))} outside the declared domain")
    ids = pa.array(range(1, csv.num_rows + 1), pa.int32())
    return csv.add_column(0, "id", ids)


def main(argv: list[str]) -> None:
    table = convert(csv_bytes(Path(argv[0]) if argv else None))
    path = HERE / f"{NAME}.parquet"
    write_parquet(table, path)
    update_json(HERE / "domains.json", NAME, DOMAINS)
    update_json(HERE / "planted_outliers.json", NAME, [])
    print(f"wrote {path.name}: {table.num_rows} rows, {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
