"""The Session runs requests: one registry, one ledger, cached summaries, return-type rules."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

import pcor_sql
from pcor_sql.core.verifiers.registry import default_registry
from pcor_sql.engine.datasets import load_dataset

Q = "SELECT salary FROM salaries WHERE id = 42"


@pytest.fixture(scope="module")
def con():
    connection = duckdb.connect()
    load_dataset(connection, "salaries")
    yield connection
    connection.close()


def _far_from_median(values: np.ndarray, v: float) -> bool:
    """A custom verifier only this test's registry knows."""
    return values.size >= 3 and abs(v - float(np.median(values))) > 3 * float(values.std() or 1.0)


@pytest.fixture()
def session(con):
    registry = default_registry()
    registry.register_python("far", _far_from_median)
    return pcor_sql.Session(con, registry=registry)


def test_a_custom_verifier_registered_on_the_session_serves_explain_coe_and_sql(session, con):
    calls = []
    registry = session.registry

    def counting(values, v):
        calls.append(values.size)
        return _far_from_median(values, v)

    registry.register_python("counted", counting)
    r = pcor_sql.explain_outlier(None, Q, session=session, verifier="counted", seed=3, search="dfs", samples=5)
    assert r.verifier == "counted()" and calls
    calls.clear()
    [c] = pcor_sql.coe(None, Q, session=session, verifier="counted", by=["job_title"])
    assert c.verifier == "counted()" and calls and c.size >= 1
    calls.clear()
    [s] = pcor_sql.sql(None, f"EXPLAIN OUTLIER {Q} USING counted WITH (seed = 3, search = 'dfs', samples = 5)",
                       session=session)
    assert s.verifier == "counted()" and calls
    with pytest.raises(pcor_sql.UserError, match="counted"):
        pcor_sql.explain_outlier(con, Q, verifier="counted")  # a fresh session has only the built-ins


def test_session_runs_requests_built_once(session, con):
    request = pcor_sql.outlier_request(con, Q, verifier="far", seed=5, search="dfs", samples=5)
    first = session.explain(request)
    again = session.explain(request)
    assert [e.context for e in first] == [e.context for e in again]  # same seed, same data
    assert len(session._summaries) == 1  # the summary was built once and reused


def test_session_refuses_what_is_not_a_request_or_connection(session):
    with pytest.raises(pcor_sql.UserError, match="OutlierRequest"):
        session.explain("SELECT 1")
    with pytest.raises(pcor_sql.UserError, match="DuckDB connection"):
        pcor_sql.Session("salaries.duckdb")
    with pytest.raises(pcor_sql.UserError, match="DuckDB connection"):
        pcor_sql.explain_outlier("not a connection", Q)


def test_prepare_is_uncharged_and_its_release_matches_explain(con):
    session = pcor_sql.Session(con)
    request = pcor_sql.outlier_request(con, Q, verifier="grubbs", seed=11)
    before = session.ledger().status("bundled:salaries").spent
    run = session.prepare(request)
    assert session.ledger().status("bundled:salaries").spent == before
    assert [r.record["id"] for r in run.records] == [42]
    oracle = run.oracle(0)
    assert oracle.is_valid(run.space(0).v_mask) in (True, False)
    from pcor_sql.core.randomness import make_source

    rel = run.release(0, make_source(11)[0])
    [e] = session.explain(request)
    assert rel.space.values(rel.mask) == e.context
