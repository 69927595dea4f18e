"""`python -m benchmarks batch` (DESIGN.md §10): a tiny run end to end, its table's ratios, the memory
sampler's sums (a forked child's shared pages count once in PSS, per process in RSS), option errors."""

from __future__ import annotations

import os

import numpy as np

from benchmarks.batch import MemorySampler, table
from tests.benchmarks.app_helpers import assert_error, invoke as run


def test_the_sampler_counts_a_forked_childs_shared_pages_once_in_pss():
    shared = np.ones(64 * 2**20 // 8)  # 64 MiB, written before the fork: shared, not copied
    # The child lives until the parent has sampled it (a pipe, not a sleep: under load a child
    # that exits after a fixed time can be gone before the sample).
    read_end, write_end = os.pipe()
    with MemorySampler(every_s=0.01) as memory:
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            os.read(read_end, 1 + int(shared[0]) * 0)  # the shared array stays mapped until then
            os._exit(0)
        os.close(read_end)
        try:
            memory.sample()
        finally:
            os.close(write_end)  # the child's read returns: it exits
            os.waitpid(pid, 0)
    assert memory.peak_rss - memory.peak_pss > 32 * 2**20
    assert memory.cpu_s > 0  # what the sampling cost, saved beside the figures


def test_the_table_divides_by_one_worker_and_flags_outputs_that_differ():
    case = dict(rows=1000, records=4, summary_build_s=0.1, released=4, peak_pss_sum_bytes=2**20,
                peak_rss_sum_bytes=2**21, load=0.5)
    result = {"cases": [{**case, "workers": 1, "wall_s": 2.0, "outputs": ["a"]},
                        {**case, "workers": 2, "wall_s": 1.0, "outputs": ["a"]},
                        {**case, "workers": 3, "wall_s": 1.0, "outputs": ["b"]}]}
    rows = table(result)[2:]
    assert "| 1.00× |" in rows[0] and "| 2.00× |" in rows[1] and "OUTPUTS DIFFER" in rows[2]
    assert "OUTPUTS DIFFER" not in rows[1]


def test_a_tiny_batch_runs_with_one_and_two_workers_and_the_outputs_agree(tmp_path):
    result = run("batch", "--rows", "3000", "--records", "3", "--workers", "1,2", "--workdir", str(tmp_path),
                 "--out-dir", str(tmp_path / "out"))
    assert result.exit_code == 0, result.stderr + result.stdout
    lines = [line for line in result.stdout.splitlines() if line.startswith("| 3,000 |")]
    assert len(lines) == 2 and "OUTPUTS DIFFER" not in result.stdout and "error" not in result.stdout
    assert (tmp_path / "out" / "batch.json").exists()


def test_a_bad_list_is_one_line(tmp_path):
    assert_error(run("batch", "--workers", "0,2", "--workdir", str(tmp_path)), "--workers")
