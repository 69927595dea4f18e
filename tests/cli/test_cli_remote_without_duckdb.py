"""`pcor-sql remote ...` where DuckDB cannot be imported: an analyst needs no data and no DuckDB.
The command line runs through typer's CliRunner in a subprocess whose import system refuses
duckdb (the block of tests/client), against the real service on 127.0.0.1 in this process."""

from __future__ import annotations

import json

import pytest

from tests.client.served_dataset import OUTLIERS, served_dataset
from tests.client.test_client_without_duckdb import run

CLI = """
    import json
    from typer.testing import CliRunner
    from pcor_sql.cli.main import app

    def remote(*args):
        result = CliRunner().invoke(app, ["remote", *args, "--url", {url!r}], env={{"PCOR_SQL_TOKEN": {token!r}}})
        return {{"code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr}}

    out = {{
        "me": remote("me", "--format", "json"),
        "explain": remote("explain-outlier", "staff", "{key}", "--epsilon", "0.1", "--verifier", "grubbs",
                          "--format", "json"),
        "refused": remote("explain-outlier", "staff", "100000", "--epsilon", "0.1"),
    }}
    shown = CliRunner().invoke(app, ["remote", "--help"])
    out["help"] = {{"code": shown.exit_code, "stdout": shown.stdout, "stderr": shown.stderr}}
    out["duckdb"] = sorted(m for m in sys.modules if m.split(".")[0] == "duckdb")
    print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with served_dataset(tmp_path_factory.mktemp("remote-no-duckdb") / "staff.duckdb", processes=False) as s:
        yield s


def test_the_command_line_imports_without_duckdb():
    done = run("import pcor_sql.cli.main; assert 'duckdb' not in sys.modules")
    assert done.returncode == 0, done.stderr


def test_remote_commands_run_without_duckdb(served):
    done = run(CLI.format(url=served.url, token=served.tokens["alice"], key=OUTLIERS[0]))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["duckdb"] == []
    assert out["me"]["code"] == 0 and json.loads(out["me"]["stdout"])["analyst"] == "alice", out["me"]
    assert out["explain"]["code"] == 0, out["explain"]
    assert json.loads(out["explain"]["stdout"])["key"] == OUTLIERS[0]
    assert out["refused"]["code"] == 2 and "releasable" in out["refused"]["stderr"], out["refused"]
    assert out["help"]["code"] == 0 and "explain-outlier" in out["help"]["stdout"]
