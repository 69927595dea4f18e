"""The README's and the docs pages' examples run as written (on the bundled data), and CI runs
the README's own test command."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The pages whose examples run, in the order their Python blocks share one namespace: a page's
#: examples may use what the README's made (`con`, the bundled tables loaded on it).
PAGES = (README, *(ROOT / "docs" / name for name in
                   ("python.md", "ledger.md", "cli.md", "service.md", "owner-plane.md", "performance.md")))


def python_blocks(page: pathlib.Path = README) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)


def test_the_python_examples_run_in_order(capsys):
    assert len(python_blocks()) >= 1 and sum(len(python_blocks(p)) for p in PAGES) >= 4
    namespace: dict = {}
    for page in PAGES:
        for block in python_blocks(page):
            exec(compile(block, str(page), "exec"), namespace)  # noqa: S102 — our own documentation
    assert namespace["explanation"].context and namespace["contexts"][0].size > 0
    assert "valid contexts of" in capsys.readouterr().out


def shell_blocks(page: pathlib.Path = README) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)


@pytest.mark.slow  # a process per command: ~60 s
def test_the_shell_examples_run_with_pcor_sql_as_installed(tmp_path):
    """Each page's ```sh blocks that run pcor-sql run in bash, in order, in an empty folder of
    that page's own, with `pcor-sql` on PATH (this checkout's); `pip install ... &&` prefixes are
    dropped, and blocks that run pytest or the benchmarks, or name a Spark cluster, are left to
    their own tests."""
    import os
    import subprocess
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "pcor-sql"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pcor_sql "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PCOR_SQL_LEDGER": str(tmp_path / "user-ledger.duckdb")}  # a fresh machine's per-user ledger
    ran: dict[str, int] = {}
    for page in PAGES:
        work = tmp_path / page.stem
        work.mkdir()
        for block in shell_blocks(page):
            if "pcor-sql " not in block or "pytest" in block or "python -m benchmarks" in block:
                continue
            if "--engine spark" in block:  # names a cluster: tests/backends/test_spark.py runs the CLI on Spark
                continue
            script = re.sub(r"^pip install \S+ && ", "", block, flags=re.MULTILINE)
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, (page.name, script, done.stderr[-2000:])
            assert "Traceback" not in done.stderr
            ran[page.name] = ran.get(page.name, 0) + 1
    assert ran.get("README.md", 0) >= 3 and ran.get("cli.md", 0) >= 2, ran
    assert (tmp_path / "README" / "salaries.duckdb").exists()  # the walkthrough's file, then served
    assert len((tmp_path / "cli" / "explanations.jsonl").read_text(encoding="utf-8").splitlines()) == 3


def readme_commands() -> list[str]:
    """The Set-up's two commands: the first ```sh blocks of the section."""
    set_up = README.read_text(encoding="utf-8").split("## Set-up")[1].split("\n## ")[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", set_up, re.DOTALL)]


def test_the_set_up_has_two_commands_one_the_main_job_one_the_tests():
    main_job, tests = readme_commands()[:2]
    assert main_job.startswith("pip install . && pcor-sql explain-outlier ")
    assert tests.startswith("pip install '.[") and tests.endswith("&& python -m pytest -q")


def test_ci_runs_the_readmes_test_command_verbatim():
    """`.ci/run` is CI on a fresh machine: it must run the very command the README gives."""
    tests = readme_commands()[1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci.splitlines(), (tests, ci)
