"""The history chain on the PostgreSQL store (DESIGN.md §11 "A tamper-evident history"): a
consistent rewrite made straight in the server's tables (psycopg, as anyone holding the
database's credentials could) is found by `budget verify` and refuses releases until `budget
repair`; a PostgreSQL ledger from before the chain gets it from `budget migrate`; moving an
embedded ledger into PostgreSQL carries its chain."""

from __future__ import annotations

import duckdb
import pytest

from pcor_sql.errors import Refused, UserError
from pcor_sql.ledger.history_chain import ChainDifference
from pcor_sql.ledger.ledger_move import move_ledger
from pcor_sql.ledger.postgres_store import PostgresStore
from pcor_sql.ledger.store import Ledger

from test_history_chain_ledger import HALVE, charge_all, item, kinds

psycopg = pytest.importorskip("psycopg")
pytestmark = pytest.mark.filterwarnings("ignore::pcor_sql.errors.PrivacyWarning")


def invoke(*args: str):
    from typer.testing import CliRunner

    from pcor_sql.cli.main import app

    return CliRunner().invoke(app, list(args))


def by_hand(url: str, *statements: str) -> None:
    """Statements run straight on the server, committed: no pcor-sql code involved."""
    with psycopg.connect(url) as con:
        for statement in statements:
            con.execute(statement)


def test_a_consistent_rewrite_in_the_server_tables_is_found_and_refuses_releases(postgres_server):
    url = postgres_server.fresh_url()
    ledger = charge_all(Ledger(store=PostgresStore(url)))
    spent = (ledger.status("t").spent, ledger.status("u").spent)
    by_hand(url, *HALVE)
    service = Ledger(store=PostgresStore(url))  # another process opening the ledger
    assert service.mismatches == ()  # the totals alone match the rewritten history
    assert service.status("t").spent == spent[0] / 2
    verified = invoke("budget", "verify", "--ledger", url)
    assert verified.exit_code == 1 and "differ from the hash chain" in verified.stderr, verified.stdout
    assert {d.entry.split(" (")[0] for d in service.verify() if isinstance(d, ChainDifference)} == {
        "release r1", "release r2", "release r3", "release r4"}
    for handle in (service, ledger):  # every service refuses, once verify has found it
        with pytest.raises(Refused, match="hash"):
            handle.reserve("t", [item("r5", 0.1)])
    repaired = invoke("budget", "repair", "--ledger", url)
    assert repaired.exit_code == 0 and "r3" in repaired.stdout, repaired.stderr
    assert (service.status("t").spent, service.status("u").spent) == spent  # what was charged, not the halves
    assert invoke("budget", "verify", "--ledger", url).exit_code == 0
    service.reserve("t", [item("r5", 0.1)]).answered()
    assert kinds(service, "u", "ocdp")[-1] == "repair" and service.verify() == []


def test_a_server_ledger_from_before_the_chain_is_refused_then_migrated_with_its_chain(postgres_server):
    url = postgres_server.fresh_url()
    charge_all(Ledger(store=PostgresStore(url))).close()
    by_hand(url, "DROP TABLE pcor.history_chain", "DROP TABLE pcor.chain_heads", "DROP TABLE pcor.leases")
    ledger = Ledger(store=PostgresStore(url, read_only=False))
    with pytest.raises(UserError, match="older layout .*pcor.history_chain is missing") as refused:
        ledger.reserve("t", [item("r5", 0.1)])
    assert "budget migrate" in str(refused.value)
    migrated = invoke("budget", "migrate", "--ledger", url)
    assert migrated.exit_code == 0 and "built the hash chain of 3 unit histories" in migrated.stdout, migrated.stderr
    ledger = Ledger(store=PostgresStore(url))
    assert ledger.verify() == [] and kinds(ledger, "t", "ocdp") == ["migrated"] * 3
    by_hand(url, "UPDATE pcor.history SET epsilon = epsilon / 2, spent_after = spent_after / 2 WHERE release_id = 'r3'",
            "UPDATE pcor.budget SET spent_epsilon = spent_epsilon - 0.25 WHERE unit = 't' AND notion = 'ocdp'")
    assert [d.entry for d in ledger.verify() if isinstance(d, ChainDifference)] == ["release r3 (seq 3)"]
    assert invoke("budget", "migrate", "--ledger", url).stdout.startswith("the ledger is in the current layout")


def test_moving_an_embedded_ledger_carries_its_chain(postgres_server, tmp_path):
    url = postgres_server.fresh_url()
    source = charge_all(Ledger(duckdb.connect(str(tmp_path / "ledger.duckdb")), owned=True))
    heads = source.chain_heads()
    target = Ledger(store=PostgresStore(url))
    moved = move_ledger(source, target)
    assert moved["history_chain"] == 10 and moved["chain_heads"] == 3
    assert target.chain_heads() == heads and target.verify() == []  # the same chain, vouching for the same rows
    target.reserve("t", [item("r5", 0.1)]).answered()
    assert target.verify() == [] and target.chain_heads()[("t", "ocdp")].link == heads[("t", "ocdp")].link + 2
    by_hand(url, *HALVE)
    assert len([d for d in target.verify() if isinstance(d, ChainDifference)]) == 6
