"""Refusals that need no data are answered before a request waits for a worker, over real HTTP
(127.0.0.1): the only worker is held by a release whose verifier waits on a gate, and a quota
refusal, a limit refusal, a key outside the releasable set and a cost preview still come back at
once. The worker's reservation stays the one that decides: two requests admitted together near
a quota get one charge and one 429."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

import pcor_sql
import pcor_sql.service
from pcor_sql.core.verifiers.registry import default_registry
from tests.client.served_dataset import OUTLIERS, make_database
from tests.service.live_server import live_server

#: How long a refusal may take while the worker is held (it takes milliseconds; the machine is shared).
PROMPT = 5.0
#: Bound on every wait of the test: the gate, the client, the polls.
BOUND = 30.0
FAST = {"dataset": "staff", "epsilon": 0.1, "verifier": "grubbs"}


class Gate:
    """A verifier that holds its worker until the test opens the gate (bounded by BOUND)."""

    def __init__(self) -> None:
        self.entered, self.opened = threading.Event(), threading.Event()

    def __call__(self, values, v) -> bool:
        self.entered.set()
        self.opened.wait(timeout=BOUND)
        return True  # every context holds the record: the release always answers


@pytest.fixture
def served(tmp_path):
    gate = Gate()
    registry = default_registry()
    registry.register_python("gated", gate)
    con = make_database(tmp_path / "staff.duckdb")
    try:
        owner = pcor_sql.Owner(con, warn=lambda message: None, registry=registry)
        owner.register("staff", "staff", key="id", metric="pay", by="dept,year", limit=100.0,
                       releasable=list(OUTLIERS))
        owner.register("capped", "tagged", key="tag", metric="pay", by="dept,year", limit=0.05, releasable=["a-7"])
        tokens = {"alice": owner.add_analyst("alice", quota=5.0), "bob": owner.add_analyst("bob", quota=0.05),
                  "dave": owner.add_analyst("dave", quota=0.15)}
        app = pcor_sql.service.app(owner, workers=1)
        with live_server(app) as url:
            with httpx.Client(base_url=url, timeout=BOUND) as client:
                yield owner, app.state.service, client, tokens, gate
            gate.opened.set()  # whatever happened, let the held worker finish before the server stops
    finally:
        con.close()


def post(client, token: str, path: str, body: dict, timeout: float = BOUND) -> httpx.Response:
    return client.post(path, content=json.dumps(body), timeout=timeout,
                       headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})


def hold_the_worker(client, tokens, gate) -> tuple[threading.Thread, dict]:
    """Alice's release takes the only worker and waits at the gate."""
    out: dict = {}

    def ask() -> None:
        out["held"] = post(client, tokens["alice"], "/v1/explain", {**FAST, "verifier": "gated", "keys": [OUTLIERS[0]]})

    thread = threading.Thread(target=ask)
    thread.start()
    assert gate.entered.wait(timeout=BOUND), "the gated release never reached its verifier"
    return thread, out


def test_refusals_are_answered_while_the_only_worker_is_busy(served):
    owner, service, client, tokens, gate = served
    thread, out = hold_the_worker(client, tokens, gate)
    try:
        timed = []
        for token, path, body in (
            ("bob", "/v1/explain", {**FAST, "keys": [OUTLIERS[1]]}),  # bob's quota: 0.05 < 0.1
            ("alice", "/v1/explain", {**FAST, "dataset": "capped", "keys": ["a-7"]}),  # the unit's limit
            ("bob", "/v1/identify", {"dataset": "staff", "value": {"pay": 1.0}, "beta": 2, "radius": 5, "epsilon": 0.1}),
            ("alice", "/v1/explain", {**FAST, "keys": [10_000]}),  # not releasable
            ("alice", "/v1/cost", {**FAST, "keys": [OUTLIERS[1]]}),
        ):
            started = time.monotonic()
            r = post(client, tokens[token], path, body, timeout=2 * PROMPT)
            timed.append((r.status_code, time.monotonic() - started))
        assert [code for code, _ in timed] == [429, 429, 429, 403, 200]
        assert max(seconds for _, seconds in timed) < PROMPT, timed
        assert service.pool.load() == (1, 0)  # the worker was held all along, and nothing queued behind it
    finally:
        gate.opened.set()
        thread.join(timeout=BOUND)
    assert out["held"].status_code == 200, out["held"].text


def test_two_requests_admitted_together_near_a_quota_are_charged_once(served):
    owner, service, client, tokens, gate = served
    thread, out = hold_the_worker(client, tokens, gate)
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def ask(key: int) -> None:
        r = post(client, tokens["dave"], "/v1/explain", {**FAST, "keys": [key]})
        with lock:
            answers.append(r)

    asking = [threading.Thread(target=ask, args=(key,)) for key in OUTLIERS[1:3]]
    try:
        for t in asking:
            t.start()
        deadline = time.monotonic() + BOUND
        # Both passed admission (dave had spent nothing) and wait for the worker.
        while service.queued() < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        # One waits for the worker, the other in dave's own line (one analyst never holds every worker).
        assert service.pool.load()[0] == 1 and service.queued() == 2
    finally:
        gate.opened.set()
        for t in (thread, *asking):
            t.join(timeout=BOUND)
    assert sorted(r.status_code for r in answers) == [200, 429], [r.text for r in answers]
    [usage] = [u for a in owner.analysts() if a.name == "dave" for u in a.usage
               if u.notion == "ocdp" and u.dataset is None]
    assert usage.spent == pytest.approx(0.1) and usage.releases == 1
    assert len([h for h in owner.ledger.history() if h.analyst == "dave"]) == 1


