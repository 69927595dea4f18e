"""No cross-analyst channels (DESIGN.md §8 "No cross-analyst channels"): analyst B's work — hence time — on a
key does not depend on whether analyst A asked about it. Verdict caches are per asker; summaries
are built for everyone before serving."""

from __future__ import annotations

import json
import statistics
import time

import httpx
import pytest

import pcor_sql.service
from tests.client.served_dataset import OUTLIERS, Served, make_database, register
from tests.service.live_server import live_server

BODY = {"dataset": "staff", "epsilon": 0.05, "verifier": "lof(k=3)", "samples": 30}


@pytest.fixture(scope="module", params=["threads", "processes"])
def served(tmp_path_factory, request):
    """The service searching in its threads (where a test can look at the verdict caches) and in
    its search processes (the default: the caches live in the child, keyed the same way)."""
    con = make_database(tmp_path_factory.mktemp("channels") / "staff.duckdb")
    try:
        owner, tokens = register(con)
        for name in ("ann", "ben", "cid"):
            tokens[name] = owner.add_analyst(name, quota=100.0)
        application = pcor_sql.service.app(owner, workers=1, processes=request.param == "processes")
        with live_server(application) as url:
            yield Served(url, owner, tokens), application.state.service
    finally:
        con.close()


def ask(served, name: str, key: int, **extra) -> httpx.Response:
    r = httpx.post(served.url + "/v1/explain", content=json.dumps({**BODY, "keys": [key], **extra}), timeout=60,
                   headers={"Content-Type": "application/json", "Authorization": f"Bearer {served.tokens[name]}"})
    assert r.status_code == 200, r.text
    return r


def groups(service) -> list[tuple]:
    """The verdict groups every worker Session holds: (partition, cell, value, verifier)."""
    out = []
    for session in service.pool.sessions():
        for summary in session._summaries.values():
            # With search processes the caches are the child's (asked over its socket).
            out.extend(summary.verdicts._groups if session.searches is None
                       else session.searches.verdict_groups(summary))
    return out


def test_the_summary_is_built_before_any_request_and_verdicts_are_per_analyst(served):
    served, service = served
    assert [s._summaries for s in service.pool.sessions()] and all(s._summaries for s in service.pool.sessions())
    key = OUTLIERS[0]
    ask(served, "ann", key)
    mine = [g for g in groups(service) if g[0] == ("analyst", "ann")]
    assert len(mine) == 1
    ask(served, "ben", key)  # one worker: the same Session and summary as ann's request
    record = mine[0][1:]
    owners = sorted(str(g[0]) for g in groups(service) if g[1:] == record)
    assert owners == [str(("analyst", "ann")), str(("analyst", "ben"))]  # ben filled his own, not ann's


@pytest.mark.slow
def test_timing_does_not_tell_whether_someone_else_asked(served):
    served, _ = served
    """A bounded timing test: cid's latency on keys ann asked (warm for ann) and on keys nobody
    asked cannot be told apart better than a loose bound (a shared cache gave 94% in the issue)."""
    warm, cold = list(OUTLIERS[1:3]), [OUTLIERS[3]]
    for key in warm:
        for _ in range(2):
            ask(served, "ann", key)
    samples: dict[str, list[float]] = {"warm": [], "cold": []}
    for round_ in range(6):
        for label, keys in (("warm", warm), ("cold", cold)):
            key = keys[round_ % len(keys)]
            started = time.perf_counter()
            ask(served, "cid", key, samples=30 + round_)  # new options each time: cid's own cache misses too
            samples[label].append(time.perf_counter() - started)
    # A threshold at the pooled median: how often does it sort warm from cold?
    pooled = statistics.median(samples["warm"] + samples["cold"])
    right = sum(t < pooled for t in samples["warm"]) + sum(t >= pooled for t in samples["cold"])
    assert right / 12 <= 0.9, samples
