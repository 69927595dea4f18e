"""The mechanisms and the counting stay pure (numpy only), so they can be read and checked
without a database; only `points` and `batch` talk to DuckDB."""

import pytest

from tests import test_import_boundaries as boundaries

PURE = ("mechanisms.py", "balls.py", "strips.py")


@pytest.mark.parametrize("name", PURE)
def test_pure_modules_import_no_database(name):
    path = boundaries.PKG / "anomaly" / name
    forbidden = ("duckdb", "pyarrow", "pcor_sql.engine", "pcor_sql.frontend", "pcor_sql.cli", "pcor_sql.anomaly.points")
    bad = [m for m in boundaries.imported_modules(path) if any(m == f or m.startswith(f + ".") for f in forbidden)]
    assert not bad, (name, bad)
