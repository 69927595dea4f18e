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
         "--verifier", "grubbs", "--seed", "1", "--ledger", ":memory:", "--format", "jsonl"],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    e = json.loads(lines[0])
    assert e["record"]["id"] == 42 and e["epsilon"] == 0.2 and e["seeded"] is True
    assert e["explanation_sql"].startswith("SELECT salary FROM salaries WHERE")
    # The first run on a machine also says it compiles (once, into numba's cache): not this test's point.
    assert [line for line in done.stderr.splitlines() if "compiling the validity checks" not in line] == [
        "warning: the budget ledger is in memory and is lost when the process ends — keep it in a file:"
        " ledger='FILE' in Python, --ledger FILE (or --db FILE) on the CLI",
        "warning: seeded run: the output is a deterministic function of the data — not private, never release it",
    ]


def _run_with_terminal_stderr(*args: str) -> tuple[subprocess.CompletedProcess, str]:
    """Run `python -m pcor_sql ARGS` with stdout a pipe and stderr a terminal (a pty)."""
    import pty
    import select

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "120", "TERM": "xterm"}
    import threading

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "pcor_sql", *args], stdout=subprocess.PIPE, stderr=slave,
                            env=env, cwd=ROOT)
    os.close(slave)
    chunks: list[bytes] = []  # stdout is drained meanwhile: a full pipe would block the child
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=120)
    reader.join(timeout=60)
    out = b"".join(chunks).decode()
    os.close(master)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, ""), seen.decode(errors="replace")


def test_progress_shows_on_a_terminal_and_never_in_the_json():
    done, terminal = _run_with_terminal_stderr(
        "explain-outlier", "SELECT salary FROM salaries WHERE id IN (42, 171, 1777)", "--max-records", "3", "--verifier", "grubbs",
        "--seed", "1", "--ledger", ":memory:", "--format", "jsonl",
    )
    assert done.returncode == 0, terminal
    assert [json.loads(line)["record"]["id"] for line in done.stdout.splitlines()] == [42, 171, 1777]
    # The bar reached the terminal, with the batch's count (a short phase may pass between two
    # refreshes, so only the long one is looked for).
    assert "releasing records" in terminal and "3/3" in terminal, terminal[-2000:]
    assert "warning: the budget ledger is in memory" in terminal


def test_coe_lines_stay_on_stdout_while_the_bar_runs():
    """A bar on the terminal while JSON goes down a pipe: every line reaches the pipe."""
    done, terminal = _run_with_terminal_stderr(
        "coe", "SELECT salary FROM salaries WHERE id = 42", "--by", "job_title,year", "--verifier", "grubbs",
        "--format", "jsonl",
    )
    assert done.returncode == 0, terminal
    lines = done.stdout.splitlines()
    assert len(lines) > 1000 and all(json.loads(line)["not_for_release"] for line in lines)
    assert '"not_for_release"' not in terminal
    assert f"{len(lines):,} valid of" in terminal
