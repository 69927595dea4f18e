"""What an analyst is told when the ledger refuses, over real HTTP (127.0.0.1): only what they
sent or own. A unit's name (the owner's catalog), its limit and spent ε (the owner's and other
analysts' spending) never reach them; a unit's limit and their own quota read alike; their
/v1/me, /v1/history and /v1/cost do not move when others spend. The owner keeps the detail."""

from __future__ import annotations

import json

import duckdb
import httpx
import pytest

import pcor_sql
import pcor_sql.service
from pcor_sql.errors import BudgetExceeded, Refused
from tests.service.live_server import live_server

#: Internal names the analyst never sent: the tables behind the datasets.
TABLE, OPEN_TABLE = "staff_private_2024", "contractors_unlimited"
OUTLIERS = (7, 31)
FAST = {"epsilon": 0.1, "verifier": "grubbs"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = tmp_path_factory.mktemp("refusals") / "staff.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TYPE dept AS ENUM ('a', 'b', 'c'); CREATE TYPE yr AS ENUM ('2020', '2021')")
    con.execute(
        f"CREATE TABLE {TABLE} AS SELECT i AS id, (['a', 'b', 'c'])[i % 3 + 1]::dept AS dept,"
        f" (['2020', '2021'])[i % 2 + 1]::yr AS year, CASE WHEN i IN {OUTLIERS} THEN 5000.0 + i"
        f" ELSE 100.0 + (i * 37 % 11) END AS pay FROM range(90) t(i)")
    con.execute(f"CREATE TABLE {OPEN_TABLE} AS SELECT * FROM {TABLE}")
    owner = pcor_sql.Owner(con, warn=lambda message: None)
    owner.register("pay", TABLE, key="id", metric="pay", by="dept,year", limit=1.0, releasable=list(OUTLIERS))
    # No limit on its table in a ledger that holds limits: every charge on it is refused.
    owner.register("open", OPEN_TABLE, key="id", metric="pay", by="dept,year", releasable=list(OUTLIERS))
    tokens = {"alice": owner.add_analyst("alice", quota=5.0), "bob": owner.add_analyst("bob", quota=5.0),
              "dave": owner.add_analyst("dave", quota=0.15)}
    with live_server(pcor_sql.service.app(owner, workers=2, processes=False)) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            yield owner, client, tokens
    con.close()


def call(client, path: str, token: str, body=None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    if body is None:
        return client.get(path, headers=headers)
    return client.post(path, content=json.dumps(body), headers={**headers, "Content-Type": "application/json"})


def explain(client, token: str, epsilon: float = 0.1, dataset: str = "pay") -> httpx.Response:
    return call(client, "/v1/explain", token, {**FAST, "dataset": dataset, "keys": [OUTLIERS[0]], "epsilon": epsilon})


def names_nothing_internal(response: httpx.Response) -> None:
    text = response.text
    for internal in (TABLE, OPEN_TABLE, "unit", "spent", "remaining", "alice", "bob", "dave", "pcor-sql budget"):
        assert internal not in text, (internal, text)


def test_a_units_limit_and_the_analysts_quota_read_alike_and_name_nothing_internal(served):
    owner, client, tokens = served
    assert explain(client, tokens["dave"]).status_code == 200  # dave: 0.1 of his 0.15
    quota = explain(client, tokens["dave"])  # his quota refuses (the unit has 0.9 left)
    assert explain(client, tokens["alice"], epsilon=0.85).status_code == 200  # the unit: 0.95 of 1.0
    before = owner.ledger.history()
    unit = explain(client, tokens["bob"])  # bob's quota has room: the unit's limit refuses
    assert quota.status_code == unit.status_code == 429
    assert quota.json() == unit.json()  # which limit refused is not told, nor anything about it
    names_nothing_internal(unit)
    for figure in ("0.95", "0.85", "0.05", "1.0"):  # the unit's spent, alice's spend, what is left, the limit
        assert figure not in unit.text
    assert "ε = 0.1" in unit.json()["error"]  # what the request itself said is fine
    assert owner.ledger.history() == before
    # The in-process analyst handle says the same; the owner's own request gets the detail.
    with pytest.raises(BudgetExceeded) as in_process:
        owner.analyst().explain_outlier("pay", OUTLIERS[0], **FAST)
    assert in_process.value.problem == unit.json()["error"]
    with pytest.raises(BudgetExceeded, match=TABLE) as detailed:
        owner.explain_outlier(f"SELECT pay FROM {TABLE} WHERE id = {OUTLIERS[0]}", **FAST)
    assert "spent" in str(detailed.value)


def test_a_unit_without_a_limit_is_refused_without_its_name(served):
    owner, client, tokens = served
    before = owner.ledger.history()
    refused = explain(client, tokens["alice"], dataset="open")
    assert refused.status_code == 403
    names_nothing_internal(refused)
    cost = call(client, "/v1/cost", tokens["alice"], {**FAST, "dataset": "open", "keys": [OUTLIERS[0]]})
    assert cost.status_code == 200  # a preview is no charge: the limits are not its business
    with pytest.raises(Refused) as in_process:
        owner.analyst().explain_outlier("open", OUTLIERS[0], **FAST)
    assert in_process.value.problem == refused.json()["error"]
    assert owner.ledger.history() == before


def test_what_an_analyst_sees_of_accounts_does_not_move_when_others_spend(served):
    owner, client, tokens = served
    body = {**FAST, "dataset": "pay", "keys": [OUTLIERS[1]]}
    seen = [(call(client, "/v1/me", tokens["dave"]).json(), call(client, "/v1/history", tokens["dave"]).json(),
             call(client, "/v1/cost", tokens["dave"], body).json(), explain(client, tokens["dave"]).json())]
    owner.set_limit(TABLE, 3.0)  # the owner changes the unit: the analysts' views must not show it
    assert explain(client, tokens["alice"], epsilon=0.5).status_code == 200
    assert explain(client, tokens["bob"], epsilon=0.5).status_code == 200
    seen.append((call(client, "/v1/me", tokens["dave"]).json(), call(client, "/v1/history", tokens["dave"]).json(),
                 call(client, "/v1/cost", tokens["dave"], body).json(), explain(client, tokens["dave"]).json()))
    assert seen[0] == seen[1]
    me, history, _, _ = seen[1]
    assert {u["notion"] for u in me["usage"]} == {"ocdp", "dp", "sp"} and all(h["key"] for h in history["history"])
    assert all(set(h) == {"release_id", "requested_at", "notion", "epsilon", "k", "mechanism", "dataset", "key",
                          "outcome"} for h in history["history"])
