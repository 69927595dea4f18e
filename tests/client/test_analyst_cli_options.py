"""Both analyst command lines (the light client's `pcor-sql-remote`, and `pcor-sql remote`, its
pass-through in the full package): --url before or after the command, history's --limit/--before (the API pages),
and the releasable keys listed (public by registration, DESIGN.md §6)."""

from __future__ import annotations

import json

import pytest

import pcor_sql.service
from tests.cli.cli_helpers import invoke
from tests.client.served_dataset import OUTLIERS, make_database, register
from tests.client.test_light_client import light
from tests.service.live_server import live_server


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    con = make_database(tmp_path_factory.mktemp("options") / "staff.duckdb")
    owner, tokens = register(con)
    try:
        with live_server(pcor_sql.service.app(owner, warm=False, processes=False), start_timeout=120) as url:
            yield url, tokens
    finally:
        con.close()


def test_the_light_clients_url_works_before_the_command(served):
    url, _ = served
    before = light(served, "--url", url, "datasets", "--format", "json", env={"PCOR_SQL_URL": ""})
    assert before.returncode == 0, before.stderr
    after = light(served, "datasets", "--url", url, "--format", "json", env={"PCOR_SQL_URL": ""})
    assert after.returncode == 0 and after.stdout == before.stdout, after.stderr
    # A command's own --url wins over one given before it.
    wrong_first = light(served, "--url", "http://127.0.0.1:9", "me", "--url", url, env={"PCOR_SQL_URL": ""})
    assert wrong_first.returncode == 0, wrong_first.stderr


def test_the_light_clients_history_pages_and_keys_list(served):
    for key in OUTLIERS[:2]:
        asked = light(served, "explain-outlier", "staff", str(key), "--epsilon", "0.05", "--verifier", "grubbs")
        assert asked.returncode == 0, asked.stderr
    rows = [json.loads(line) for line in light(served, "history", "--format", "json").stdout.splitlines()]
    [latest] = [json.loads(line) for line in light(served, "history", "--limit", "1", "--format", "json")
                .stdout.splitlines()]
    assert latest == rows[-1]
    older = light(served, "history", "--before", latest["release_id"], "--format", "json")
    assert [json.loads(line) for line in older.stdout.splitlines()] == rows[:-1], older.stderr
    keys = light(served, "releasable-keys", "staff", "--limit", "2")
    assert keys.returncode == 0, keys.stderr
    assert "releasable keys of staff; 1–2 shown" in keys.stdout.splitlines()[0], keys.stdout
    page = json.loads(light(served, "releasable-keys", "staff", "--limit", "2", "--offset", "1", "--format", "json").stdout)
    assert page["offset"] == 1 and len(page["keys"]) == 2 and page["total"] >= 4


def test_pcor_sql_remote_takes_url_before_the_command_and_pages(served, monkeypatch):
    url, tokens = served
    monkeypatch.setenv("PCOR_SQL_TOKEN", tokens["alice"])
    monkeypatch.delenv("PCOR_SQL_URL", raising=False)
    listed = invoke("remote", "--url", url, "datasets", "--format", "json")
    assert listed.exit_code == 0, listed.stderr
    assert {json.loads(line)["name"] for line in listed.stdout.splitlines()} >= {"staff", "tagged"}
    asked = invoke("remote", "--url", url, "explain-outlier", "staff", str(OUTLIERS[2]), "--epsilon", "0.05",
                   "--verifier", "grubbs")
    assert asked.exit_code == 0, asked.stderr
    [latest] = [json.loads(line) for line in invoke("remote", "history", "--url", url, "--limit", "1", "--format",
                                                      "json").stdout.splitlines()]
    assert latest["key"] is not None
    none_before = invoke("remote", "--url", url, "history", "--before", latest["release_id"], "--format", "json")
    assert none_before.exit_code == 0 and latest["release_id"] not in none_before.stdout
    keys = invoke("remote", "--url", url, "releasable-keys", "staff", "--format", "json")
    assert keys.exit_code == 0, keys.stderr
    assert json.loads(keys.stdout)["dataset"] == "staff"


def test_the_light_clients_bad_arguments_are_one_line(served):
    for args, needle in ((("history", "--limit", "1001"), "--limit"), (("explain-outlier", "staff", "7"), "--epsilon"),
                         (("me", "--format", "yaml"), "yaml")):
        refused = light(served, *args)
        assert refused.returncode == 2 and refused.stdout == "", refused
        assert refused.stderr.startswith("error: ") and refused.stderr.count("\n") == 1 and needle in refused.stderr
    shown = light(served, "cost", "--help")
    assert shown.returncode == 0 and "pcor-sql-remote cost salaries 42" in shown.stdout, shown
    assert light(served, "me", "--format", "Json").returncode == 0
