"""Ledger files and layouts: a ledger path is a DuckDB database or nothing yet (a Parquet, CSV,
JSON or text file is refused, not opened as an empty in-memory ledger); an older layout is
refused until `migrate`, which keeps spent ε, limits and history; what a user can break
(a damaged ledger, a full disk, a huge ε) is one line with a fix."""

from __future__ import annotations

import hashlib
import os
import subprocess
import warnings

import duckdb
import pytest

import pcor_sql
from pcor_sql.core.accounting import OcdpCost
from pcor_sql.errors import BudgetExceeded, PrivacyWarning, UserError
from pcor_sql.ledger.charge_rules import TABLE_NAMES, ChargeItem
from pcor_sql.ledger.layout import expected_layout
from pcor_sql.ledger.location import open_ledger
from pcor_sql.ledger.migration import legacy_relation
from pcor_sql.ledger.records import new_release_id
from pcor_sql.ledger.store import Ledger

from old_layouts import write_before_pcor, write_pcor_without_outcomes

pytestmark = pytest.mark.filterwarnings("ignore::pcor_sql.errors.PrivacyWarning")


#: Hand edits of the history need its release_id index gone first (a ledger from before it has none).
NO_RELEASE_INDEX = "DROP INDEX IF EXISTS pcor.history_release_id"


def item(epsilon: float) -> ChargeItem:
    return ChargeItem(new_release_id(), OcdpCost(epsilon), "pcor/bfs/tight")


@pytest.mark.parametrize("kind", ["parquet", "csv", "json", "text", "empty"])
def test_a_ledger_path_that_is_not_a_duckdb_database_is_refused(tmp_path, kind):
    path = tmp_path / f"ledger.{kind}"
    writer = duckdb.connect()
    if kind in ("parquet", "csv", "json"):
        writer.execute(f"COPY (SELECT 1 AS a) TO '{path}' (FORMAT {kind})")
    else:
        path.write_text("" if kind == "empty" else "spent 0.5 of 1.0\n")
    before = path.read_bytes()
    with pytest.raises(UserError) as refused:
        open_ledger(writer, path)
    message = str(refused.value)
    assert "\n" not in message and "is not a DuckDB database" in message and "does not exist yet" in message
    with pytest.raises(UserError, match="not a DuckDB database"):
        pcor_sql.Owner(writer, ledger=str(path))
    assert path.read_bytes() == before  # untouched, and no limit was set in a throwaway in-memory ledger
    writer.close()


def test_a_missing_ledger_path_makes_a_new_ledger(tmp_path):
    con = duckdb.connect()
    ledger = open_ledger(con, tmp_path / "new" / "ledger.duckdb")
    ledger.set_limit("t", 1.0)
    ledger.close()
    assert (tmp_path / "new" / "ledger.duckdb").read_bytes()[8:12] == b"DUCK"


def _data_file(tmp_path):
    path = tmp_path / "data.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT i AS id, ['a', 'b', 'c'][i % 3 + 1] AS dept,"
                " CASE WHEN i = 42 THEN 900.0 ELSE 100.0 + i % 11 END AS pay FROM range(90) s(i)")
    return path, con


