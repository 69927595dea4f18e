"""DESIGN.md §11 "Two stores, one contract": the ledger's rules are written once over the store
interface, and no module outside a store writes ledger SQL — the owner plane and the console
ask the ledger."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pcor_sql

PACKAGE = Path(pcor_sql.__file__).resolve().parent
#: The stores' own modules: the only ones that hold ledger SQL (or open a ledger's database).
STORE_MODULES = {
    "ledger/duckdb_store.py", "ledger/duckdb_charges.py", "ledger/duckdb_registry.py", "ledger/layout.py",
    "ledger/migration.py", "ledger/transactions.py", "ledger/database_file.py", "ledger/location.py",
    "ledger/postgres_store.py", "ledger/postgres_ops.py", "ledger/postgres_sql.py", "ledger/postgres_registry.py",
    "ledger/registry_statements.py",
    "ledger/duckdb_chain.py", "ledger/duckdb_chain_memory.py", "ledger/duckdb_leases.py", "ledger/postgres_chain.py",
    "ledger/duckdb_sharing.py", "ledger/postgres_sharing.py", "ledger/duckdb_group_commit.py",
}
RULE_MODULES = sorted(p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "ledger").glob("*.py")
                      if p.relative_to(PACKAGE).as_posix() not in STORE_MODULES)
ASKERS = ["service/owner_plane.py", "service/console_app.py", "service/console_pages.py", "service/console_charts.py"]
_TABLES = r"(budget|units|settings|history|datasets|analysts|quotas|history_chain|chain_heads|leases)"
LEDGER_SQL = re.compile(r"\.execute\(|\bpcor\." + _TABLES + r"\b|\btables\." + _TABLES + r"\b|system\.main\.")


@pytest.mark.parametrize("module", RULE_MODULES + ASKERS)
def test_rules_and_the_owners_views_hold_no_ledger_sql(module):
    text = (PACKAGE / module).read_text(encoding="utf-8")
    code = re.sub(r'"""[\s\S]*?"""', "", text)  # docstrings may name the tables
    code = "\n".join(line.split("#", 1)[0] for line in code.splitlines())
    assert not LEDGER_SQL.findall(code), module
    assert not re.search(r"^\s*(import|from)\s+(duckdb|psycopg)\b", code, re.M), module


def test_the_rules_modules_are_the_ones_expected():
    """A new ledger module is a rule (checked above) unless it is listed as a store's."""
    assert {"ledger/store.py", "ledger/charge_rules.py", "ledger/reservation.py", "ledger/outcomes.py",
            "ledger/consistency.py", "ledger/analysts.py", "ledger/dataset_registry.py", "ledger/history_chain.py",
            "ledger/history_chain_steps.py", "ledger/leases.py", "ledger/ledger_move.py"} <= set(RULE_MODULES)
