"""Several `pcor-sql serve` processes on one PostgreSQL ledger (DESIGN.md §11 "Several services,
one ledger", "Revocation everywhere at once"), with real processes and a real PostgreSQL server:

- a revoke or a rotate by the owner's command going straight to PostgreSQL stops the old token
  on both services within one second — after each service has kept the token's identity (a
  request answered), so what is tested is the kept identity's invalidation, not a fresh read;
- sixteen analyst threads over the two services never overspend a unit's limit of 1.0: the
  charged requests times ε equal the ledger's spent, which is at most the limit, and the
  ledger's totals match its history.

Both services run on copies of one data file (`benchmarks.shared_ledger`), as two hosts would.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter

import httpx
import pytest

from benchmarks.shared_ledger import copies, make_data, register, serve_all

pytestmark = pytest.mark.slow

LIMIT = 1.0
EPSILON = 0.04
THREADS = 16
#: Analysts 0-15 spend; 16 is revoked, 17 rotated.
ANALYSTS = THREADS + 2
#: How long a revocation may take to reach a service (DESIGN.md §11).
WITHIN_S = 1.0


@pytest.fixture(scope="module")
def shared(postgres_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("shared")
    url = postgres_server.fresh_url()
    data = folder / "data.duckdb"
    make_data(data, 3000)
    tokens = register(data, url, analysts=ANALYSTS, limit=LIMIT)
    services = serve_all(copies(data, 2), url, workers=2)
    try:
        yield url, tokens, services
    finally:
        for service in services:
            service.stop()


def status(base: str, token: str, path: str = "/v1/me") -> int:
    return httpx.get(base + path, headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code


def owner_command(*argv: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pcor_sql", *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def refused_within(services, token: str, since: float) -> list[float]:
    """Seconds from `since` until each service answers `token` with 401 (bounded polling)."""
    took = []
    for service in services:
        while status(service.url, token) != 401:
            assert time.monotonic() - since < 10 * WITHIN_S, f"{service.url} still accepts the token"
            time.sleep(0.02)
        took.append(time.monotonic() - since)
    return took


def test_a_revoke_stops_the_token_on_both_services_within_one_second(shared):
    url, tokens, services = shared
    token = tokens[f"analyst{THREADS}"]
    assert [status(s.url, token) for s in services] == [200, 200]  # each service now keeps the identity
    owner_command("analyst", "revoke", f"analyst{THREADS}", "--ledger", url)
    took = refused_within(services, token, time.monotonic())
    assert max(took) < WITHIN_S, took


def test_a_rotate_stops_the_old_token_on_both_services_and_the_new_one_works(shared):
    url, tokens, services = shared
    name, old = f"analyst{THREADS + 1}", tokens[f"analyst{THREADS + 1}"]
    assert [status(s.url, old) for s in services] == [200, 200]
    done = owner_command("analyst", "rotate", name, "--ledger", url)
    since = time.monotonic()
    new = next(word for word in done.stdout.split() if word.startswith("pcor_"))
    took = refused_within(services, old, since)
    assert max(took) < WITHIN_S, took
    assert [status(s.url, new) for s in services] == [200, 200]


def test_sixteen_analysts_over_two_services_never_overspend_a_limit(shared):
    url, tokens, services = shared
    answers: Counter = Counter()
    lock = threading.Lock()

    def analyst(index: int) -> None:
        service = services[index % len(services)]
        token = tokens[f"analyst{index}"]
        with httpx.Client(timeout=120, headers={"Authorization": f"Bearer {token}"}) as client:
            for j in range(200):  # bounded: the limit stops everyone long before
                body = {"dataset": "staff", "keys": [(index + j) % 24], "epsilon": EPSILON}
                code = client.post(service.url + "/v1/explain", json=body).status_code
                with lock:
                    answers[code] += 1
                if code == 429:
                    return

    threads = [threading.Thread(target=analyst, args=(i,), daemon=True) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads)
    assert set(answers) <= {200, 422, 429}, answers
    assert answers[429] == THREADS  # every analyst met the limit

    from pcor_sql.ledger.postgres_store import PostgresStore
    from pcor_sql.ledger.store import Ledger

    ledger = Ledger(store=PostgresStore(url))
    try:
        unit = next(s for s in ledger.statuses("ocdp") if s.spent > 0)
        charged = answers[200] + answers[422]  # 422: the generic failure after the reservation, charged
        assert unit.spent <= LIMIT + 1e-12
        assert unit.spent == pytest.approx(charged * EPSILON, abs=1e-12)
        assert charged == int(LIMIT / EPSILON + 1e-9)  # the limit is spent to the last whole request
        outcomes = Counter(r.outcome for r in ledger.history(unit.unit))
        assert outcomes["answered"] == answers[200] and "running" not in outcomes, outcomes
        assert ledger.verify() == []
    finally:
        ledger.close()
