"""Measuring instruments: peak memory of a fresh process is its own, timings keep every sample."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.measure import Timing, machine, machine_line, peak_rss_bytes, percentile, time_repeats

ROOT = str(Path(__file__).resolve().parents[2])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="VmHWM needs Linux /proc")
def test_child_peak_memory_is_not_the_parents():
    # getrusage's ru_maxrss survives fork + exec on Linux: a child of a 300 MB parent would say
    # 300 MB. The bench's 10M-row figure comes from such a child, so it must not.
    ballast = np.ones(300 * 2**20 // 8)
    assert peak_rss_bytes() > 300 * 2**20
    code = "from benchmarks.measure import peak_rss_bytes; print(peak_rss_bytes())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"}).stdout
    assert int(out) < 200 * 2**20
    del ballast


def test_timing_statistics_and_repeats():
    t = Timing((0.3, 0.1, 0.2), stopped=1)
    assert (t.median, t.min, t.max, t.n, t.lower_bound) == (0.2, 0.1, 0.3, 3, True)
    assert t.as_dict()["samples_s"] == [0.3, 0.1, 0.2]
    timing, results = time_repeats(lambda i: i * i, 4)
    assert results == [0, 1, 4, 9] and timing.n == 4 and timing.min >= 0


def test_percentile_matches_numpy():
    xs = list(np.random.default_rng(0).uniform(size=37))
    for q in (0, 10, 50, 90, 100):
        assert percentile(xs, q) == pytest.approx(np.percentile(xs, q))


def test_machine_description():
    info = machine()
    assert info["cpu_count"] >= 1 and info["versions"]["duckdb"]
    assert "cores" in machine_line(info) and "duckdb" in machine_line(info)
