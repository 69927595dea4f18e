"""The README's "Serving analysts" runs as written: the owner's commands (bash, `pcor-sql` on
PATH), then the analyst's curl and Python examples against a live server on the file they made
(the README's port 8000 replaced by the test server's free port)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import duckdb
import pytest

import pcor_sql
import pcor_sql.service
from tests.service.live_server import live_server

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
README_URL = "http://127.0.0.1:8000"


def section() -> str:
    text = README.read_text(encoding="utf-8")
    return text[text.index("## Serving analysts"):text.index("\n## ", text.index("## Serving analysts") + 5)]


def blocks(fence: str) -> list[str]:
    return re.findall(rf"```{fence}\n(.*?)```", section(), re.DOTALL)


def documents(text: str) -> list:
    """The JSON documents curl printed one after another (without newlines between them)."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while i < len(text.strip()):
        doc, i = decoder.raw_decode(text, i)
        out.append(doc)
        while i < len(text) and text[i].isspace():
            i += 1
    return out


def bash(script: str, cwd: pathlib.Path, env: dict[str, str]) -> str:
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, (script, done.stderr[-2000:])
    return done.stdout


@pytest.mark.slow  # a process per owner command: ~10 s
def test_the_serving_analysts_examples_run_against_a_live_server(tmp_path):
    if not hasattr(pcor_sql, "connect"):
        pytest.skip("pcor_sql.connect (the analyst's client) is not in this build")
    [owner_commands] = blocks("sh")
    serve, curl = blocks("bash")
    [client] = blocks("py")
    assert serve.startswith("pcor-sql serve --db salaries.duckdb")
    root = README.parent
    shim = tmp_path / "bin" / "pcor-sql"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pcor_sql "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    bash("pcor-sql examples export salaries salaries.duckdb --format duckdb\n"
         "pcor-sql budget set-limit salaries 2.0 --db salaries.duckdb", tmp_path, env)  # as "A scripted report"
    bash(owner_commands, tmp_path, env)
    token = (tmp_path / "alice.token").read_text(encoding="utf-8").strip()
    con = duckdb.connect(str(tmp_path / "salaries.duckdb"))
    owner = pcor_sql.Owner(con, warn=lambda message: None)
    with live_server(pcor_sql.service.app(owner)) as url:
        out = bash(curl.replace(README_URL, url), tmp_path, env)
        datasets, explained = documents(out)
        assert [d["name"] for d in datasets["datasets"]] == ["payroll"]
        assert explained["results"][0]["key"] == 42 and explained["results"][0]["context"]
        namespace: dict = {}
        os.environ["PCOR_SQL_TOKEN"] = token
        try:
            exec(compile(client.replace(README_URL, url), str(README), "exec"), namespace)  # noqa: S102 — our docs
        finally:
            del os.environ["PCOR_SQL_TOKEN"]
    assert owner.spent("payroll") == pytest.approx(0.4)  # curl's 0.2 and Python's 0.2
    con.close()
