"""`explain-outlier --plot FILE.png` and `budget status --plot FILE.png` (DESIGN.md §5 "The explain-outlier command")."""

from __future__ import annotations

import json

import pytest
from cli_helpers import FAST, QUERY, invoke

matplotlib = pytest.importorskip("matplotlib")
import matplotlib.image  # noqa: E402


def _ok(*args):
    result = invoke(*args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def _pixels(path):
    assert path.exists()
    pixels = matplotlib.image.imread(str(path))
    assert pixels.shape[:2] == (500, 1000) and pixels[..., :3].std() > 0.05
    return pixels


def test_explain_outlier_draws_each_record(db, tmp_path):
    one = _ok("explain-outlier", QUERY, *FAST, "--db", str(db), "--plot", str(tmp_path / "e.png"), "--format", "json")
    assert len(json.loads(one.stdout)) == 1  # the release is printed as usual
    assert "NOT FOR RELEASE" in one.stderr
    _pixels(tmp_path / "e.png")
    _ok("explain-outlier", "SELECT salary FROM salaries WHERE id IN (42, 171)", "--max-records", "2", *FAST,
        "--db", str(db), "--plot", str(tmp_path / "two.png"))
    _pixels(tmp_path / "two-1.png")
    _pixels(tmp_path / "two-2.png")


def test_budget_status_draws_a_bar_per_unit(db, tmp_path):
    _ok("budget", "set-limit", "salaries", "2", "--db", str(db))
    _ok("explain-outlier", QUERY, *FAST, "--db", str(db), "--epsilon", "0.5")
    _ok("budget", "status", "--db", str(db), "--plot", str(tmp_path / "b.png"))
    _pixels(tmp_path / "b.png")


def test_a_missing_matplotlib_is_refused_before_anything_is_charged(db, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    result = invoke("explain-outlier", QUERY, *FAST, "--db", str(db), "--plot", str(tmp_path / "e.png"))
    assert result.exit_code != 0 and "pcor-sql[plot]" in result.stderr
    assert invoke("budget", "history", "--db", str(db), "--format", "json").stdout.strip() == "[]"
