"""Forwarded owner commands are read by the CLI's own parser (DESIGN.md §9): POST
/v1/owner/command over real HTTP on 127.0.0.1, to the owner listener of a service that holds a
real DuckDB file in this process. The command path and every value are click's (the last `--db`
when it is given twice); global options (`--install-completion`, `--help`, `--version`, …) and
commands that are not the owner's listed ones are a 400 with {error, fix}, and nothing runs."""

from __future__ import annotations

import os

import httpx
import pytest
import typer

import pcor_sql
import pcor_sql.service
from pcor_sql.cli.main import app
from pcor_sql.cli.served_commands import run_served
from pcor_sql.service.owner_app import owner_app
from tests.cli.test_cli_served_commands import make_db
from tests.service.live_server import live_listeners

TOKEN = "pcor_owner_test-token-for-forwarding-0123456789"


def limit_of(owner, unit: str = "main.t"):
    return next((s.limit for s in owner.status() if s.unit == unit and s.notion == "ocdp"), None)


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("forwarded")
    served, other = tmp_path / "pay.duckdb", tmp_path / "other.duckdb"
    make_db(served)
    make_db(other)
    (tmp_path / "home").mkdir()
    group = typer.main.get_command(app)
    with pytest.MonkeyPatch.context() as patch, \
            pcor_sql.Owner.open(served, warn=lambda message: None) as owner:
        patch.setenv("HOME", str(tmp_path / "home"))  # typer's completion installer writes ~/.bashrc
        patch.setenv("SHELL", "/bin/bash")
        analysts = pcor_sql.service.app(owner, workers=1, warm=False, processes=False)
        owners = owner_app(analysts.state.service, TOKEN,
                           commands=lambda argv: run_served(group, owner, served.resolve(), argv))
        with live_listeners(analysts, owners) as (_, owner_url):
            yield {"owner": owner, "url": owner_url, "served": served, "other": other, "home": tmp_path / "home"}


def command(held, *argv: str) -> httpx.Response:
    return httpx.post(held["url"] + "/v1/owner/command", json={"argv": list(argv)},
                      headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)


def other_limit(held):
    with pcor_sql.Owner.open(held["other"], warn=lambda message: None) as other:
        return limit_of(other)


def test_db_given_twice_is_the_last_one_as_click_reads_it(held):
    served, other = str(held["served"]), str(held["other"])
    r = command(held, "budget", "set-limit", "t", "1.5", "--db", served, "--db", other)
    assert r.status_code == 400 and set(r.json()) == {"error", "fix"} and other in r.json()["error"], r.text
    r = command(held, "budget", "set-limit", "t", "1.75", f"--db={other}", "--db", served)
    assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text
    assert limit_of(held["owner"]) == 1.75  # on the served file, the value click used
    assert other_limit(held) == 10.0  # the other file kept its limit: never written


@pytest.mark.parametrize("argv", [
    ["--install-completion", "analyst", "list"],
    ["--show-completion", "analyst", "list"],
    ["--help", "analyst", "list"],
    ["--version", "analyst", "list"],
    ["-V", "analyst", "list"],
    ["--debug", "analyst", "list"],
    ["analyst", "--help", "list"],
    ["analyst", "list", "--help"],
    ["analyst", "list", "-h"],
    ["glossary"],
    ["explain-outlier", "SELECT pay FROM t WHERE id = 7", "--workers", "2"],
    ["explain-outlier", "SELECT pay FROM t WHERE id = 7", "--engine", "spark"],
    ["serve"],
    ["sql", "-c", "SELECT 1"],
    ["analyst", "list", "--nope"],
    ["analyst"],
    [],
])
def test_global_options_and_other_commands_are_refused_and_nothing_runs(held, argv):
    r = command(held, *argv, "--db", str(held["served"]))
    assert r.status_code == 400 and set(r.json()) == {"error", "fix"}, (argv, r.status_code, r.text)
    assert "Traceback" not in r.text and r.json()["fix"]
    assert os.listdir(held["home"]) == []  # no completion script, no ~/.bashrc
    assert command(held, "analyst", "list", "--db", str(held["served"])).json()["exit_code"] == 0  # still serving


def test_a_listed_command_on_the_served_file_runs_as_before(held):
    r = command(held, "analyst", "list", "--format", "json", "--db", str(held["served"]))
    assert r.status_code == 200 and r.json()["exit_code"] == 0 and '"ana"' in r.json()["stdout"]
    r = command(held, "analyst", "revoke", "nobody", "--db", str(held["served"]))
    assert r.json()["exit_code"] == 2 and r.json()["stderr"].startswith("error: there is no analyst named 'nobody'")


@pytest.mark.parametrize("link", ["hard", "soft", "spelled"])
def test_another_path_to_the_served_file_runs_on_the_services_own_instance(held, link):
    """A hard link, a symlink or another spelling of the served file is the served file: the
    command runs on the service's own Owner (never a second DuckDB instance in its process: that
    one would see a stale ledger, lose its write, and drop the process's lock when closed)."""
    from tests.ledger.test_database_file_instances import other_process_opens

    served = held["served"]
    path = served.with_name(f"{link}-{served.name}")
    if link == "hard" and not path.exists():
        path.hardlink_to(served)
    elif link == "soft" and not path.exists():
        path.symlink_to(served)
    elif link == "spelled":
        (served.parent / "sub").mkdir(exist_ok=True)
        path = served.parent / "sub" / ".." / served.name
    epsilon = {"hard": 3.0, "soft": 3.25, "spelled": 3.5}[link]
    r = command(held, "budget", "set-limit", "t", str(epsilon), "--db", str(served), "--db", str(path))
    assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text
    assert limit_of(held["owner"]) == epsilon  # the service's own ledger has it
    status = command(held, "budget", "status", "t", "--format", "json", "--db", str(path)).json()
    assert status["exit_code"] == 0 and str(epsilon) in status["stdout"]
    assert other_process_opens(served) == "locked"  # the service still holds its file


@pytest.mark.slow
def test_the_cli_forwards_the_command_click_reads(tmp_path):
    """From an owner's shell (the service a process of its own): `--db` twice is the last one —
    the other file is opened here, the served one through the service; a global option such as
    `--debug` stays with the caller and the command is still carried out by the service."""
    from tests.cli.cli_helpers import invoke
    from tests.cli.test_cli_served_commands import serve

    served_path, other = tmp_path / "pay.duckdb", tmp_path / "other.duckdb"
    make_db(served_path)
    make_db(other)
    served = serve(served_path, "--workers", "1")
    try:
        here = invoke("budget", "set-limit", "t", "1.5", "--db", str(served_path), "--db", str(other))
        assert here.exit_code == 0, here.stderr
        forwarded_before = served.log().count("POST /v1/owner/command 200")
        there = invoke("budget", "set-limit", "t", "2.5", "--db", str(other), "--db", str(served_path))
        assert there.exit_code == 0 and "locked" not in there.stderr, there.stderr
        listed = invoke("--debug", "analyst", "list", "--format", "json", "--db", str(served_path))
        assert listed.exit_code == 0 and '"ana"' in listed.stdout, listed.stderr
        log = served.log()
    finally:
        served.stop()
    assert log.count("POST /v1/owner/command 200") == forwarded_before + 2
    with pcor_sql.Owner.open(served_path, warn=lambda message: None) as owner:
        assert limit_of(owner) == 2.5
    with pcor_sql.Owner.open(other, warn=lambda message: None) as owner:
        assert limit_of(owner) == 1.5
