"""Analysts, tokens and quotas: tokens of 256 bits stored only as hashes and compared in
constant time; every charge fits the analyst's quota and every unit's limit at once; revoking
stops a token; threads and two processes racing on one quota never overspend it."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from pcor_sql.core.accounting import DpCost, OcdpCost
from pcor_sql.errors import BudgetExceeded, Refused, UserError
from pcor_sql.ledger import analysts as analysts_module
from pcor_sql.ledger.analysts import (
    AnalystIdentity,
    add_analyst,
    analyst_history,
    analyst_usage,
    authenticate,
    list_analysts,
    revoke_analyst,
    set_quota,
)
from pcor_sql.ledger.charge_rules import ChargeItem
from pcor_sql.ledger.dataset_registry import RegisteredDataset, add_dataset
from pcor_sql.ledger.records import new_release_id
from pcor_sql.ledger.store import Ledger

from ledger_helpers import conflicts_seen, ledger_rows, raw, subprocess_env
from tests.start_line import start_together

WORKER = Path(__file__).with_name("reserve_worker.py")
pytestmark = pytest.mark.filterwarnings("ignore::pcor_sql.errors.PrivacyWarning")


def asked(epsilon: float, dataset: str | None = "people", cost=OcdpCost) -> ChargeItem:
    return ChargeItem(new_release_id(), cost(epsilon), "pcor/bfs/tight", "42", role="analyst", dataset=dataset)


def register(ledger: Ledger, *names: str) -> None:
    for name in names:
        add_dataset(ledger, RegisteredDataset(name, name, "id", ("pay",), ("dept",), (("dept", ("a",)),), (name,), None))


def test_a_token_is_long_random_shown_once_and_stored_as_a_hash(con, ledger):
    token = add_analyst(ledger, "ana", quota=1.0)
    other = add_analyst(ledger, "bob")
    assert token.startswith("pcor_") and len(token) == 48 and token != other  # 32 random bytes: 256 bits
    stored = raw(ledger, "SELECT * FROM pcor.analysts") + raw(ledger, "SELECT * FROM pcor.quotas")
    assert token not in repr(stored) and hashlib.sha256(token.encode()).hexdigest() in repr(stored)
    assert authenticate(ledger, token) == AnalystIdentity("ana", None)
    assert authenticate(ledger, other) == AnalystIdentity("bob", None)


class Sneaky(str):
    def __eq__(self, other):  # a str subclass that equals anything
        return True

    __hash__ = str.__hash__


@pytest.mark.parametrize("bad", [None, 42, b"pcor_x", "", "pcor_", "Bearer x", "pcor_" + "a" * 43, "x" * 10_000])
def test_unknown_malformed_and_revoked_tokens_all_get_none(ledger, bad):
    token = add_analyst(ledger, "ana")
    assert authenticate(ledger, bad) is None
    assert authenticate(ledger, Sneaky(token)) is None  # exact type only
    revoke_analyst(ledger, "ana")
    assert authenticate(ledger, token) is None


def test_every_stored_hash_is_compared_in_constant_time(ledger, monkeypatch):
    tokens = [add_analyst(ledger, f"a{i}") for i in range(5)]
    calls: list[tuple[bytes, bytes]] = []
    real = analysts_module.hmac.compare_digest
    monkeypatch.setattr(analysts_module.hmac, "compare_digest", lambda a, b: calls.append((a, b)) or real(a, b))
    assert authenticate(ledger, tokens[0]).name == "a0"  # found first, and still every hash compared
    assert authenticate(ledger, "pcor_" + "Z" * 43) is None
    assert len(calls) == 10


def test_a_charge_fits_both_the_quota_and_every_limit(con, ledger):
    register(ledger, "people")
    add_analyst(ledger, "ana", quota=0.5, notion="ocdp")
    ledger.set_limit("t", 0.7)
    ledger.set_limit("u", 10.0)
    ledger.reserve(["t", "u"], [asked(0.4)], analyst="ana").answered()
    before = ledger_rows(ledger), raw(ledger, "SELECT * FROM pcor.quotas ORDER BY analyst, notion, dataset")
    with pytest.raises(BudgetExceeded, match="ocdp quota of analyst 'ana'.*remaining 0.1"):
        ledger.reserve("u", [asked(0.2)], analyst="ana")
    add_analyst(ledger, "bob")  # no quota: only the limits
    with pytest.raises(BudgetExceeded, match="unit 't'"):
        ledger.reserve(["t", "u"], [asked(0.4)], analyst="bob")
    assert (ledger_rows(ledger), raw(ledger, "SELECT * FROM pcor.quotas ORDER BY analyst, notion, dataset")) == before
    ledger.set_limit("u", 10.0, "dp")
    ledger.reserve("u", [asked(0.3, cost=DpCost)], analyst="ana").answered()  # other notion: no quota there
    usage = {(u.notion, u.dataset): (u.limit, u.spent, u.remaining, u.releases) for u in analyst_usage(ledger, "ana")}
    assert usage[("ocdp", None)] == (0.5, 0.4, pytest.approx(0.1), 1)
    assert usage[("dp", None)] == (None, 0.3, None, 1) and usage[("ocdp", "people")][1:] == (0.4, None, 1)
    assert {r.analyst for r in ledger.history()} == {"ana"}


def test_a_quota_per_dataset_and_the_datasets_an_analyst_may_use(ledger):
    register(ledger, "people", "sales", "secret")
    add_analyst(ledger, "ana", quota=1.0, datasets=["people", "sales"])
    set_quota(ledger, "ana", 0.3, notion="ocdp", dataset="people")
    ledger.reserve("t", [asked(0.3, "people")], analyst="ana").answered()
    with pytest.raises(BudgetExceeded, match="on dataset 'people'"):
        ledger.reserve("t", [asked(0.1, "people")], analyst="ana")
    ledger.reserve("t", [asked(0.5, "sales")], analyst="ana").answered()
    for dataset in ("secret", None):
        with pytest.raises(Refused, match="may not use"):
            ledger.reserve("t", [asked(0.1, dataset)], analyst="ana")
    with pytest.raises(BudgetExceeded, match="quota of analyst 'ana'"):  # 0.8 of 1.0 over all datasets
        ledger.reserve("t", [asked(0.3, "sales")], analyst="ana")
    set_quota(ledger, "ana", None, notion="ocdp", dataset="people")  # cleared
    ledger.reserve("t", [asked(0.2, "people")], analyst="ana").answered()
    with pytest.raises(UserError, match="no registered dataset 'nope'"):
        add_analyst(ledger, "bob", datasets=["nope"])


def test_revoked_and_unknown_analysts_are_refused(con, ledger):
    add_analyst(ledger, "ana", quota=1.0)
    revoked = revoke_analyst(ledger, "ana")
    assert revoked.revoked and revoke_analyst(ledger, "ana").revoked_at == revoked.revoked_at
    before = ledger_rows(ledger)
    with pytest.raises(Refused, match="analyst 'ana' is revoked"):
        ledger.reserve("t", [asked(0.1)], analyst="ana")
    with pytest.raises(Refused, match="no analyst 'eve'"):
        ledger.reserve("t", [asked(0.1)], analyst="eve")
    assert ledger_rows(ledger) == before
    with pytest.raises(UserError, match="already"):
        add_analyst(ledger, "ana")
    with pytest.raises(UserError, match="no analyst named"):
        revoke_analyst(ledger, "eve")
    for bad in ("", "a b", "x" * 65, "-lead", 3):
        with pytest.raises(UserError, match="invalid analyst name"):
            add_analyst(ledger, bad)
    with pytest.raises(UserError, match="without a quota"):
        add_analyst(ledger, "carl", notion="dp")


def test_a_revocation_during_a_reservation_is_seen(con, monkeypatch):
    ledger = Ledger(con)
    add_analyst(ledger, "ana", quota=1.0)
    holder = con.cursor()
    holder.execute("BEGIN TRANSACTION")
    # A revocation in flight (as revoke_analyst writes it): the reservation conflicts on the
    # analyst's quota row, waits, and then sees the revocation.
    holder.execute("UPDATE pcor.analysts SET revoked_at = now()::TIMESTAMP")
    holder.execute("UPDATE pcor.quotas SET updated_at = now()::TIMESTAMP")
    outcome: list[object] = []
    conflicted = conflicts_seen(monkeypatch)
    worker = threading.Thread(target=lambda: outcome.append(_try(Ledger(con.cursor()), asked(0.1))))
    worker.start()
    # Commit only once the reservation has met the revocation in flight: without the wait it
    # could start after the commit and never take the conflict path this test is about.
    assert conflicted.wait(timeout=10) and outcome == []
    holder.execute("COMMIT")
    worker.join(timeout=10)
    assert len(outcome) == 1 and isinstance(outcome[0], Refused), outcome
    holder.close()


def _try(ledger: Ledger, item: ChargeItem) -> object:
    try:
        return ledger.reserve("t", [item], analyst="ana")
    except Exception as exc:  # inspected by the caller
        return exc


def test_history_and_usage_are_the_analysts_own_plain_data(ledger):
    register(ledger, "people")
    add_analyst(ledger, "ana")
    add_analyst(ledger, "bob")
    ledger.reserve(["t", "u"], [asked(0.2)], analyst="ana").answered()
    ledger.reserve("t", [asked(0.1)], analyst="ana").failed("not-found", refund=False)
    ledger.reserve("t", [asked(0.4)], analyst="bob").answered()
    mine = analyst_history(ledger, "ana")
    assert [(h["epsilon"], h["outcome"]) for h in mine] == [(0.2, "answered"), (0.1, "failed")]
    assert set(mine[0]) == {"release_id", "requested_at", "notion", "epsilon", "k", "mechanism", "dataset", "key",
                            "outcome"}  # no units, no other analyst's spend, no failure reason
    json.dumps(mine)
    assert analyst_history(ledger, "ana", limit=1) == mine[1:]
    assert [a.name for a in list_analysts(ledger)] == ["ana", "bob"]
    json.dumps([a.as_dict() for a in list_analysts(ledger)])


@pytest.mark.parametrize("sharing", ["a ledger per cursor", "one shared ledger"])
def test_threads_on_one_quota_never_overspend_it(ledger, reopen, sharing):
    shared = ledger
    add_analyst(shared, "ana", quota=1.0)
    own = [reopen() if sharing == "a ledger per cursor" else shared for _ in range(4)]
    charged: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work(index: int) -> None:
        try:
            ledger = own[index]
            start.wait()
            for _ in range(8):  # four units: only the quota row is shared between the threads
                try:
                    ledger.reserve(f"unit{index}", [asked(0.1)], analyst="ana").answered()
                    charged.append(index)
                except BudgetExceeded:
                    pass
        except BaseException as exc:  # reported to the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == [] and len(charged) == 10
    usage = analyst_usage(reopen(), "ana")[0]
    assert (usage.spent, usage.releases) == (pytest.approx(1.0), 10)
    assert shared.verify() == []


def test_two_processes_racing_on_one_quota_never_overspend_it(tmp_path):
    path = tmp_path / "served.duckdb"
    setup = duckdb.connect(str(path))
    ledger = Ledger(setup)
    register(ledger, "people")
    add_analyst(ledger, "ana", quota=1.0)
    setup.close()
    go = tmp_path / "go"
    workers = [subprocess.Popen([sys.executable, str(WORKER), "race", str(path), unit, "0.1", "ana", "8", str(go)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env())
               for unit in ("t1", "t2")]
    start_together(go, len(workers))
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["charged"] for r in reports) == 10 and sum(r["refused"] for r in reports) == 6
    reader = duckdb.connect(str(path))
    ledger = Ledger(reader)
    assert analyst_usage(ledger, "ana")[0].spent == pytest.approx(1.0) and ledger.verify() == []
    assert len(analyst_history(ledger, "ana")) == 10
    reader.close()
