"""The wheel carries what the package reads at run time: sql/ and datasets/ (a top-level folder
is not in a wheel unless the build says so), and not the benchmarks, which run from a checkout."""

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
    # pcor_sql.connect and pcor_sql.errors import the light client's one copy (client/).
    assert {"pcor_sql_client/__init__.py", "pcor_sql_client/errors.py", "pcor_sql_client/transport.py"} <= names
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry and "pcor-sql = pcor_sql.cli.main:run" in zipfile.ZipFile(path).read(entry[0]).decode()
    assert not [n for n in names if n.startswith(("benchmarks/", "pcor_sql/bench/"))]
    assert "pcor_sql/engine/anomaly_evidence.py" not in names
    assert not {"pcor_sql/cli/bench.py", "pcor_sql/cli/reproduce.py", "pcor_sql/cli/evidence.py"} & names


def test_the_readme_test_command_prints_the_summary_line():
    """`python -m pytest -q` must end with "N passed": a `-q` in addopts as well makes it -qq,
    which prints no summary (DESIGN.md §5 "Interfaces users rely on")."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    root = ROOT
    options = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    addopts = options.get("addopts", "")
    addopts = addopts.split() if isinstance(addopts, str) else list(addopts)
    assert not [a for a in addopts if a.startswith("-q") or a == "--quiet"], addopts
    assert "python -m pytest -q" in (root / "README.md").read_text(encoding="utf-8")


def test_every_run_logs_its_slowest_tests():
    """CI's log names the slowest tests (pytest's --durations in addopts), so the suite's time is
    measured where it is spent, not guessed."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    addopts = options.get("addopts", "")
    addopts = addopts.split() if isinstance(addopts, str) else list(addopts)
    counts = [int(a.split("=", 1)[1]) for a in addopts if a.startswith("--durations=")]
    assert counts and counts[-1] >= 10, addopts
