"""The CLI reads each option's declared maximum from its spec (DESIGN.md §8 "Bounded work"): one line, exit 2, nothing charged."""

from __future__ import annotations

from tests.cli.cli_helpers import assert_error, invoke


def test_the_cli_refuses_past_the_bound_with_one_line(db):
    result = invoke("explain-outlier", "SELECT salary FROM salaries WHERE id = 42", "--db", str(db),
                    "--verifier", "grubbs", "--samples", "10000000")
    assert_error(result, "samples must be ≤ 1,000,000")


def test_set_limit_clear_and_a_limit_below_spent_says_so(db):
    first = invoke("explain-outlier", "SELECT salary FROM salaries WHERE id = 42", "--db", str(db),
                   "--verifier", "grubbs", "--epsilon", "0.5")
    assert first.exit_code == 0, first.stderr
    low = invoke("budget", "set-limit", "salaries", "0.1", "--db", str(db))
    assert low.exit_code == 0 and "is below the ε already spent (0.5)" in low.stderr
    cleared = invoke("budget", "set-limit", "salaries", "--clear", "--db", str(db))
    assert cleared.exit_code == 0 and "limit of" in cleared.stdout and "cleared (was 0.1" in cleared.stdout
    both = invoke("budget", "set-limit", "salaries", "1", "--clear", "--db", str(db))
    assert both.exit_code == 2 and "either a limit or --clear" in both.stderr
    again = invoke("dataset", "add", "pay", "salaries", "--key", "id", "--metric", "salary", "--by", "job_title",
                   "--limit", "0.2", "--db", str(db))
    assert again.exit_code == 0 and "is below the ε already spent" in again.stderr


def test_rotate_keeps_the_name_and_prints_a_new_token_last(db):
    added = invoke("analyst", "add", "ana", "--quota", "1", "--db", str(db))
    revoked = invoke("analyst", "revoke", "ana", "--db", str(db))
    rotated = invoke("analyst", "rotate", "ana", "--db", str(db))
    assert added.exit_code == revoked.exit_code == rotated.exit_code == 0
    token = rotated.stdout.strip().splitlines()[-1]
    assert token.startswith("pcor_") and token != added.stdout.strip().splitlines()[-1]
    assert "reinstated" in rotated.stdout
    listed = invoke("analyst", "list", "--db", str(db), "--format", "json")
    assert '"revoked_at": null' in listed.stdout and '"limit": 1.0' in listed.stdout