def test_a_ledger_from_before_schema_pcor_is_refused_then_migrated(tmp_path):
    path, con = _data_file(tmp_path)
    # "t" by name; the old key of the relation `t` ("t#" + its digest, with 0.3 spent beyond its
    # history); "gone" spells nothing here.
    key = "t#" + hashlib.sha256(b"t").hexdigest()[:16]
    write_before_pcor(con, {"t": (0.6, 1.0, [0.3, 0.3]), key: (0.4, 2.0, [0.1]), "gone": (0.2, None, [0.2])})
    assert legacy_relation(key) == "t" and legacy_relation("t#0000000000000000") is None
    con.close()
    con = duckdb.connect(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        owner = pcor_sql.Owner(con)
    for attempt in (lambda: owner.status("t"), lambda: owner.explain_outlier(
            "SELECT pay FROM t WHERE id = 42", epsilon=0.1, by="dept", verifier="grubbs")):
        with pytest.raises(UserError) as refused:
            attempt()
        assert "older layout" in str(refused.value) and "budget migrate" in str(refused.value)
        assert "main.pcor_budget" in str(refused.value)
    report = owner.migrate_ledger()
    # A table of the ledger's own file is named without the file's alias (units by identity).
    assert dict(report.moved) == {"t": ("main.t",), key: ("main.t",)} and report.kept == ("gone",)
    assert "main.pcor_budget" in report.legacy and any("dropped" in line for line in report.lines())
    [status] = owner.status("t", "ocdp")
    # Both names spell t: their spend adds up (1.0 = 0.6 + 0.4, the key's 0.3 without history
    # kept as a migration row), under the smaller limit.
    assert (status.spent, status.limit) == (pytest.approx(1.0), 1.0)
    assert owner.verify_ledger() == ()
    records = [r for r in owner.ledger.history() if r.unit == "main.t"]
    assert sorted(r.mechanism for r in records) == ["bfs", "bfs", "bfs", "migrated (spent without history)"]
    assert owner.ledger.status("gone").spent == 0.2  # kept under its own name
    with pytest.raises(BudgetExceeded):  # the old spend still protects t
        owner.explain_outlier("SELECT pay FROM t WHERE id = 42", epsilon=0.1, by="dept", verifier="grubbs")
    assert owner.migrate_ledger().lines() == ["the ledger is in the current layout: nothing to migrate"]
    con.close()


def test_old_tables_next_to_a_new_empty_schema_are_not_ignored(tmp_path):
    path, con = _data_file(tmp_path)
    write_before_pcor(con, {"t": (1.0, 1.0, [0.5, 0.5])})
    # What an earlier version did to such a file: a fresh, empty `pcor` ledger next to the old one.
    Ledger(con)
    con.close()
    con = duckdb.connect(str(path))
    owner = pcor_sql.Owner(con)
    with pytest.raises(UserError, match="budget migrate"):
        owner.spent("t")
    owner.migrate_ledger()
    assert owner.spent("t") == 1.0 and owner.verify_ledger() == ()
    con.close()


def test_a_pcor_ledger_without_outcomes_is_migrated_with_its_history(tmp_path):
    path = tmp_path / "ledger.duckdb"
    con = duckdb.connect(str(path))
    write_pcor_without_outcomes(con, "u", 1.0, [0.25, 0.25])
    con.close()
    con = duckdb.connect(str(path))
    ledger = Ledger(con)
    with pytest.raises(UserError) as refused:
        ledger.reserve("u", [item(0.1)])
    assert "pcor.history lacks" in str(refused.value) and "outcome" in str(refused.value)
    assert "pcor.analysts is missing" in str(refused.value)
    report = ledger.migrate()
    # datasets gains its releasable column, history its outcome columns.
    assert report.rebuilt == ("datasets", "history")
    assert set(report.created) == {"analysts", "quotas", "history_chain", "chain_heads", "leases"}
    assert report.chained == 1 and "built the hash chain of 1 unit history" in report.lines()
    assert [(r.release_id, r.outcome, r.epsilon) for r in ledger.history("u")] == [
        ("r0", "charged", 0.25), ("r1", "charged", 0.25)]
    assert ledger.status("u").spent == 0.5 and ledger.status("u").limit == 1.0 and ledger.verify() == []
    ledger.reserve("u", [item(0.5)]).answered()
    with pytest.raises(BudgetExceeded):
        ledger.reserve("u", [item(0.01)])
    con.close()


def test_a_ledger_missing_a_column_is_refused_not_a_binder_error(con):
    ledger = Ledger(con)
    ledger.reserve("t", [item(0.2)]).answered()
    con.execute("ALTER TABLE pcor.budget DROP COLUMN spent_residual")
    con.execute(NO_RELEASE_INDEX)  # DuckDB alters no table an index depends on
    con.execute("ALTER TABLE pcor.history DROP COLUMN seeded")
    with pytest.raises(UserError, match="budget was|damaged"):  # an open handle: one line, no BinderException
        ledger.reserve("t", [item(0.1)])
    reopened = Ledger(con)
    with pytest.raises(UserError, match="pcor.budget lacks spent_residual; pcor.history lacks seeded"):
        reopened.status("t")
    reopened.migrate()
    assert reopened.status("t").spent == 0.2 and reopened.verify() == []
    assert [r.seeded for r in reopened.history("t")] == [False]


def test_a_column_nothing_can_fill_stops_the_migration(con):
    Ledger(con).reserve("t", [item(0.2)]).answered()
    con.execute(NO_RELEASE_INDEX)  # DuckDB alters no table an index depends on
    con.execute("ALTER TABLE pcor.history DROP COLUMN epsilon")
    ledger = Ledger(con)
    with pytest.raises(UserError, match="lacks column epsilon, which nothing can fill — restore"):
        ledger.migrate()
    assert con.execute("SELECT count(*) FROM pcor.history").fetchall() == [(1,)]  # rolled back, untouched


def test_a_ledger_from_a_newer_version_is_refused(con):
    Ledger(con)
    con.execute(NO_RELEASE_INDEX)  # DuckDB alters no table an index depends on
    con.execute("ALTER TABLE pcor.history ADD COLUMN from_the_future VARCHAR")
    with pytest.raises(UserError, match="newer pcor-sql"):
        Ledger(con).history()


def test_a_damaged_open_ledger_is_one_line(con):
    ledger = Ledger(con)
    con.execute("DROP TABLE pcor.history")
    with pytest.raises(UserError, match="damaged .* budget migrate"):
        ledger.history()
    with pytest.raises(UserError, match="damaged"):
        ledger.reserve("t", [item(0.1)])


def _mount_tmpfs(target, size: str) -> bool:
    target.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
                              capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def test_a_full_disk_refuses_with_one_line_and_the_ledger_stays_consistent(tmp_path):
    mount = tmp_path / "tiny"
    if not _mount_tmpfs(mount, "2m"):
        pytest.skip("mounting a tmpfs is not permitted here (the failing-cursor test covers the message)")
    try:
        path = mount / "ledger.duckdb"
        con = duckdb.connect(str(path))
        ledger = Ledger(con)
        ledger.set_limit("t", 100.0)
        ledger.reserve("t", [item(0.1)]).answered()
        with open(mount / "filler", "wb") as filler:  # fill the disk
            try:
                while True:
                    filler.write(b"\0" * 65536)
                    filler.flush()
            except OSError:
                pass
        refused = 0
        for _ in range(20):
            try:
                ledger.reserve("t", [item(0.1)]).answered()
            except UserError as exc:
                assert "could not be written" in str(exc) and "free space" in str(exc) and "\n" not in str(exc)
                refused += 1
                break
        assert refused == 1
        subprocess.run(["mount", "-o", "remount,size=16m", str(mount)], check=True, timeout=10)
        os.remove(mount / "filler")
        con.close()
        con = duckdb.connect(str(path))
        after = Ledger(con)
        assert after.verify() == []
        spent = after.status("t").spent
        after.reserve("t", [item(0.1)]).answered()
        assert after.status("t").spent == pytest.approx(spent + 0.1)
        con.close()
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=10)


