"""The ledger's bookkeeping as an owner reads it (DESIGN.md §6 "The history is the truth"): a request refused after its
reservation is no release in `budget status`; a history row says what was asked (metric,
verifier with its options, search, ε, keys), for owners and analysts alike, never a token; a
failed row that was not charged shows the total it left, not one that moved."""

from __future__ import annotations

import duckdb
import pytest

import pcor_sql
from pcor_sql.frontend.statement_parser import parse_statement
from tests.test_analyst import make_owner

QUERY = "SELECT salary FROM salaries WHERE id = 42"
#: A start that does not hold record 42 (its year is 2018): refused once the record is read, after the reservation.
NOT_ITS_START = "year IN ('2012')"


@pytest.fixture
def session():
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    return pcor_sql.Session(con, ledger=":memory:", warn=lambda m: None)


def _rows(session):
    return sorted(session.ledger().history(), key=lambda h: h.seq)


def _ocdp(session):
    [status] = [s for s in session.ledger().statuses("ocdp") if s.unit == "bundled:salaries"]
    return status


def test_a_request_refused_after_its_reservation_is_no_release(session):
    with pytest.raises(pcor_sql.UserError, match="does not contain the record"):
        pcor_sql.explain_outlier(None, QUERY, session=session, verifier="grubbs", start=NOT_ITS_START)
    status = _ocdp(session)
    assert (status.spent, status.releases) == (0.0, 0)
    [row] = _rows(session)
    assert (row.outcome, row.reason, row.refunded) == ("failed", "data", True)


def test_a_failed_uncharged_row_shows_the_total_it_left(session):
    pcor_sql.explain_outlier(None, QUERY, session=session, verifier="grubbs", epsilon=0.3)
    with pytest.raises(pcor_sql.UserError):
        pcor_sql.explain_outlier(None, QUERY, session=session, verifier="grubbs", epsilon=0.2, start=NOT_ITS_START)
    answered, failed = _rows(session)
    assert answered.spent_after == pytest.approx(0.3)
    assert failed.shown_outcome == "failed: data (not charged)"
    assert failed.spent_after == pytest.approx(0.3)  # not 0.5: nothing was spent
    assert (_ocdp(session).spent, _ocdp(session).releases) == (pytest.approx(0.3), 1)


def test_a_batch_row_after_a_refunded_one_does_not_count_it(session):
    pcor_sql.explain_outliers(None, "SELECT salary FROM salaries WHERE id IN (42, 1)", session=session,
                              verifier="grubbs", epsilon=0.2)
    refunded, answered = _rows(session)
    assert refunded.refunded and refunded.spent_after == pytest.approx(0.0)
    assert not answered.refunded and answered.spent_after == pytest.approx(0.2)


def test_the_owner_history_says_what_was_asked_and_reads_back_as_the_same_request(session):
    pcor_sql.explain_outlier(None, QUERY, session=session, verifier="lof(k=10)", search="dfs", epsilon=0.25,
                             by="job_title,year")
    [row] = _rows(session)
    assert row.statement.startswith('EXPLAIN OUTLIER SELECT salary FROM salaries WHERE (id = 42) BY "job_title", '
                                    '"year" USING lof(k=10, threshold=1.5) WITH (epsilon = 0.25, search = \'dfs\'')
    statement = parse_statement(session.access.parser, row.statement)
    assert statement.verifier.options_dict() == {"k": 10, "threshold": 1.5}
    assert statement.by == ("job_title", "year")
    given = statement.options()
    assert (given["epsilon"], given["search"], given["utility"]) == (0.25, "dfs", "population")


def test_an_anomaly_answer_row_says_what_was_asked(session):
    pcor_sql.identify_anomaly(None, QUERY, session=session, beta=5, radius=1000, epsilon=0.5, privacy="dp")
    [row] = _rows(session)
    assert row.statement == ('IDENTIFY ANOMALY SELECT "salary" FROM salaries WHERE (id = 42) WITH (beta = 5, '
                             "radius = 1000, epsilon = 0.5, privacy = 'dp', norm = 'l2')")
    assert parse_statement(session.access.parser, row.statement).options()["privacy"] == "dp"


@pytest.mark.parametrize("how", ["call", "statement"])
def test_an_analyst_history_row_says_what_was_asked_and_holds_no_token(how):
    owner = make_owner()
    token = owner.add_analyst("ana")
    analyst = owner.analyst()
    if how == "call":
        analyst.explain_outliers("people", [42, 43], verifier="grubbs", epsilon=0.1)
    else:
        analyst.sql("EXPLAIN OUTLIER SELECT pay FROM people WHERE id IN (42, 43) USING grubbs WITH (epsilon = 0.1)")
    rows = owner.ledger.history()
    assert len(rows) == 2 and len({r.statement for r in rows}) == 1
    text = rows[0].statement
    assert text.startswith('EXPLAIN OUTLIER SELECT "pay" FROM people WHERE "id" IN (42, 43) BY "dept", "year" '
                           "USING grubbs(alpha=0.05) WITH (epsilon = 0.1, search = 'bfs', samples = 50")
    assert token not in text and "pcor_" not in text
