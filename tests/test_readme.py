"""The README's Python examples run as written (on the bundled data)."""

from __future__ import annotations

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def test_the_python_examples_run_in_order(capsys):
    blocks = python_blocks()
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 — our own documentation
    assert namespace["explanation"].context and namespace["contexts"][0].size > 0
    assert "valid contexts of" in capsys.readouterr().out


def shell_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


@pytest.mark.slow  # a process per command: ~25 s
def test_the_shell_examples_run_with_pcor_sql_as_installed(tmp_path):
    """Each ```sh block that runs pcor-sql runs in bash, in order, in an empty folder, with
    `pcor-sql` on PATH (this checkout's); `pip install ... &&` prefixes are dropped, and blocks
    that run pytest or the benchmarks, or name a Spark cluster, are left to their own tests."""
    import os
    import subprocess
    import sys

    root = README.parent
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "pcor-sql"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pcor_sql "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
           "PCOR_SQL_LEDGER": str(tmp_path / "user-ledger.duckdb")}  # a fresh machine's per-user ledger
    work = tmp_path / "work"
    work.mkdir()
    ran = 0
    for block in shell_blocks():
        if "pcor-sql " not in block or "pytest" in block or "python -m benchmarks" in block:
            continue
        if "--engine spark" in block:  # names a cluster and its data: tests/backends/test_spark.py runs the CLI on Spark
            continue
        script = re.sub(r"^pip install \S+ && ", "", block, flags=re.MULTILINE)
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (script, done.stderr[-2000:])
        assert "Traceback" not in done.stderr
        ran += 1
    assert ran >= 2
    assert len((work / "explanations.jsonl").read_text(encoding="utf-8").splitlines()) == 3