def test_a_request_that_finds_a_worker_free_is_not_admitted_twice(served, monkeypatch):
    """Admission is for a request that would wait: with the worker free, the worker's own checks
    are the only ones (one set of ledger reads); while it is held, the next request is admitted."""
    from pcor_sql.analyst import Analyst

    owner, service, client, tokens, gate = served
    admitted: list[str] = []
    real = Analyst.admit

    def counting(self, method, *args, **options):
        admitted.append(method)
        return real(self, method, *args, **options)

    monkeypatch.setattr(Analyst, "admit", counting)
    assert post(client, tokens["alice"], "/v1/explain", {**FAST, "keys": [OUTLIERS[1]]}).status_code == 200
    assert post(client, tokens["bob"], "/v1/explain", {**FAST, "keys": [OUTLIERS[1]]}).status_code == 429
    assert admitted == []
    thread, out = hold_the_worker(client, tokens, gate)
    try:
        assert post(client, tokens["bob"], "/v1/explain", {**FAST, "keys": [OUTLIERS[1]]}).status_code == 429
        assert admitted == ["explain_outliers"]
    finally:
        gate.opened.set()
        thread.join(timeout=BOUND)
    assert out["held"].status_code == 200, out["held"].text


def test_an_analyst_admitted_before_is_admitted_from_memory_and_refused_only_afresh(served, ledger_reads,
                                                                                    monkeypatch):
    """What an admission read is kept for its analyst (`ledger.admission_memory`): dave's second
    waiting request is admitted reading nothing at all, on the event loop (no admission thread);
    once his own charge used his quota (and the worker refused the request admitted beside it),
    his next one is refused at once."""
    from pcor_sql.analyst import Analyst

    owner, service, client, tokens, gate = served
    where: list[str] = []
    real = Analyst.admit
    monkeypatch.setattr(Analyst, "admit", lambda self, *a, **k: (where.append(threading.current_thread().name),
                                                                 real(self, *a, **k))[1])
    thread, out = hold_the_worker(client, tokens, gate)
    answers: list[httpx.Response] = []
    asking = [threading.Thread(target=lambda: answers.append(post(client, tokens["dave"], "/v1/explain",
                                                                  {**FAST, "keys": [OUTLIERS[1]]})))
              for _ in range(2)]
    try:
        counts = []
        for t in asking:
            before, t0 = ledger_reads[0], time.monotonic()
            t.start()
            while service.queued() < len(counts) + 1 and time.monotonic() - t0 < BOUND:
                time.sleep(0.01)
            counts.append(ledger_reads[0] - before)
        assert counts == [4, 0], counts  # token, dataset, key, quota; then nothing (the token is kept too)
        assert where[0].startswith("pcor-worker-") and not where[1].startswith("pcor-worker-"), where
    finally:
        gate.opened.set()
        for t in (thread, *asking):
            t.join(timeout=BOUND)
    assert sorted(r.status_code for r in answers) == [200, 429]
    gate.opened.clear()
    gate.entered.clear()
    thread, out = hold_the_worker(client, tokens, gate)
    try:
        started = time.monotonic()
        assert post(client, tokens["dave"], "/v1/explain", {**FAST, "keys": [OUTLIERS[1]]}).status_code == 429
        assert time.monotonic() - started < PROMPT
    finally:
        gate.opened.set()
        thread.join(timeout=BOUND)


def test_a_statement_is_admitted_like_any_request_while_the_worker_is_busy(served, monkeypatch):
    """`POST /v1/sql` takes the path of `/v1/explain` (DESIGN.md §6 "Reserve, then read", §8):
    with the only worker held, a statement over the quota, outside the releasable keys or not an
    analyst's is refused by the admission at once, and nothing is charged."""
    from pcor_sql.analyst import Analyst

    owner, service, client, tokens, gate = served
    admitted: list[tuple] = []
    real = Analyst.admit
    monkeypatch.setattr(Analyst, "admit", lambda self, *a, **k: (admitted.append(a), real(self, *a, **k))[1])
    explain = "EXPLAIN OUTLIER SELECT pay FROM staff WHERE id = {} USING grubbs WITH (epsilon = 0.1)"
    thread, out = hold_the_worker(client, tokens, gate)
    try:
        before = owner.ledger.history()
        timed = []
        for token, text in (
            ("bob", explain.format(OUTLIERS[1])),  # bob's quota: 0.05 < 0.1
            ("bob", "IDENTIFY ANOMALY VALUE (pay = 1) FROM staff WITH (beta = 2, radius = 5, epsilon = 0.1)"),
            ("alice", explain.format(10_000)),  # not releasable
            ("alice", "EXPLAIN OUTLIER SELECT pay FROM capped WHERE tag = 'a-7' USING grubbs WITH (epsilon = 0.1)"),
        ):
            started = time.monotonic()
            r = post(client, tokens[token], "/v1/sql", {"sql": text}, timeout=2 * PROMPT)
            timed.append((r.status_code, time.monotonic() - started))
            assert set(r.json()) == {"error", "fix"}
        assert [code for code, _ in timed] == [429, 429, 403, 429]
        assert max(seconds for _, seconds in timed) < PROMPT, timed
        # Each admitted early, as a statement (tried on the event loop first, then on the admission pool
        # when parsing it needs DuckDB's parser or the ledger must be read).
        assert {a[0] for a in admitted} == {"sql"} and len(admitted) >= 4
        assert service.pool.load() == (1, 0) and owner.ledger.history() == before
    finally:
        gate.opened.set()
        thread.join(timeout=BOUND)
    assert out["held"].status_code == 200, out["held"].text
