"""The light analyst client (client/, `pcor-sql-client`): one copy of the client code, imported by
`pcor_sql.connect` and `pcor-sql remote`; its `pcor-sql-remote` runs with httpx alone (no DuckDB,
numba, numpy, typer or pcor_sql importable), takes the URL from $PCOR_SQL_URL, previews a cost,
passes --metric and shows a run of bins as one interval; a fresh venv with it is small."""

from __future__ import annotations

import ast
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import zipfile

import pytest

import pcor_sql
import pcor_sql.service
from tests.client.served_dataset import OUTLIERS, make_database, register
from tests.service.live_server import live_server

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLIENT = ROOT / "client"
HEAVY = ("duckdb", "numba", "numpy", "scipy", "pyarrow", "typer", "rich", "pcor_sql")

# A subprocess that sees only the client's sources, and whose import system refuses the rest.
BLOCKED = textwrap.dedent(f"""
    import sys
    sys.path.insert(0, {str(CLIENT)!r})

    class Heavy:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {HEAVY!r}:
                raise ImportError(name + " is blocked in this test")
            return None

    sys.meta_path.insert(0, Heavy())
""")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """staff (dept, year) and shifts, whose `hour` is binned: a release keeps a run of bins."""
    con = make_database(tmp_path_factory.mktemp("light") / "staff.duckdb")
    con.execute("CREATE TABLE shifts AS SELECT id, dept, (id * 7) % 24 AS hour, pay FROM staff")
    owner, tokens = register(con)
    owner.register("shifts", "shifts", key="id", metric="pay", by="dept,hour", bins={"hour": [0, 6, 9, 15, 20, 24]},
                   limit=100.0, releasable=list(OUTLIERS))
    try:
        with live_server(pcor_sql.service.app(owner, processes=False)) as url:
            yield url, tokens
    finally:
        con.close()


def light(served, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    url, tokens = served
    code = BLOCKED + "from pcor_sql_client.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    environment = {"PATH": os.environ.get("PATH", ""), "PCOR_SQL_URL": url, "PCOR_SQL_TOKEN": tokens["alice"],
                   **(env or {})}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60,
                          env=environment)


def test_one_copy_of_the_client():
    import pcor_sql_client
    import pcor_sql_client.cli

    from pcor_sql.cli import remote_commands

    assert pcor_sql.connect is pcor_sql_client.connect and pcor_sql.RemoteAnalyst is pcor_sql_client.RemoteAnalyst
    for name in ("UserError", "Refused", "BudgetExceeded", "RequestFailed", "PcorError"):
        assert getattr(pcor_sql.errors, name) is getattr(pcor_sql_client.errors, name)
    # `pcor-sql remote` declares nothing of its own: it runs the light client's command line.
    assert remote_commands.client_main is pcor_sql_client.cli.main
    assert not (ROOT / "pcor_sql" / "client" / "transport.py").exists()


def test_a_checkout_uses_its_own_client_over_an_installed_copy(tmp_path):
    """An editable install copies the client into site-packages; pcor_sql run from the checkout
    still imports the checkout's client (one copy in use, never a stale one)."""
    stale = tmp_path / "pcor_sql_client"
    stale.mkdir()
    (stale / "__init__.py").write_text("raise ImportError('the stale copy was imported')\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", "import pcor_sql.errors, pcor_sql_client; print(pcor_sql_client.__file__)"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])})
    assert done.returncode == 0, done.stderr
    assert pathlib.Path(done.stdout.strip()) == CLIENT / "pcor_sql_client" / "__init__.py"


def test_the_light_client_imports_nothing_of_pcor_sql():
    for path in (CLIENT / "pcor_sql_client").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not [n for n in names if n.split(".")[0] in HEAVY], (path.name, names)


def test_its_distribution_needs_httpx_only(tmp_path):
    wheel = pytest.importorskip("hatchling.builders.wheel")
    built = next(iter(wheel.WheelBuilder(str(CLIENT)).build(directory=str(tmp_path), versions=["standard"])))
    archive = zipfile.ZipFile(built)
    names = archive.namelist()
    meta = archive.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert re.findall(r"^Requires-Dist: (.*)$", meta, re.M) == ["httpx>=0.27"]
    assert "Name: pcor-sql-client" in meta
    entry = archive.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "pcor-sql-remote = pcor_sql_client.cli:run" in entry
    assert {"pcor_sql_client/cli.py", "pcor_sql_client/transport.py"} <= set(names)


