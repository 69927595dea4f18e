"""`python -m benchmarks ledger-lock`: the write lock's time per request with group commit and
without, at a tiny size."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_both_modes_are_measured_and_groups_of_one_mean_one_commit_each():
    done = subprocess.run([sys.executable, "-m", "benchmarks", "ledger-lock", "--rows", "3000", "--requests", "6",
                           "--rounds", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    alone = re.search(r"alone round 0: .*COMMITs by transactions \{(.*)\}", done.stdout)
    group = re.search(r"group round 0: .*COMMITs by transactions \{(.*)\}", done.stdout)
    assert alone and group, done.stdout
    assert alone.group(1) == "1: 12"  # 6 reservations and 6 outcomes, each its own COMMIT
    carried = sum(int(n) * int(c) for n, c in re.findall(r"(\d+): (\d+)", group.group(1)))
    assert carried == 12
    assert re.search(r"group median: lock held [\d.]+ ms a request, CPU [\d.]+ ms", done.stdout)
