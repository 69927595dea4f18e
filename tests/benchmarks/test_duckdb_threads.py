"""`python -m benchmarks duckdb-threads` at a tiny size: every setting measured against the first,
and bad settings refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks", "duckdb-threads", "--rows", "3000", "--requests", "2",
                           "--repeats", "1", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_each_setting_is_measured_against_the_first():
    done = run("--threads", "1,2")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.split()[:1] in (["1"], ["2"])]
    assert [r[0] for r in rows] == ["1", "2"] and rows[0][2] == rows[0][4] == "1.00×"
    assert all(float(r[1]) > 0 and float(r[3]) > 0 for r in rows)


def test_a_bad_setting_is_one_line(capsys):
    # One through `python -m benchmarks` (exit status 2, no traceback); the other spellings reach
    # the same parser in this process (a process is ~1.5 s of imports before the parser runs).
    done = run("--threads", "two")
    assert done.returncode == 2 and "--threads takes positive integers" in done.stderr
    assert "Traceback" not in done.stderr
    from benchmarks.duckdb_threads import main

    for bad in ("0,2", "1,,2"):
        with pytest.raises(SystemExit) as exited:
            main(["--rows", "3000", "--requests", "2", "--repeats", "1", "--threads", bad])
        assert exited.value.code == 2 and "--threads takes positive integers" in capsys.readouterr().err, bad
