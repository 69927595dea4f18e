"""The analyst service over real HTTP (DESIGN.md §8 "Serving"): a uvicorn server on 127.0.0.1 serves a DuckDB
file; every attack below is refused or harmless, and nothing is charged where
nothing was answered."""

from __future__ import annotations

import json
import threading

import duckdb
import httpx
import pytest

import pcor_sql
import pcor_sql.service
from pcor_sql.ledger.analysts import add_analyst, revoke_analyst
from tests.service.live_server import live_server

ROWS = 150
#: Each alone in its (dept, year) cell, with pay falling as the id grows: sorted by pay (the
#: table's first column, what `ORDER BY ALL` would sort by) they come in reverse id order.
OUTLIERS = (10, 41, 72, 103, 134)
STACKED = "42); UPDATE pcor.budget SET spent_epsilon = 0; --"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = tmp_path_factory.mktemp("service") / "staff.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TYPE dept AS ENUM ('a', 'b', 'c'); CREATE TYPE yr AS ENUM ('2020', '2021')")
    outliers = ", ".join(map(str, OUTLIERS))
    con.execute(
        f"CREATE TABLE staff AS SELECT CASE WHEN i IN ({outliers}) THEN 9000.0 - i * 10 ELSE 100.0 + (i * 37 % 11) END"
        f" AS pay, i AS id, (['a', 'b', 'c'])[i % 3 + 1]::dept AS dept, (['2020', '2021'])[i % 2 + 1]::yr AS year"
        f" FROM range({ROWS}) t(i)")
    con.execute("CREATE TABLE capped AS SELECT * FROM staff")
    owner = pcor_sql.Owner(con, warn=lambda message: None)
    owner.register("staff", "staff", key="id", metric="pay", by="dept,year", limit=1000.0,
                   releasable=[*range(ROWS), 9999, STACKED])
    owner.register("closed", "staff", key="id", metric="pay", by="dept")
    owner.register("capped", "capped", key="id", metric="pay", by="dept,year", limit=0.5, releasable=list(OUTLIERS))
    tokens = {name: add_analyst(owner.ledger, name) for name in ("alice", "bob", "carol")}
    tokens["dave"] = add_analyst(owner.ledger, "dave", quota=0.25, notion="ocdp")
    tokens["erin"] = add_analyst(owner.ledger, "erin", datasets=["capped"])
    revoke_analyst(owner.ledger, "carol")
    app = pcor_sql.service.app(owner, max_keys=10, max_body=16384, workers=8, processes=False)
    with live_server(app) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            yield owner, client, tokens
    con.close()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def state(owner) -> tuple:
    """Everything a charge would change: the history and each unit's spent ε per notion."""
    return owner.ledger.history(), tuple((s.unit, s.notion, s.spent) for s in owner.ledger.statuses())


def post(client, path: str, token: str, body, **kw) -> httpx.Response:
    content = body if isinstance(body, (str, bytes)) else json.dumps(body)
    headers = {"Content-Type": "application/json", **auth(token), **kw.pop("headers", {})}
    return client.post(path, content=content, headers=headers, **kw)


def no_traceback(response: httpx.Response) -> None:
    assert "Traceback" not in response.text and 'File "' not in response.text
    if response.status_code >= 400:
        assert set(response.json()) == {"error", "fix"}


EXPLAIN = {"dataset": "staff", "epsilon": 0.1, "verifier": "grubbs"}
IDENTIFY = {"dataset": "staff", "beta": 2, "radius": 5, "epsilon": 0.1}


