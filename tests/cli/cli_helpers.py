"""Helpers of the CLI tests: invoking the app and checking what it wrote."""

from __future__ import annotations

from typer.testing import CliRunner

from pcor_sql.cli.main import app

QUERY = "SELECT salary FROM salaries WHERE id = 42"  # a planted outlier (datasets/planted_outliers.json)
# Seeded runs on a database file's persistent ledger need the owner's --allow-seeded.
FAST = ("--verifier", "grubbs", "--seed", "1", "--allow-seeded")


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(app, list(args), input=input)


def stderr_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def assert_clean_stderr(result) -> None:
    """Only one-line warnings, errors and coe summaries on stderr: no traceback, no progress
    bar on a pipe."""
    for line in stderr_lines(result):
        assert line.startswith(("warning: ", "error: ", "coe: ")), line
    assert "Traceback" not in result.stderr + result.stdout


def assert_error(result, *needles: str, code: int = 2) -> str:
    """Exit `code`, exactly one `error:` line naming the problem, no traceback, nothing on stdout."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert_clean_stderr(result)
    errors = [line for line in stderr_lines(result) if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle.lower() in errors[0].lower(), (needle, errors[0])
    assert result.stdout == "", result.stdout
    return errors[0]
