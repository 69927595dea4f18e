"""The owner's releases on a served file (DESIGN.md §9): `explain-outlier`, `identify-anomaly` and
`coe` while `pcor-sql serve --db FILE` runs are carried out by the service — the same output and
exit codes as a direct run on an unserved copy (seeded), charged to the served ledger and audited
with the command's name and target. What is the caller's stays the caller's: a `--plot` picture
is written by the CLI at the path as given; `--workers N` cannot cross and says so in one line
(which service, what to do); a bad option is one line, nothing charged. The service is a real
`pcor-sql serve` process, the commands go through the CLI (CliRunner), as from an owner's shell."""

from __future__ import annotations

import json
import shutil

import pytest

from pcor_sql.service import runtime_file
from tests.cli.cli_helpers import assert_error, invoke
from tests.cli.test_cli_served_commands import make_db, serve

pytestmark = pytest.mark.slow

QUERY = "SELECT pay FROM t WHERE id = 7"
SEEDED = ("--seed", "3", "--allow-seeded")
COMMANDS = {
    "explain-outlier": ("explain-outlier", QUERY, "--verifier", "grubbs", "--epsilon", "0.5", *SEEDED),
    "identify-anomaly": ("identify-anomaly", QUERY, "--beta", "5", "--radius", "1", "--epsilon", "0.25", *SEEDED),
    "coe": ("coe", QUERY, "--verifier", "grubbs"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A served file and an unserved copy made before the service started (the same data, the
    same ledger): each command runs on both, so their ledgers stay alike."""
    tmp_path = tmp_path_factory.mktemp("served-releases")
    path, copy = tmp_path / "pay.duckdb", tmp_path / "copy.duckdb"
    make_db(path)
    shutil.copy(path, copy)
    audit = tmp_path / "audit.jsonl"
    served = serve(path, "--workers", "1", "--audit-log", str(audit))
    try:
        assert runtime_file.live(path) is not None
        yield {"path": path, "copy": copy, "served": served, "audit": audit, "dir": tmp_path}
    finally:
        served.stop()


def forwarded(files) -> int:
    return files["served"].log().count("POST /v1/owner/command")


def spent(files, which: str = "path") -> dict[str, float]:
    result = invoke("budget", "status", "--format", "json", "--db", str(files[which]))
    assert result.exit_code == 0, result.stderr
    return {(r["unit"], r["notion"]): r["spent"] for r in json.loads(result.stdout)}


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("fmt", ["json", "table"])
def test_a_served_release_prints_what_a_direct_run_prints(files, name, fmt):
    before = forwarded(files)
    through = invoke(*COMMANDS[name], "--format", fmt, "--db", str(files["path"]))
    assert forwarded(files) == before + 1, files["served"].log()[-2000:]  # the service made it
    direct = invoke(*COMMANDS[name], "--format", fmt, "--db", str(files["copy"]))
    assert through.exit_code == direct.exit_code == 0, (through.stderr, direct.stderr)
    assert "locked" not in through.stderr and through.stdout
    assert through.stdout == direct.stdout
    assert through.stderr == direct.stderr
    assert spent(files) == spent(files, "copy")  # charged alike (coe: nothing)


def test_the_release_is_charged_to_the_served_ledger_and_audited(files):
    before = spent(files)
    done = invoke(*COMMANDS["explain-outlier"], "--epsilon", "0.125", "--db", str(files["path"]))
    assert done.exit_code == 0, done.stderr
    after = spent(files)
    assert after[("main.t", "ocdp")] == pytest.approx(before[("main.t", "ocdp")] + 0.125)
    assert invoke(*COMMANDS["explain-outlier"], "--epsilon", "0.125", "--db", str(files["copy"])).exit_code == 0
    history = json.loads(invoke("budget", "history", "--format", "json", "--db", str(files["path"])).stdout)
    assert history[-1]["epsilon"] == 0.125 and history[-1]["analyst"] is None  # the owner's own release
    lines = [json.loads(line) for line in files["audit"].read_text(encoding="utf-8").splitlines()]
    mine = [e for e in lines if e.get("command") == f"explain-outlier {QUERY}" and e.get("epsilon") == 0.125]
    assert mine and mine[-1]["caller"] == "owner" and mine[-1]["exit_code"] == 0, lines[-3:]
    assert mine[-1]["endpoint"] == "POST /v1/owner/command"


def test_a_picture_is_written_by_the_caller_at_the_path_it_gave(files, monkeypatch):
    pytest.importorskip("matplotlib")
    outputs = {}
    for which in ("path", "copy"):
        folder = files["dir"] / f"pictures-{which}"
        folder.mkdir(exist_ok=True)
        monkeypatch.chdir(folder)  # a relative path: the caller's folder, not the service's
        result = invoke(*COMMANDS["explain-outlier"], "--plot", "release.png", "--db", str(files[which]))
        assert result.exit_code == 0, result.stderr
        picture = folder / "release.png"
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        outputs[which] = (result.stdout, result.stderr)
    assert outputs["path"] == outputs["copy"]
    assert "drew release.png (NOT FOR RELEASE" in outputs["path"][1]


@pytest.mark.parametrize("args, needles", [
    (("--workers", "2"), ("--workers 2", "pid", "owner listener http://127.0.0.1:", "drop --workers")),
    (("--plot", "/no/such/folder/x.png"), ("does not exist",)),
    (("--plot", "x.notapicture"), ("does not write .notapicture",)),
    (("--epsilon", "-1"), ("epsilon",)),
    (("--verifier", "nope"), ("nope",)),
    (("--no-such-option",), ("no such option",)),
])
def test_what_cannot_cross_or_is_wrong_is_one_line_and_nothing_charged(files, args, needles):
    before = spent(files)
    result = invoke(*COMMANDS["explain-outlier"], *args, "--db", str(files["path"]))
    line = assert_error(result, *needles)
    assert "locked" not in line
    assert spent(files) == before
    if args[0] == "--workers":
        assert str(files["served"].process.pid) in line and str(files["path"]) in line


def test_budget_status_plot_is_written_by_the_caller_too(files, monkeypatch):
    pytest.importorskip("matplotlib")
    folder = files["dir"] / "budget-picture"
    folder.mkdir(exist_ok=True)
    monkeypatch.chdir(folder)
    result = invoke("budget", "status", "--plot", "budget.png", "--db", str(files["path"]))
    assert result.exit_code == 0 and "drew budget.png" in result.stderr, result.stderr
    assert (folder / "budget.png").read_bytes()[:4] == b"\x89PNG"
