"""Who is asking, over real HTTP (127.0.0.1): a token the service authenticated is kept
(`analyst_identity.IdentityMemory`) and answered without a ledger read — until an analyst is
revoked, given a new token or added, which takes effect on the very next request."""

from __future__ import annotations

import httpx
import pytest

import pcor_sql
import pcor_sql.service
from pcor_sql.ledger.analysts import add_analyst, identity_changes, revoke_analyst, rotate_analyst
from pcor_sql.service.analyst_identity import Identity, IdentityMemory
from tests.client.served_dataset import make_database
from tests.service.live_server import live_server


@pytest.fixture
def served(tmp_path):
    con = make_database(tmp_path / "staff.duckdb")
    try:
        owner = pcor_sql.Owner(con, warn=lambda message: None)
        tokens = {name: add_analyst(owner.ledger, name) for name in ("alice", "bob")}
        app = pcor_sql.service.app(owner, workers=1, processes=False)
        with live_server(app) as url:
            with httpx.Client(base_url=url, timeout=30) as client:
                yield owner, client, tokens
    finally:
        con.close()


def me(client, token: str) -> int:
    return client.get("/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code


def test_a_kept_token_is_answered_without_reading_the_analysts(served, ledger_reads):
    owner, client, tokens = served
    assert me(client, tokens["alice"]) == 200
    first = ledger_reads[0]  # the token's check, then the analyst's usage
    assert me(client, tokens["alice"]) == 200
    assert ledger_reads[0] - first == first - 1  # the usage alone


def test_revoking_or_rotating_takes_effect_on_the_next_request(served):
    owner, client, tokens = served
    assert me(client, tokens["alice"]) == me(client, tokens["bob"]) == 200
    revoke_analyst(owner.ledger, "alice")
    assert me(client, tokens["alice"]) == 401
    fresh = rotate_analyst(owner.ledger, "bob")
    assert me(client, tokens["bob"]) == 401
    assert me(client, fresh) == 200
    assert me(client, fresh) == 200


def test_a_wrong_token_is_never_kept(served):
    owner, client, tokens = served
    service_memory = IdentityMemory(size=2)
    assert service_memory.read(owner.ledger, "Bearer pcor_" + "x" * 43) is None
    assert service_memory._kept == {}
    found = service_memory.read(owner.ledger, f"Bearer {tokens['alice']}")
    assert found == Identity("alice") == service_memory.get(f"Bearer {tokens['alice']}")
    service_memory.read(owner.ledger, f"Bearer {tokens['bob']}")
    service_memory.read(owner.ledger, f"Bearer {tokens['alice']}")  # full: it starts empty again
    assert len(service_memory._kept) == 1


def test_a_change_committed_during_a_read_leaves_nothing_kept_past_it(served, monkeypatch):
    """The count is read before the ledger: a revocation that lands between the two makes the
    kept answer stale at once, whichever state the read saw."""
    from pcor_sql.service import analyst_identity

    owner, client, tokens = served
    memory, real = IdentityMemory(), analyst_identity.authenticate_header

    def revoked_meanwhile(ledger, header):
        found = real(ledger, header)
        revoke_analyst(owner.ledger, "alice")
        return found

    monkeypatch.setattr(analyst_identity, "authenticate_header", revoked_meanwhile)
    header = f"Bearer {tokens['alice']}"
    before = identity_changes()
    assert memory.read(owner.ledger, header) == Identity("alice")
    assert identity_changes() == before + 1 and memory.get(header) is None
