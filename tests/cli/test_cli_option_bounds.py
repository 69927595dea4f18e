"""The CLI reads each option's declared maximum from its spec (issue 26): one line, exit 2, nothing charged."""

from __future__ import annotations

from tests.cli.cli_helpers import assert_error, invoke


def test_the_cli_refuses_past_the_bound_with_one_line(db):
    result = invoke("explain-outlier", "SELECT salary FROM salaries WHERE id = 42", "--db", str(db),
                    "--verifier", "grubbs", "--samples", "10000000")
    assert_error(result, "samples must be ≤ 1,000,000")
