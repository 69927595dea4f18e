"""Schemathesis over the owner's OpenAPI document (DESIGN.md §5 "Errors"), against the
owner's listener on a real uvicorn on 127.0.0.1, bounded in count and time: no 5xx, no traceback,
every error `{error, fix}`, for bodies, paths and query strings that fit the schemas and ones that
do not, with the owner token."""

from __future__ import annotations

import time

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.generation.modes import GenerationMode

import pcor_sql.service
from pcor_sql.service.endpoint_table import Caller
from pcor_sql.service.owner_app import OWNER_ENDPOINTS, owner_app
from tests.client.served_dataset import make_database, register
from tests.service.live_server import live_listeners

pytestmark = pytest.mark.slow
TOKEN = "pcor_owner_fuzz-0123456789"
OPERATIONS = [(e.method, e.path) for e in OWNER_ENDPOINTS if e.caller is Caller.OWNER]
EXAMPLES = 12
BUDGET_S = 40.0
_clock: list[float] = []


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    con = make_database(tmp_path_factory.mktemp("owner-fuzz") / "staff.duckdb")
    try:
        owner, _ = register(con)
        analysts = pcor_sql.service.app(owner, workers=2)
        with live_listeners(analysts, owner_app(analysts.state.service, TOKEN)) as (_, owner_url):
            yield owner_url
    finally:
        con.close()


@pytest.fixture(scope="module")
def document(served):
    return schemathesis.openapi.from_url(served + "/v1/owner/openapi.json")


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_no_5xx_and_every_error_is_error_and_fix(served, document, method, path, mode):
    operation = document[path][method]
    headers = {"Authorization": f"Bearer {TOKEN}"}

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def one(case):
        if not _clock:
            _clock.append(time.monotonic())
        if time.monotonic() - _clock[0] > BUDGET_S:
            return
        response = case.call(base_url=served, headers=headers, timeout=60)
        where = (method, path, str(mode), case.path_parameters, case.query, case.body, response.status_code,
                 response.text[:300])
        assert response.status_code < 500, where
        assert "Traceback" not in response.text and 'File "' not in response.text, where
        if response.status_code >= 400:
            assert set(response.json()) == {"error", "fix"}, where

    try:
        one()
    except Exception as exc:  # hypothesis cannot draw a negative case for an operation that takes nothing
        if "Unsatisfiable" not in type(exc).__name__:
            raise