def test_a_column_renamed_by_hand_is_damage_that_migrate_mends(con):
    Ledger(con).reserve("t", [item(0.2)]).answered()
    con.execute(NO_RELEASE_INDEX)  # DuckDB alters no table an index depends on
    con.execute("ALTER TABLE pcor.history RENAME COLUMN reason TO why")  # same column count
    ledger = Ledger(con)
    with pytest.raises(UserError, match="damaged"):
        ledger.history()
    report = ledger.migrate()
    assert report.rebuilt == ("history",) and ledger.verify() == [] and ledger.status("t").spent == 0.2


def test_the_tables_the_code_names_are_the_tables_ledger_sql_makes():
    assert set(TABLE_NAMES) == set(expected_layout())


def _release_index(con) -> int:
    return con.execute("SELECT count(*) FROM duckdb_indexes() WHERE schema_name = 'pcor'"
                       " AND index_name = 'history_release_id'").fetchall()[0][0]


def test_the_history_is_indexed_by_release_id_and_a_ledger_from_before_gets_the_index(con):
    ledger = Ledger(con)
    ledger.reserve("t", [item(0.2)]).answered()
    assert _release_index(con) == 1
    [(rid,)] = con.execute("SELECT release_id FROM pcor.history").fetchall()
    plan = con.execute("EXPLAIN ANALYZE SELECT unit FROM pcor.history WHERE release_id IN (SELECT unnest($1::VARCHAR[]))",
                       [[rid]]).fetchall()[0][1]
    assert "Index Scan" in plan  # the reservation's lookup, not a scan of the whole history
    con.execute(NO_RELEASE_INDEX)
    Ledger(con).reserve("t", [item(0.1)]).answered()  # opened writable: the index is made again
    assert _release_index(con) == 1


def test_a_migration_keeps_the_release_index(con):
    Ledger(con).reserve("t", [item(0.2)]).answered()
    con.execute(NO_RELEASE_INDEX)
    con.execute("ALTER TABLE pcor.history DROP COLUMN seeded")
    ledger = Ledger(con)
    ledger.migrate()
    assert _release_index(con) == 1 and ledger.verify() == []
