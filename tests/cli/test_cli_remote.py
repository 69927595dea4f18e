"""`pcor-sql remote ...` through typer's CliRunner against the real service on a real uvicorn:
the analyst's requests from the shell, token from $PCOR_SQL_TOKEN, one-line errors — bad
arguments included — and the light client's `pcor-sql-remote` help, option for option (one
declaration of the commands, `pcor_sql_client.cli`)."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest
from pcor_sql_client import cli as client_cli
from pcor_sql_client.text import key_value, point
from typer.testing import CliRunner

from pcor_sql.cli.main import app
from pcor_sql.errors import UserError
from tests.cli.cli_helpers import assert_clean_stderr, assert_error
from tests.client.served_dataset import OUTLIERS, TEXT_KEYS, served_dataset


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with served_dataset(tmp_path_factory.mktemp("remote-cli") / "staff.duckdb", processes=False) as s:
        yield s


def remote(served, *args: str, token: str | None = "alice", url: str | None = None):
    env = {"PCOR_SQL_TOKEN": served.tokens.get(token, token) if token else ""}
    return CliRunner().invoke(app, ["remote", *args, "--url", url or served.url], env=env)


def json_lines(result) -> list[dict]:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert_clean_stderr(result)
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_datasets_me_and_history_as_json(served):
    assert {d["name"] for d in json_lines(remote(served, "datasets", "--format", "json"))} == {"staff", "tagged"}
    [me] = json_lines(remote(served, "me", "--format", "json"))
    assert me["analyst"] == "alice"
    history = json_lines(remote(served, "history", "--format", "json"))
    assert all(set(h) >= {"notion", "epsilon", "outcome"} for h in history)


def test_tables_are_the_default(served):
    for command in ("datasets", "me", "history"):
        result = remote(served, command)
        assert result.exit_code == 0, result.stderr
        assert_clean_stderr(result)
    assert "staff" in remote(served, "datasets").stdout
    assert "ocdp" in remote(served, "me").stdout


def test_explain_outlier_keys_in_order_with_options(served):
    keys = [OUTLIERS[2], OUTLIERS[0]]
    out = json_lines(remote(served, "explain-outlier", "staff", *map(str, keys), "--epsilon", "0.1",
                            "--verifier", "grubbs", "--by", "dept,year", "--format", "json"))
    assert [r["key"] for r in out] == keys and all(r["verifier"].startswith("grubbs") for r in out)
    [text] = json_lines(remote(served, "explain-outlier", "tagged", TEXT_KEYS[0], "--epsilon", "0.1",
                               "--verifier", "grubbs", "--format", "json"))
    assert text["key"] == TEXT_KEYS[0]
    table = remote(served, "explain-outlier", "staff", str(OUTLIERS[1]), "--epsilon", "0.1", "--verifier", "grubbs")
    assert table.exit_code == 0 and "privacy" in table.stdout
    sql = remote(served, "explain-outlier", "staff", str(OUTLIERS[1]), "--epsilon", "0.1", "--verifier", "grubbs",
                 "--format", "sql")
    assert sql.exit_code == 0 and sql.stdout.strip().endswith(";") and "pay" in sql.stdout


def test_identify_anomaly_by_value(served):
    [answer] = json_lines(remote(served, "identify-anomaly", "staff", "--value", "pay=5007", "--beta", "2",
                                 "--radius", "5", "--epsilon", "0.1", "--privacy", "dp", "--format", "json"))
    assert answer["value"] == {"pay": 5007} and type(answer["anomaly"]) is bool and answer["privacy"] == "dp"
    table = remote(served, "identify-anomaly", "staff", "--value", "pay=1.5", "--beta", "2", "--radius", "5",
                   "--epsilon", "0.1")
    assert table.exit_code == 0 and "anomaly" in table.stdout


@pytest.mark.parametrize(("args", "token", "needles"), [
    (("me",), None, ("PCOR_SQL_TOKEN is not set",)),
    (("me",), "carol", ("not authenticated",)),  # revoked
    (("explain-outlier", "staff", "100000", "--epsilon", "0.1"), "alice", ("releasable",)),
    (("explain-outlier", "staff", "7", "--epsilon", "1e-300"), "alice", ("ε",)),
    (("identify-anomaly", "staff", "--value", "pay", "--beta", "2", "--radius", "5", "--epsilon", "0.1"), "alice",
     ("METRIC=NUMBER",)),
])
def test_errors_are_one_line_and_exit_2(served, args, token, needles):
    assert_error(remote(served, *args, token=token), *needles)


def test_no_service_is_one_line(served):
    assert_error(remote(served, "datasets", url="http://127.0.0.1:1"), "cannot reach the pcor-sql service")


def test_key_and_point_parsing():
    assert [key_value(t) for t in ("42", "-3", "0", "007", "a17", "4.5")] == [42, -3, 0, "007", "a17", "4.5"]
    assert point(["pay=5007", "age=4.5", "x=-2"]) == {"pay": 5007, "age": 4.5, "x": -2}
    for bad in (["pay"], ["pay=abc"], ["pay=1", "pay=2"], []):
        with pytest.raises(UserError):
            point(bad)


def test_metric_and_cost(served):
    """`--metric` reaches the service (it was "No such option"); `cost` previews, charging nothing."""
    [item] = json_lines(remote(served, "explain-outlier", "staff", str(OUTLIERS[3]), "--epsilon", "0.1",
                               "--metric", "pay", "--verifier", "grubbs", "--format", "json"))
    assert item["metric"] == "pay"
    assert_error(remote(served, "explain-outlier", "staff", "7", "--epsilon", "0.1", "--metric", "nope"), "nope")
    before = served.state()
    [cost] = json_lines(remote(served, "cost", "staff", "7", "31", "--epsilon", "0.1", "--format", "json"))
    assert cost["count"] == 2 and cost["total"] == pytest.approx(0.2)
    [point_cost] = json_lines(remote(served, "cost", "staff", "--value", "pay=5", "--beta", "2", "--radius", "5",
                                     "--epsilon", "0.1", "--format", "json"))
    assert point_cost["count"] == 1
    assert served.state() == before
    assert_error(remote(served, "cost", "staff", "--epsilon", "0.1"), "keys")


# ---- one declaration: `pcor-sql remote` is the light client's command line ------------------

def _options(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", help_text))


def _client_help(*args: str) -> tuple[int, str]:
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        code = client_cli.main([*args, "--help"])
    return code, shown.getvalue()


@pytest.mark.parametrize("command", [None, *sorted(client_cli.EXAMPLES)])
def test_both_command_lines_list_the_same_options(command):
    args = [command] if command else []
    full = CliRunner().invoke(app, ["remote", *args, "--help"])
    code, light = _client_help(*args)
    assert full.exit_code == 0 == code, full.output
    assert _options(full.stdout) == _options(light) and "--url" in _options(light), (full.stdout, light)
    assert full.stdout.replace("pcor-sql remote", "pcor-sql-remote") == light


def test_every_command_has_an_example():
    choices = next(a for a in client_cli.parser()._actions if a.dest == "command").choices
    assert set(choices) == set(client_cli.EXAMPLES)


@pytest.mark.parametrize(("args", "needles"), [
    (("explain-outlier", "staff", "7"), ("--epsilon", "pcor-sql remote explain-outlier --help")),
    (("history", "--limit", "0"), ("--limit", "1 to 1000")),
    (("releasable-keys", "staff", "--offset", "-1"), ("--offset",)),
    (("me", "--format", "yaml"), ("--format", "yaml")),
    (("nonsense",), ("nonsense",)),
])
def test_bad_arguments_are_one_line_before_any_request(served, args, needles):
    before = served.state()
    assert_error(remote(served, *args), *needles)
    assert served.state() == before


def test_format_in_any_ascii_case_and_sql(served):
    assert json_lines(remote(served, "me", "--format", "JSON"))[0]["analyst"] == "alice"
    statement = f"EXPLAIN OUTLIER SELECT pay FROM staff WHERE id = {OUTLIERS[3]} USING grubbs WITH (epsilon = 0.1)"
    [item] = json_lines(remote(served, "sql", statement, "--format", "json"))
    assert item["key"] == OUTLIERS[3]
