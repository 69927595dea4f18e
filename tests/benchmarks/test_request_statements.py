"""`python -m benchmarks request-statements`: the statements of one analyst request, from
DuckDB's query log, at a tiny size."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "benchmarks", "request-statements", "--rows", "3000", "--requests", "3",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_request_and_an_admitted_one_are_counted():
    alone, admitted = run(), run("--busy")
    counts = [float(re.search(r"([\d.]+) statements a request", out).group(1)) for out in (alone, admitted)]
    # The charge's transaction and the outcome are always there; an admitted request reads more.
    assert "BEGIN TRANSACTION" in alone and "COMMIT" in alone and "… history" in alone
    assert 8 <= counts[0] < counts[1] <= 30, counts
