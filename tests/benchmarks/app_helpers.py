"""Invoking `python -m benchmarks` in-process (helper module, not a test file). Its output
follows pcor-sql's rules, so pcor-sql's CLI test helpers check it."""

from __future__ import annotations

from typer.testing import CliRunner

from benchmarks.cli import app
from tests.cli.cli_helpers import assert_clean_stderr, assert_error

__all__ = ["assert_clean_stderr", "assert_error", "invoke"]


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))