def test_a_token_is_needed_and_every_bad_token_gets_the_same_401(served):
    owner, client, tokens = served
    before = state(owner)
    seen = set()
    for headers in ({}, {"Authorization": "Basic YWxpY2U6eA=="}, {"Authorization": "Bearer"},
                    {"Authorization": "Bearer " + "x" * 43}, {"Authorization": "Bearer " + "y" * 2000},
                    auth(tokens["carol"]), auth(tokens["alice"] + "x")):
        r = client.post("/v1/explain", json={**EXPLAIN, "keys": [10]}, headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        seen.add(r.text)
    assert len(seen) == 1 and state(owner) == before
    assert client.get("/openapi.json").status_code == 200


def test_an_explanation_releases_only_the_key_the_context_and_the_privacy_parameters(served):
    owner, client, tokens = served
    r = post(client, "/v1/explain", tokens["alice"], {**EXPLAIN, "keys": [10]})
    assert r.status_code == 200, r.text
    [result] = r.json()["results"]
    assert set(result) == {"dataset", "key", "metric", "context", "predicate", "explanation_sql", "epsilon",
                           "epsilon1", "accounting", "search", "samples", "verifier", "utility", "summary",
                           "privacy_summary"}
    assert result["key"] == 10 and "8900" not in r.text and r.headers["cache-control"] == "no-store"


def test_results_come_back_in_the_order_of_the_keys(served):
    owner, client, tokens = served
    keys = [41, 134, 10, 103]
    r = post(client, "/v1/explain", tokens["alice"], {**EXPLAIN, "keys": keys})
    assert r.status_code == 200, r.text
    assert [x["key"] for x in r.json()["results"]] == keys  # not by id, not by pay (the table's first column)


@pytest.mark.parametrize("epsilon, status", [(1e-300, 403), (0.009, 403), (0, 400), (-1, 400), ("0.1", 400),
                                              (True, 400), (None, 400)])
def test_probing_at_a_tiny_epsilon_is_refused_and_free(served, epsilon, status):
    owner, client, tokens = served
    before = state(owner)
    for path, body in (("/v1/explain", {**EXPLAIN, "keys": [10]}), ("/v1/identify", {**IDENTIFY, "value": {"pay": 9}})):
        r = post(client, path, tokens["alice"], {**body, "epsilon": epsilon})
        assert r.status_code == status, r.text
        no_traceback(r)
    assert state(owner) == before


@pytest.mark.parametrize("raw", ['{"dataset": "staff", "keys": [10], "epsilon": NaN}',
                                 '{"dataset": "staff", "keys": [10], "epsilon": 1e400}',
                                 '{"dataset": "staff", "keys": [10], "epsilon": 0.5, "epsilon": 1e-300}',
                                 '{"dataset": "staff", "keys": [10.0], "epsilon": 0.1}',
                                 '{"dataset": "staff", "keys": [true], "epsilon": 0.1}',
                                 '{"dataset": "staff", "keys": [1' + "0" * 4400 + '], "epsilon": 0.1}',
                                 '{"dataset": "staff", "keys": 10, "epsilon": 0.1}',
                                 '{"dataset": "staff", "keys": [[[[[[10]]]]]], "epsilon": 0.1}',
                                 '{"dataset": "staff", "keys": [10], "epsilon": 0.1, "verifier": {"__class__": "Spy"}}',
                                 '{"dataset": "staff", "keys": [10], "epsilon": 0.1, "seed": 7}',
                                 '{"dataset": "staff", "keys": [10], "epsilon": 0.1, "owner_view": true}',
                                 '{"dataset": ["staff"], "keys": [10], "epsilon": 0.1}',
                                 '{"dataset": "staff", "keys": [1,2,3,4,5,6,7,8,9,10,11], "epsilon": 0.1}',
                                 '{"dataset": "staff", "keys": ["' + "k" * 1001 + '"], "epsilon": 0.1}',
                                 '[' * 3000 + ']' * 3000,
                                 '"staff"', 'not json', b'\xff\xfe'])
def test_only_plain_bounded_json_crosses_and_refusals_charge_nothing(served, raw):
    owner, client, tokens = served
    before = state(owner)
    r = post(client, "/v1/explain", tokens["alice"], raw)
    # An owner's option is refused by the trust model (403, as the README says), the rest is bad input.
    assert r.status_code == (403 if '"seed"' in str(raw) or '"owner_view"' in str(raw) else 400), r.text
    no_traceback(r)
    assert state(owner) == before


def test_size_type_and_path_refusals_are_json(served):
    owner, client, tokens = served
    before = state(owner)
    big = post(client, "/v1/explain", tokens["alice"], json.dumps({**EXPLAIN, "keys": [10], "pad": "x" * 20000}))
    text = client.post("/v1/explain", content="{}", headers={**auth(tokens["alice"]), "Content-Type": "text/plain"})
    missing = client.get("/v1/nothing", headers=auth(tokens["alice"]))
    wrong = client.get("/v1/explain", headers=auth(tokens["alice"]))
    assert [big.status_code, text.status_code, missing.status_code, wrong.status_code] == [413, 415, 404, 405]
    for r in (big, text, missing, wrong):
        no_traceback(r)
    assert state(owner) == before


def test_the_stacked_statement_key_is_inert(served):
    """The issue's key text, declared releasable by the owner, is a string for an integer key
    column: refused before the reservation (DESIGN.md §8 "Inputs are exact"), and the budget is not
    reset. The same text as a literal is tested on a text key in tests/client."""
    owner, client, tokens = served
    before = state(owner)
    r = post(client, "/v1/explain", tokens["alice"], {**EXPLAIN, "keys": [STACKED]})
    assert r.status_code == 400 and "integer" in r.json()["error"]
    no_traceback(r)
    assert state(owner) == before


def test_membership_is_not_told_by_refusals_or_failures(served):
    owner, client, tokens = served
    before = state(owner)
    outside = {post(client, "/v1/explain", tokens["alice"], {"dataset": "staff", "epsilon": 0.1, "keys": [key]}).text
               for key in (150, 151, 5000, -3)}  # 150.. are not releasable (and do not exist either)
    closed = post(client, "/v1/explain", tokens["alice"], {"dataset": "closed", "epsilon": 0.1, "keys": [10]})
    assert len(outside) == 1 and "not among the releasable keys" in outside.pop()
    assert closed.status_code == 403 and "declared none" in closed.json()["error"]
    assert state(owner) == before
    # Inside the set, a key that exists but has no valid context and one that does not exist
    # are both charged, with one body: the data decides neither whether to charge nor what is said.
    spent = owner.spent("staff")
    failures = {post(client, "/v1/explain", tokens["alice"], {**EXPLAIN, "keys": [key]}).text for key in (3, 9999)}
    assert len(failures) == 1 and owner.spent("staff") == pytest.approx(spent + 0.2)


def test_identify_answers_a_point_present_or_absent_alike(served):
    owner, client, tokens = served
    spent = owner.spent("staff", "sp")
    shapes = set()
    for value in ({"pay": 8900.0}, {"pay": 8900.5}, {"pay": -1e9}):
        r = post(client, "/v1/identify", tokens["bob"], {**IDENTIFY, "value": value})
        assert r.status_code == 200, r.text
        [answer] = r.json()["results"]
        assert answer["value"] == value and type(answer["anomaly"]) is bool
        shapes.add(tuple(sorted(answer)))
    assert len(shapes) == 1 and owner.spent("staff", "sp") == pytest.approx(spent + 0.3)
    assert owner.ledger.history()[-1].record_key == "value (pay = -1000000000.0)"
    r = post(client, "/v1/identify", tokens["bob"], {**IDENTIFY, "value": {"id": 3}})
    assert r.status_code == 400 and "not a metric" in r.json()["error"]


def test_cost_datasets_me_and_history(served):
    owner, client, tokens = served
    before = state(owner)
    cost = post(client, "/v1/cost", tokens["alice"], {**EXPLAIN, "keys": [10, 41]}).json()
    assert cost == {"dataset": "staff", "notion": "ocdp", "epsilon": 0.1, "k": None, "count": 2,
                    "total": pytest.approx(0.2)}
    point = post(client, "/v1/cost", tokens["alice"], {**IDENTIFY, "value": {"pay": 1}, "privacy": "dp"}).json()
    assert (point["notion"], point["total"]) == ("dp", 0.1)
    both = post(client, "/v1/cost", tokens["alice"], {**EXPLAIN, "keys": [10], "value": {"pay": 1}})
    assert both.status_code == 400
    assert state(owner) == before
    datasets = client.get("/v1/datasets", headers=auth(tokens["alice"])).json()["datasets"]
    staff = next(d for d in datasets if d["name"] == "staff")
    assert staff == {"name": "staff", "key": "id", "metrics": ["pay"], "attributes": ["dept", "year"],
                     "domains": {"dept": ["a", "b", "c"], "year": ["2020", "2021"]}, "releasable_keys": ROWS + 2,
                     "accounting": None}
    me = client.get("/v1/me", headers=auth(tokens["alice"])).json()
    assert me["analyst"] == "alice" and me["min_epsilon"] == 0.01
    assert client.get("/v1/history", headers=auth(tokens["alice"])).status_code == 200


def test_eight_concurrent_requests_all_answered_and_the_limit_never_overspent(served):
    """8 threads at once on one DuckDB file: each request on its own cursor, none fails
    because another runs; on a unit limited to 0.5, exactly 5 of 8 charges of 0.1 fit."""
    owner, client, tokens = served
    barrier = threading.Barrier(8)
    out: dict[tuple[str, int], httpx.Response] = {}

    def ask(path: str, i: int, body: dict) -> None:
        barrier.wait(timeout=30)
        out[path, i] = post(client, path, tokens["alice"], body)

    spent = owner.spent("staff")
    threads = [threading.Thread(target=ask, args=("/v1/explain", i, {**EXPLAIN, "keys": [OUTLIERS[i % 5]]}))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [r.status_code for r in out.values()] == [200] * 8, [r.text for r in out.values()]
    assert owner.spent("staff") == pytest.approx(spent + 0.8)

    out.clear()
    barrier.reset()
    capped = [threading.Thread(target=ask, args=("/v1/explain", i, {**EXPLAIN, "dataset": "capped", "keys": [10]}))
              for i in range(8)]
    for t in capped:
        t.start()
    for t in capped:
        t.join(timeout=60)
    codes = sorted(r.status_code for r in out.values())
    assert codes == [200] * 5 + [429] * 3, [r.text for r in out.values()]
    assert owner.spent("capped") == pytest.approx(0.5)


def test_a_quota_is_kept_and_the_analyst_sees_only_their_own(served):
    owner, client, tokens = served
    body = {**EXPLAIN, "keys": [41]}
    codes = [post(client, "/v1/explain", tokens["dave"], body).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    me = client.get("/v1/me", headers=auth(tokens["dave"])).json()
    [ocdp] = [u for u in me["usage"] if u["notion"] == "ocdp" and u["dataset"] is None]
    assert ocdp["limit"] == 0.25 and ocdp["spent"] == pytest.approx(0.2) and ocdp["remaining"] == pytest.approx(0.05)
    history = client.get("/v1/history", headers=auth(tokens["dave"])).json()["history"]
    assert [(h["key"], h["outcome"], h["epsilon"]) for h in history] == [("key = 41", "answered", 0.1)] * 2
    assert sum(h["epsilon"] for h in history) == pytest.approx(ocdp["spent"])
    assert all("unit" not in h for h in history)
    assert {h.analyst for h in owner.ledger.history() if h.record_key == "key = 41" and h.analyst == "dave"} == {"dave"}


def test_an_analyst_limited_to_some_datasets_sees_and_uses_only_those(served):
    owner, client, tokens = served
    before = state(owner)
    names = [d["name"] for d in client.get("/v1/datasets", headers=auth(tokens["erin"])).json()["datasets"]]
    assert names == ["capped"]
    other = post(client, "/v1/explain", tokens["erin"], {**EXPLAIN, "keys": [10]})
    missing = post(client, "/v1/explain", tokens["erin"], {**EXPLAIN, "dataset": "nosuch", "keys": [10]})
    assert other.status_code == missing.status_code == 403
    assert other.json()["fix"] == missing.json()["fix"] == "yours: capped"
    assert state(owner) == before
