"""A release whose ε1 is too small for utility to matter (a tiny ε, or ε shared among very many
samples) says so, naming ε1; an ordinary one does not (DESIGN.md §2 "The exponential mechanism")."""

from __future__ import annotations

import warnings

import duckdb
import pytest

import pcor_sql
from tests.cli.cli_helpers import invoke


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    c.execute("CREATE TYPE g AS ENUM ('a', 'b', 'c'); CREATE TYPE y AS ENUM ('1', '2')")
    c.execute("CREATE TABLE t AS SELECT i AS id, (['a', 'b', 'c'])[i % 3 + 1]::g AS g, (['1', '2'])[i % 2 + 1]::y AS y,"
              " CASE WHEN i = 7 THEN 1000.0 ELSE i % 10 END AS v FROM range(3000) r(i)")
    yield c
    c.close()


def said(con, **options) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pcor_sql.explain_outlier(con, "SELECT v FROM t WHERE id = 7", verifier="grubbs", ledger=":memory:", **options)
    return [str(w.message) for w in caught if "nearly uniform" in str(w.message)]


def test_a_tiny_epsilon_says_the_choice_is_nearly_uniform(con):
    [message] = said(con, epsilon=1e-6)
    assert "ε1 = 1.96e-08, the ε of each randomized choice" in message and "(3,000 rows)" in message


def test_many_samples_say_it_too(con):
    [message] = said(con, epsilon=0.2, samples=3_000)
    assert "ε1 = 6.66e-05" in message and "lower samples" in message


def test_an_ordinary_release_does_not(con):
    assert said(con, epsilon=0.2) == [] and said(con, epsilon=0.2, samples=10) == []


def test_the_command_line_prints_it_as_a_warning():
    result = invoke("explain-outlier", "SELECT salary FROM salaries WHERE id = 42", "--epsilon", "1e-9",
                    "--ledger", ":memory:", "--verifier", "grubbs")
    assert result.exit_code == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("warning: the search's choices are nearly")]
