"""Progress reports: DuckDB's progress of a long query in thousandths, phases for callbacks that
listen, and nothing extra — no statement, no setting changed — without a callback."""

from __future__ import annotations

import duckdb
import pytest

import pcor_sql
from pcor_sql.engine import progress as progress_module
from pcor_sql.engine.progress import PERMILLE, report_phase, watch_query
from tests.engine.query_log import statements_run

SLOW = "SELECT g, count(*), avg(v), var_samp(v) FROM big GROUP BY g"


class Recorder:
    def __init__(self):
        self.counts: list[tuple[int, int]] = []
        self.phases: list[str] = []

    def __call__(self, done, total):
        self.counts.append((done, total))

    def phase(self, label):
        self.phases.append(label)


@pytest.fixture(scope="module")
def big():
    con = duckdb.connect()
    con.execute("CREATE TABLE big AS SELECT (i % 97) AS g, random() AS v FROM range(8000000) t(i)")
    yield con
    con.close()


def settings(con):
    return con.execute(
        "SELECT current_setting('enable_progress_bar'), current_setting('enable_progress_bar_print')"
    ).fetchall()[0]


def test_a_long_query_is_reported_in_thousandths_and_settings_come_back(big, monkeypatch):
    monkeypatch.setattr(progress_module, "_POLL_SECONDS", 0.01)
    before = settings(big)
    recorder = Recorder()
    with watch_query(big, recorder, "summing"):
        big.execute(SLOW).fetchall()
    assert recorder.phases == ["summing"]
    assert recorder.counts, "no report during a query of several hundred milliseconds"
    assert all(total == PERMILLE and 0 <= done <= PERMILLE for done, total in recorder.counts)
    assert [d for d, _ in recorder.counts] == sorted(d for d, _ in recorder.counts)
    assert settings(big) == before


def test_without_a_callback_no_statement_is_added(big):
    def watched(callback):
        def action():
            with watch_query(big, callback, "summing"):
                big.execute("SELECT 1").fetchall()
        return action

    _, plain = statements_run(big, watched(None))
    _, with_callback = statements_run(big, watched(Recorder()))
    assert plain == ["SELECT 1"]
    assert len(with_callback) > 1 and "SELECT 1" in with_callback


def test_a_plain_function_gets_counts_only():
    calls = []
    report_phase(lambda done, total: calls.append((done, total)), "phase")
    report_phase(None, "phase")
    assert calls == []


def test_a_batch_reports_records_done_and_a_single_release_its_search():
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    recorder = Recorder()
    pcor_sql.explain_outliers(con, "SELECT salary FROM salaries WHERE id IN (42, 171)", verifier="grubbs", seed=1,
                              progress=recorder)
    assert recorder.phases == ["charging the budget ledger", "building the summary", "releasing records"]
    assert recorder.counts[-2:] == [(1, 2), (2, 2)]
    single = Recorder()
    pcor_sql.explain_outlier(con, "SELECT salary FROM salaries WHERE id = 42", verifier="grubbs", seed=1,
                             search="direct", by="job_title,year", progress=single)
    assert single.phases == ["charging the budget ledger", "building the summary", "searching"]
    assert single.counts and single.counts[-1][0] == single.counts[-1][1]  # direct enumerated every context
    answers = Recorder()
    pcor_sql.identify_anomalies(con, "SELECT salary FROM salaries WHERE id < 4", beta=5, radius=1, epsilon=0.1,
                                progress=answers)
    assert answers.phases == ["counting neighbours", "charging the budget ledger", "drawing the answers"]


class RefusesTheBar:
    """A connection as DuckDB is in a Jupyter kernel without ipywidgets: any progress-bar
    setting raises InvalidInputException (the rest is a real connection's)."""

    def __init__(self, con):
        self.con = con

    def execute(self, sql, *args):
        if sql.startswith("SET enable_progress_bar"):
            raise duckdb.InvalidInputException("Could not change the progress bar setting: ipywidgets is missing")
        return self.con.execute(sql, *args)


def test_where_duckdb_refuses_its_bar_the_start_and_end_are_reported():
    con = duckdb.connect()
    before = settings(con)
    recorder = Recorder()
    with watch_query(RefusesTheBar(con), recorder, "building the summary"):
        con.execute("SELECT 1").fetchall()
    assert recorder.phases == ["building the summary"]
    assert recorder.counts == [(0, PERMILLE), (PERMILLE, PERMILLE)]
    assert settings(con) == before
