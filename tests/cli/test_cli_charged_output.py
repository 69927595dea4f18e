"""A release that is charged is shown (DESIGN.md §6 "Reserve, then read"): every output target is checked before
the reservation (a picture path, a closed stdout), and what fails after it (a full disk) still
leaves the release in view — printed first, or written on stderr — then the error."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.cli.cli_helpers import FAST, QUERY, assert_error, invoke

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _history(ledger: pathlib.Path) -> list[dict]:
    done = invoke("budget", "history", "--ledger", str(ledger), "--format", "json")
    assert done.exit_code == 0, done.stderr
    return json.loads(done.stdout)


def _run(args: list[str], shell_redirect: str) -> subprocess.CompletedProcess:
    """`python -m pcor_sql ARGS` in a real process whose stdout is `shell_redirect` (sh syntax)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = " ".join(["exec", sys.executable, "-m", "pcor_sql", *(f"'{a}'" for a in args), shell_redirect])
    return subprocess.run(["sh", "-c", command], stderr=subprocess.PIPE, text=True, env=env, timeout=300, cwd=ROOT)


@pytest.mark.parametrize("plot, needle", [
    ("no/such/dir/x.png", "does not exist"),
    ("x.xyz", "matplotlib does not write .xyz files"),
    (".", "is a directory"),
])
def test_a_picture_path_that_cannot_be_written_is_refused_before_the_charge(tmp_path, monkeypatch, plot, needle):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    ledger = tmp_path / "ledger.duckdb"
    done = invoke("explain-outlier", QUERY, *FAST, "--ledger", str(ledger), "--plot", plot)
    assert_error(done, needle, code=2)
    assert _history(ledger) == []


def test_a_closed_stdout_is_refused_before_the_charge(tmp_path):
    ledger = tmp_path / "ledger.duckdb"
    done = _run(["explain-outlier", QUERY, *FAST, "--ledger", str(ledger)], ">&-")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: standard output is closed, so a release would be charged")
    assert _history(ledger) == []


def test_a_full_disk_after_the_charge_still_shows_the_release_on_stderr(tmp_path):
    ledger = tmp_path / "ledger.duckdb"
    done = _run(["explain-outlier", QUERY, *FAST, "--ledger", str(ledger), "--format", "jsonl"], "> /dev/full")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    shown = json.loads(next(line for line in lines if line.startswith("{")))
    assert shown["record"]["id"] == 42 and shown["explanation_sql"].startswith("SELECT salary FROM salaries")
    assert lines[-1].startswith("error: the release was charged, but standard output failed (No space left on device)")
    assert "Exception ignored" not in done.stderr  # nothing left to fail at exit
    [row] = _history(ledger)
    assert row["outcome"] == "answered"


def test_a_write_that_fails_shows_the_release_then_the_error(tmp_path, monkeypatch):
    import pcor_sql.cli.render as render

    def full(text: str) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(render, "write_line", full)
    done = invoke("explain-outlier", QUERY, *FAST, "--ledger", str(tmp_path / "l.duckdb"), "--format", "jsonl")
    assert done.exit_code == 2
    first, last = done.stderr.splitlines()[-2:]
    assert json.loads(first)["record"]["id"] == 42
    assert last.startswith("error: the release was charged, but standard output failed (No space left on device)")


def test_a_picture_that_cannot_be_saved_comes_after_the_printed_release(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from pcor_sql.results import Explanation

    def full(self, path=None):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Explanation, "plot", full)
    ledger = tmp_path / "l.duckdb"
    done = invoke("explain-outlier", QUERY, *FAST, "--ledger", str(ledger), "--plot", str(tmp_path / "x.png"))
    assert done.exit_code == 2
    assert done.stdout.startswith("salary of the record where id = 42 is an outlier")
    assert done.stderr.splitlines()[-1].startswith(
        "error: the release above was charged and printed, but its picture")
    assert "No space left on device" in done.stderr
    assert [row["outcome"] for row in _history(ledger)] == ["answered"]
