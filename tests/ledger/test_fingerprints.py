"""Content fingerprints (DESIGN.md §11 "Units across hosts"), on both stores: recorded at
registration, appended (never overwritten) when the owner re-registers, compared with a copy's
own — one changed row, one row more, the same rows in another order — and carried by a move
into PostgreSQL, where a dataset registered without one gets the moved file's."""

from __future__ import annotations

import duckdb

import pcor_sql
from pcor_sql.engine.content_fingerprint import content_fingerprint
from pcor_sql.ledger import fingerprints


def _data(path=":memory:"):
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT i AS id, (i % 3)::VARCHAR AS dept, 100.0 + i AS pay FROM range(300) s(i)")
    return con


def _owner(con, ledger):
    return pcor_sql.Owner(con, ledger, warn=lambda message: None)


def test_the_fingerprint_ignores_row_order_and_sees_one_changed_row_and_a_duplicate():
    con = _data()
    base = content_fingerprint(con, "t")
    assert base.rows == 300
    assert content_fingerprint(con, "(SELECT * FROM t ORDER BY pay DESC)") == base
    con.execute("UPDATE t SET pay = pay + 0.5 WHERE id = 7")
    changed = content_fingerprint(con, "t")
    assert changed.rows == 300 and changed.content_hash != base.content_hash
    con.execute("UPDATE t SET pay = pay - 0.5 WHERE id = 7")
    assert content_fingerprint(con, "t") == base
    con.execute("INSERT INTO t SELECT * FROM t WHERE id = 7")  # a duplicate row (XOR alone would cancel)
    assert content_fingerprint(con, "t").rows == 301


def test_registration_records_it_and_re_registration_appends_a_changed_content(ledger_on):
    con = _data()
    owner = _owner(con, ledger_on(con))
    owner.register("staff", "t", key="id", metric="pay", by="dept")
    first = fingerprints.latest(owner.ledger, "staff")
    assert (first.seq, first.rows, first.note, first.relation) == (1, 300, "registered", "t")
    assert first.content_hash == content_fingerprint(con, "t").content_hash
    con.execute("UPDATE t SET pay = 0 WHERE id = 1")
    refused = fingerprints.check_copy(owner.ledger, owner.datasets(), lambda r: content_fingerprint(con, r))
    assert list(refused) == ["staff"] and "differ" in refused["staff"].line() and "'staff'" in refused["staff"].line()
    owner.register("staff", "t", key="id", metric="pay", by="dept", replace=True)
    entries = fingerprints.history(owner.ledger, "staff")
    assert [(e.seq, e.note) for e in entries] == [(1, "registered"), (2, "re-registered: content changed")]
    assert entries[0].content_hash == first.content_hash  # the old content stays in the history
    assert fingerprints.check_copy(owner.ledger, owner.datasets(), lambda r: content_fingerprint(con, r)) == {}


def test_a_copy_with_another_row_count_or_no_fingerprint_is_refused_saying_why(ledger_on):
    con = _data()
    owner = _owner(con, ledger_on(con))
    owner.register("staff", "t", key="id", metric="pay", by="dept")
    con.execute("DELETE FROM t WHERE id = 0")
    refused = fingerprints.check_copy(owner.ledger, owner.datasets(), lambda r: content_fingerprint(con, r))
    assert "299 rows, 300 were registered" in refused["staff"].line()
    bare = fingerprints.check_copy(owner.ledger, [type("D", (), {"name": "old", "relation": "t"})()],
                                   lambda r: content_fingerprint(con, r))
    assert "no content fingerprint" in bare["old"].line()


def test_a_move_into_postgresql_carries_the_fingerprints_and_fills_the_missing(postgres_server, tmp_path):
    path = tmp_path / "data.duckdb"
    con = _data(path)
    owner = _owner(con, None)
    owner.register("staff", "t", key="id", metric="pay", by="dept")
    owner.register("older", "t", key="id", metric="pay", by="dept")
    owner.ledger.read_with(  # as registered by an earlier version: no fingerprint
        lambda ops: ops.cur.execute(f"DELETE FROM {ops.t.prefix}fingerprints WHERE dataset = 'older'"))
    url = postgres_server.fresh_url()
    owner.move_ledger(url)
    con.close()
    from pcor_sql.ledger.postgres_store import PostgresStore
    from pcor_sql.ledger.store import Ledger

    moved = Ledger(store=PostgresStore(url))
    try:
        notes = {e.dataset: e.note for e in fingerprints.history(moved)}
        assert notes == {"staff": "registered", "older": "migrated"}
        assert {e.rows for e in fingerprints.history(moved)} == {300}
    finally:
        moved.close()