def test_pcor_sql_remote_runs_with_httpx_alone(served):
    datasets = light(served, "datasets", "--format", "json")
    assert datasets.returncode == 0, datasets.stderr
    assert {json.loads(line)["name"] for line in datasets.stdout.splitlines()} == {"staff", "tagged", "shifts"}
    [cost] = map(json.loads, light(served, "cost", "staff", "7", "31", "--epsilon", "0.1", "--format", "json")
                 .stdout.splitlines())
    assert cost["count"] == 2 and cost["total"] == pytest.approx(0.2)
    before = json.loads(light(served, "me", "--format", "json").stdout)
    explained = light(served, "explain-outlier", "staff", str(OUTLIERS[0]), "--epsilon", "0.1", "--metric", "pay",
                      "--verifier", "grubbs", "--format", "json")
    assert explained.returncode == 0, explained.stderr
    [item] = map(json.loads, explained.stdout.splitlines())
    assert item["key"] == OUTLIERS[0] and item["metric"] == "pay"
    assert json.loads(light(served, "me", "--format", "json").stdout) != before  # charged once, after the preview
    history = light(served, "history")
    assert history.returncode == 0 and "ocdp" in history.stdout


def test_a_statement_runs_as_the_request_it_spells(served):
    text = f"IDENTIFY ANOMALY SELECT pay FROM staff WHERE id IN ({OUTLIERS[2]}, {OUTLIERS[0]}) " \
           "WITH (beta = 2, radius = 5, epsilon = 0.1)"
    answered = light(served, "sql", text, "--format", "json")
    assert answered.returncode == 0, answered.stderr
    assert [json.loads(line)["key"] for line in answered.stdout.splitlines()] == [OUTLIERS[2], OUTLIERS[0]]
    explained = light(served, "sql", f"EXPLAIN OUTLIER SELECT pay FROM staff WHERE id = {OUTLIERS[1]} USING grubbs "
                                     "WITH (epsilon = 0.1)")
    assert explained.returncode == 0 and "pay" in explained.stdout, explained.stderr
    refused = light(served, "sql", "SELECT * FROM staff")
    assert refused.returncode == 2 and refused.stderr.startswith("error: ") and refused.stderr.count("\n") == 1


def test_a_run_of_bins_is_one_interval(served):
    shown = light(served, "explain-outlier", "shifts", str(OUTLIERS[1]), "--epsilon", "0.1", "--verifier", "grubbs")
    assert shown.returncode == 0, shown.stderr
    [hour] = [line for line in shown.stdout.splitlines() if line.strip().startswith("hour")]
    assert re.fullmatch(r"\s*hour ∈ [\[(][^{},]+, [^{},]+[)\]]", hour), hour


def test_errors_are_one_line(served):
    no_url = light(served, "me", env={"PCOR_SQL_URL": ""})
    assert no_url.returncode == 2 and no_url.stderr.startswith("error: no service URL given"), no_url.stderr
    neither = light(served, "cost", "staff", "--epsilon", "0.1")
    assert neither.returncode == 2 and "keys" in neither.stderr and neither.stderr.count("\n") == 1
    bad_metric = light(served, "explain-outlier", "staff", "7", "--epsilon", "0.1", "--metric", "nope")
    assert bad_metric.returncode == 2 and bad_metric.stderr.startswith("error: ") and "Traceback" not in bad_metric.stderr


@pytest.mark.slow
def test_a_fresh_venv_with_the_client_is_small_and_has_no_duckdb(served, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", str(CLIENT)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    size = sum(p.stat().st_size for p in venv.rglob("*") if p.is_file() and not p.is_symlink())
    assert size <= 60 * 2**20, f"{size / 2**20:.1f} MB"
    probe = subprocess.run([str(python), "-c", "import importlib.util as u, pcor_sql_client.cli, sys; "
                            f"print([m for m in {HEAVY!r} if u.find_spec(m) or m in sys.modules])"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert probe.returncode == 0 and probe.stdout.strip() == "[]", (probe.stdout, probe.stderr)
    url, tokens = served
    shown = subprocess.run([str(venv / "bin" / "pcor-sql-remote"), "cost", "staff", "7", "--epsilon", "0.1",
                            "--metric", "pay"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                           env={"PCOR_SQL_URL": url, "PCOR_SQL_TOKEN": tokens["alice"], "PATH": "/usr/bin:/bin"})
    assert shown.returncode == 0 and "total" in shown.stdout, shown.stderr


def test_bin_labels_in_a_run_read_as_one_interval():
    from pcor_sql_client.text import context_lines

    lines = context_lines({"hour": ["[0, 6)", "[6, 9)", "[9, 15)"], "dept": ["a", "b"], "gap": ["[0, 6)", "[9, 15)"],
                           "age": ["(-inf, 2)", "[2, 5]"]})
    assert lines == ["  hour ∈ [0, 15)", "  dept ∈ {a, b}", "  gap  ∈ {[0, 6), [9, 15)}", "  age  ∈ (-inf, 5]"]
