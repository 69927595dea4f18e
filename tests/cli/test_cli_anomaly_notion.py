"""An anomaly answer is charged to the notion of the mechanism that runs, however `--privacy` is
spelled (DESIGN.md §6 "Notions are kept apart"): `--privacy SP` runs (ε, k)-SP and must pay
from the sp total, so an sp limit holds against it."""

from __future__ import annotations

import json

import pytest

from tests.cli.cli_helpers import assert_error, invoke

QUERY = "SELECT victim_age FROM homicides WHERE id = 7"


def _status(ledger) -> dict[str, float]:
    result = invoke("budget", "status", "homicides", "--ledger", str(ledger), "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    return {row["notion"]: row["spent"] for row in map(json.loads, result.stdout.splitlines())}


def _answer(ledger, privacy: str):
    return invoke("identify-anomaly", QUERY, "--beta", "5", "--radius", "1", "--epsilon", "0.5", "--privacy", privacy,
                  "--ledger", str(ledger), "--format", "json")


@pytest.mark.parametrize("privacy", ["SP", "Sp"])
def test_an_sp_limit_holds_against_every_spelling_of_sp(tmp_path, privacy):
    ledger = tmp_path / "L.duckdb"
    for notion, limit in (("sp", "0.6"), ("dp", "10")):  # strict limits: every notion of the unit has one
        done = invoke("budget", "set-limit", "homicides", limit, "--notion", notion, "--ledger", str(ledger))
        assert done.exit_code == 0, done.stderr
    first = _answer(ledger, privacy)
    assert first.exit_code == 0, first.stderr
    [answer] = json.loads(first.stdout)
    assert answer["privacy"] == "sp" and answer["k"] == 1  # the mechanism that ran, canonically named
    assert_error(_answer(ledger, privacy), "sp privacy budget", "remaining 0.1", code=2)
    assert_error(_answer(ledger, privacy), "sp privacy budget", code=2)
    spent = _status(ledger)
    assert spent["sp"] == pytest.approx(0.5) and spent["dp"] == 0
    history = invoke("budget", "history", "--ledger", str(ledger), "--format", "json")
    [row] = json.loads(history.stdout)
    assert (row["notion"], row["mechanism"]) == ("sp", "anomaly/sp/k=1")
    assert "privacy = 'sp'" in row["statement"]


@pytest.mark.parametrize("privacy", ["DP"])
def test_every_spelling_of_dp_pays_from_dp(tmp_path, privacy):
    ledger = tmp_path / "L.duckdb"
    result = _answer(ledger, privacy)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)[0]["privacy"] == "dp"
    spent = _status(ledger)
    assert spent["dp"] == pytest.approx(0.5) and spent["sp"] == 0


@pytest.mark.parametrize("privacy", [" sp", "\u017fp", "sq"])
def test_a_spelling_outside_the_rule_is_refused_before_any_charge(tmp_path, privacy):
    ledger = tmp_path / "L.duckdb"
    assert_error(_answer(ledger, privacy), "unknown privacy", "use one of: dp, sp", code=2)
    assert set(_status(ledger).values()) <= {0}
