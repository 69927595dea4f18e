"""One real process: `python -m pcor_sql` as a user runs it, on a fresh in-memory database."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_python_dash_m_explains_a_planted_outlier():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pcor_sql", "explain-outlier", "SELECT salary FROM salaries WHERE id = 42",
         "--verifier", "grubbs", "--seed", "1", "--ledger", ":memory:", "--format", "json"],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    e = json.loads(lines[0])
    assert e["record"]["id"] == 42 and e["epsilon"] == 0.2 and e["seeded"] is True
    assert e["explanation_sql"].startswith("SELECT salary FROM salaries WHERE")
    assert done.stderr.splitlines() == [
        "warning: the budget ledger is in memory and is lost when the process ends — keep it in a file:"
        " ledger='FILE' in Python, --ledger FILE (or --db FILE) on the CLI",
        "warning: seeded run: the output is a deterministic function of the data — not private, never release it",
    ]
