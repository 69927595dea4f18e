"""The wheel carries what the package reads at run time: sql/ and datasets/ (a top-level folder
is not in a wheel unless the build says so)."""

import pathlib
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_wheel_ships_sql_and_datasets(tmp_path):
    wheel = pytest.importorskip("hatchling.builders.wheel")
    path = next(iter(wheel.WheelBuilder(str(ROOT)).build(directory=str(tmp_path), versions=["standard"])))
    names = set(zipfile.ZipFile(path).namelist())
    assert "pcor_sql/_shipped/sql/ledger.sql" in names
    for name in ("salaries", "homicides", "diamonds"):
        assert f"pcor_sql/_shipped/datasets/{name}.parquet" in names
    assert "pcor_sql/_shipped/datasets/domains.json" in names
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry and "pcor-sql = pcor_sql.cli.main:run" in zipfile.ZipFile(path).read(entry[0]).decode()
