"""numba is a required dependency: without it every command stops at once with one line."""

from __future__ import annotations

import importlib.util

from cli_helpers import QUERY, assert_error, invoke


def test_a_missing_numba_is_one_error_line_before_any_work(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "numba" else real(name, *a))
    result = invoke("explain-outlier", QUERY, "--epsilon", "0.2")
    assert_error(result, "numba is not installed", "pip install 'numba>=0.60'")


def test_help_needs_nothing_and_an_installed_numba_passes():
    assert invoke("--help").exit_code == 0
    assert invoke("glossary").exit_code == 0


def test_the_analysts_client_and_the_glossary_do_not_need_numba(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "numba" else real(name, *a))
    assert invoke("glossary").exit_code == 0
    # `remote` reaches its own check (no URL given), not the numba one.
    result = invoke("remote", "me")
    assert "numba" not in result.output and result.exit_code != 0
