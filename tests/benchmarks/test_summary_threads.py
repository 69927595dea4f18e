"""`python -m benchmarks summary-threads` (DESIGN.md §10 "Building the summary"): a tiny run end to end prints the
old and new build's times at each thread count and that their outputs matched; a thread count
above the machine's cores is left out; a missing file is one line and exit 2."""

from __future__ import annotations

import os

from benchmarks import summary_threads
from benchmarks.scale_tables import ensure_table


def test_a_tiny_run_prints_one_row_per_thread_count(tmp_path, capsys):
    table = ensure_table(tmp_path, "base", 300_000, lambda _m: None)
    too_many = (os.cpu_count() or 1) + 1
    assert summary_threads.main([table["path"], "--repeats", "2", "--threads", f"1,2,{too_many}", "--phases"]) == 0
    out = capsys.readouterr().out
    assert "300,000 rows, 1,200 cells" in out and "outputs identical: yes" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    settings = ["1", "2"][: min(2, os.cpu_count() or 1)]
    # One row per setting in the old-against-new table, then one per setting in --phases' table.
    assert [r.split("|")[1].strip() for r in rows] == settings + settings
    assert all(r.count("×") == 1 for r in rows[: len(settings)]) and "new build by step" in out


def test_a_missing_file_is_one_line(tmp_path, capsys):
    assert summary_threads.main([str(tmp_path / "none.duckdb")]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
