"""Partial batches (DESIGN.md §10 "Seeded batches"): one record without a valid context, or missing, no longer sinks
the batch. Every record is charged as stated before the run; each is released or comes back as a
`NotReleased` with its key and reason; the ledger records each record's own outcome. The owner
hears the reason and is not charged for the failed record; an analyst hears one generic refusal
per record and pays for it (DESIGN.md §6)."""

from __future__ import annotations

import json

import duckdb
import pytest

import pcor_sql
from pcor_sql.errors import NoValidContext, RequestFailed
from pcor_sql.results import Explanation, NotReleased
from tests.cli.cli_helpers import invoke
from tests.test_analyst import make_owner

#: Record 42 is a planted outlier of the bundled salaries; record 1 is an outlier in none of the
#: contexts Grubbs' test is asked about.
BATCH = "SELECT salary FROM salaries WHERE id IN (1, 42)"


@pytest.fixture
def con():
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    return con


def test_a_batch_releases_the_records_that_have_a_context_and_names_the_one_that_has_none(con):
    session = pcor_sql.Session(con, ledger=":memory:", warn=lambda m: None)
    results = pcor_sql.explain_outliers(None, BATCH, session=session, verifier="grubbs", epsilon=0.2)
    assert [r.released for r in results] == [False, True]
    failed, released = results
    assert isinstance(released, Explanation) and released.record["id"] == 42
    assert isinstance(failed, NotReleased)
    assert (failed.key, failed.reason, failed.charged, failed.epsilon) == ("id = 1", "no-valid-context", False, 0.2)
    assert "outlier in none of" in failed.message and failed.record["id"] == 1
    assert failed.as_dict()["released"] is False
    # The ledger: the released record charged, the failed one recorded and given back (an owner's failure).
    rows = sorted(session.ledger().history(), key=lambda h: h.seq)
    assert [(h.outcome, h.reason, h.refunded) for h in rows] == [
        ("failed", "no-valid-context", True), ("answered", None, False)]
    [status] = [s for s in session.ledger().statuses("ocdp") if s.unit == "bundled:salaries"]
    assert status.spent == pytest.approx(0.2) and status.releases == 1


def test_one_record_alone_still_raises_its_error(con):
    with pytest.raises(NoValidContext):
        pcor_sql.explain_outlier(con, "SELECT salary FROM salaries WHERE id = 1", verifier="grubbs",
                                 ledger=":memory:", warn=lambda m: None)


def test_the_command_line_reports_each_record_on_its_own_line_and_exits_3():
    done = invoke("explain-outlier", BATCH, "--verifier", "grubbs", "--max-records", "2", "--ledger", ":memory:")
    assert done.exit_code == 3, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("1 of 2: id = 1: not released (no-valid-context): the record is an outlier in none")
    assert lines[0].endswith("(ε = 0.2 given back: not charged)")
    assert any(line.startswith("2 of 2: salary of the record where id = 42 is an outlier") for line in lines)
    assert done.stderr.splitlines()[-1].startswith("error: 1 of 2 records not released")
    as_json = invoke("explain-outlier", BATCH, "--verifier", "grubbs", "--max-records", "2", "--ledger", ":memory:",
                     "--format", "json")
    assert as_json.exit_code == 3
    first, second = json.loads(as_json.stdout)
    assert (first["released"], first["key"], first["reason"], first["charged"]) == (False, "id = 1", "no-valid-context",
                                                                                      False)
    assert second["record"]["id"] == 42 and "released" not in second


def test_the_exit_codes_are_documented_in_the_help():
    shown = invoke("explain-outlier", "--help").stdout
    assert "Exit codes: 0 every record released; 3 some records of a batch not released" in " ".join(shown.split())


def test_an_analyst_batch_answers_each_key_and_refuses_the_others_in_the_same_words():
    owner = make_owner(drop=5)  # key 5 is releasable but missing; key 10 has no valid context
    analyst = owner.analyst()
    results = analyst.explain_outliers("people", [42, 5, 10], verifier="grubbs", epsilon=0.1)
    assert [(r.released, r.key) for r in results] == [(True, 42), (False, 5), (False, 10)]
    missing, no_context = (r.as_dict() for r in results[1:])
    # Nothing that depends on the data: a missing key and a key without a context read the same.
    assert {**missing, "key": None} == {**no_context, "key": None}
    assert missing["reason"] == "not-answered" and missing["charged"] is True
    assert missing["error"] == "the request could not be answered; its cost stays charged"
    # Each key was charged before the run, and stays charged; the owner's history has the reasons.
    assert owner.spent("people") == pytest.approx(0.3)
    rows = {h.record_key: (h.outcome, h.reason, h.refunded) for h in owner.ledger.history()}
    assert rows == {"key = 42": ("answered", None, False), "key = 5": ("failed", "missing", False),
                    "key = 10": ("failed", "no-valid-context", False)}


def test_an_analyst_single_key_that_fails_is_the_one_generic_refusal():
    owner = make_owner(drop=5)
    with pytest.raises(RequestFailed):
        owner.analyst().explain_outlier("people", 5, verifier="grubbs", epsilon=0.1)
    assert owner.spent("people") == pytest.approx(0.1)
