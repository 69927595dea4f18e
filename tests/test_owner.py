"""The owner's side of the trust model (DESIGN.md §6): every spelling of the same data draws on
one account, limits per unit, where the ledger lives, seeds, and warnings Python callers see."""

from __future__ import annotations

import os
import warnings

import duckdb
import pytest

import pcor_sql
from pcor_sql.errors import BudgetExceeded, PrivacyWarning, Refused, UserError

LIMIT, EPSILON = 1.0, 0.3


def make_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TYPE dept AS ENUM ('a', 'b', 'c')")
    con.execute(
        "CREATE TABLE t AS SELECT i AS id, (['a', 'b', 'c'])[i % 3 + 1]::dept AS dept,"
        " CASE WHEN i = 42 THEN 900.0 ELSE 100.0 + (i * 37 % 11) END AS pay FROM range(90) s(i)"
    )
    con.execute("CREATE TABLE lookup AS SELECT 'a'::dept AS dept, 'north' AS region")
    con.execute("CREATE VIEW v AS SELECT * FROM t")
    con.execute("CREATE VIEW vv AS SELECT * FROM v")
    # Public tables (marked public by the tests that use them): the ids and departments of t,
    # and a published copy of t whose record a selector may pick by reading t.
    con.execute("CREATE TABLE pubn AS SELECT id, dept FROM t")
    con.execute("CREATE TABLE pubpay AS SELECT * FROM t")


@pytest.fixture
def owner():
    con = duckdb.connect()
    make_table(con)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield pcor_sql.Owner(con)
    con.close()


TABLE_SPELLINGS = [
    "SELECT pay FROM t WHERE id = 42",
    "SELECT pay FROM main.t WHERE id = 42",
    "SELECT pay FROM memory.main.t WHERE id = 42",
    "SELECT s.pay FROM t AS s WHERE s.id = 42",
    "SELECT pay FROM (SELECT * FROM t) WHERE id = 42",
    "SELECT pay FROM v WHERE id = 42",
    "SELECT pay FROM vv WHERE id = 42",
    "SELECT pay FROM (WITH x AS (SELECT * FROM t) SELECT * FROM x) WHERE id = 42",
    "SELECT pay FROM t JOIN lookup USING (dept) WHERE id = 42",
]


# Whole statements that read t outside the relation, and spellings refused as unattributable.
STATEMENT_SPELLINGS = [
    "SELECT (SELECT pay FROM t WHERE t.id = p.id) AS pay FROM pubn AS p WHERE id = 42",  # the metric
    "SELECT pay FROM pubpay WHERE id = (SELECT id FROM t WHERE pay > 800)",  # the selector
    "SELECT (SELECT pay FROM vv WHERE vv.id = p.id) AS pay FROM pubn AS p WHERE p.id IN (SELECT id FROM v WHERE id = 42)",
]
UNATTRIBUTABLE = [
    "SELECT sec(id) AS pay FROM pubn WHERE id = 42",  # a macro reading t
    "SELECT pay FROM v WHERE id = 42",  # v once a temp view v over pubpay shadows it
]


def _release(owner: pcor_sql.Owner, query: str, **options) -> str:
    try:
        owner.explain_outlier(query, epsilon=EPSILON, verifier="grubbs", by="dept", **options)
    except BudgetExceeded:
        return "refused"
    except UserError as exc:
        assert "\n" not in str(exc)
        return "unattributable"
    return "released"


def test_every_spelling_of_a_table_draws_on_one_limit(owner):
    owner.set_limit("t", LIMIT)
    owner.set_limit("lookup", 10.0)
    owner.mark_public("pubn")
    owner.mark_public("pubpay")
    owner.con.execute("CREATE MACRO sec(i) AS (SELECT pay FROM t WHERE t.id = i)")
    owner.register("people", "t", key="id", metric="pay", by="dept")
    outcomes = [_release(owner, q) for q in STATEMENT_SPELLINGS + TABLE_SPELLINGS]
    owner.con.execute("CREATE TEMP VIEW v AS SELECT * FROM pubpay")
    assert [_release(owner, q) for q in UNATTRIBUTABLE] == ["unattributable"] * 2
    owner.con.execute("ATTACH ':memory:' AS scratch")
    owner.con.execute("USE scratch")  # the ledger stays with the data
    outcomes += [_release(owner, TABLE_SPELLINGS[2]), _release(owner, TABLE_SPELLINGS[2], dataset="people")]
    assert outcomes.count("released") == int(LIMIT / EPSILON)
    assert outcomes[:3] == ["released"] * 3  # the statements that read t outside FROM paid t's account
    assert owner.spent("memory.main.t") <= LIMIT + 1e-12
    owner.con.execute("USE memory")
    assert owner.spent("memory.main.t") == owner.spent("people") == owner.spent("t")
    joined = [r for r in owner.ledger.history() if r.unit == "memory.main.lookup"]
    assert all(r.epsilon == EPSILON for r in joined)  # the join was charged to both tables


def test_every_spelling_of_a_file_draws_on_one_limit(owner, tmp_path, monkeypatch):
    path = tmp_path / "t.parquet"
    owner.con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    monkeypatch.chdir(tmp_path)
    [changed] = owner.set_limit("'t.parquet'", LIMIT)
    assert changed.unit == f"file:{path}"
    d = tmp_path.name
    sources = [f"'file://{path}'", f"'file://{tmp_path}/./t.parquet'", f"'file:{path}'", f"'{path}'", "'t.parquet'",
               f"'../{d}/t.parquet'", f"read_parquet('file://localhost{path}')", "read_parquet('./t.parquet')"]
    outcomes = [_release(owner, f"SELECT pay FROM {s} WHERE id = 42", domains={"dept": ["a", "b", "c"]}) for s in sources]
    assert outcomes.count("released") == int(LIMIT / EPSILON) and "unattributable" not in outcomes
    assert owner.spent(f"file://{path}") == pytest.approx(EPSILON * 3)
    os.link(path, tmp_path / "hard.parquet")  # a hard link opens no second account: both names are refused
    for name in ("hard.parquet", "t.parquet"):
        assert _release(owner, f"SELECT pay FROM '{name}' WHERE id = 42", domains={"dept": ["a", "b", "c"]}) == "unattributable"
    os.unlink(tmp_path / "hard.parquet")
    assert owner.spent(str(path)) == pytest.approx(EPSILON * 3)


def test_a_dataset_label_never_opens_an_account(owner):
    owner.set_limit("t", LIMIT)
    with pytest.raises(UserError, match="no registered dataset 'x'"):
        owner.explain_outlier("SELECT pay FROM t WHERE id = 42", dataset="x", verifier="grubbs")
    assert owner.ledger.history() == ()


def test_a_strict_ledger_refuses_tables_without_a_limit(owner):
    owner.set_limit("lookup", 1.0)
    with pytest.raises(Refused, match="memory.main.t"):
        owner.explain_outlier("SELECT pay FROM t WHERE id = 42", verifier="grubbs")
    owner.mark_public("lookup")
    owner.set_default_limit(0.5)
    [e] = owner.explain_outliers("SELECT pay FROM t JOIN lookup USING (dept) WHERE id = 42", epsilon=0.5,
                                 verifier="grubbs", by="dept")
    assert e.units == ("memory.main.lookup", "memory.main.t")
    assert owner.spent("lookup") == 0.0 and owner.spent("t") == 0.5


def test_register_freezes_domains_and_validates(owner):
    d = owner.register("people", "t", key="id", metric="pay", by="dept", limit={"ocdp": 2.0})
    assert d.domains == (("dept", ("a", "b", "c")),) and d.units == ("memory.main.t",)
    assert owner.status("people", "ocdp")[0].limit == 2.0 and owner.status("people", "dp")[0].limit is None
    for kwargs, match in [
        (dict(key="nope", metric="pay", by="dept"), "key column 'nope'"),
        (dict(key="id", metric="dept", by="dept"), "not a number|metric"),
        (dict(key="id", metric="pay", by="dept", accounting="loose"), "accounting"),
        (dict(key="id", metric="pay", by="dept", limit={"cdp": 1.0}), "notion"),
    ]:
        with pytest.raises(UserError, match=match):
            owner.register("other", "t", **kwargs)
    with pytest.raises(UserError, match="already"):
        owner.register("people", "t", key="id", metric="pay", by="dept")
    with pytest.raises(UserError, match="invalid dataset name"):
        owner.register("two words", "t", key="id", metric="pay", by="dept")
    assert [x.name for x in owner.datasets()] == ["people"]
    owner.unregister("people")
    assert owner.datasets() == ()


def test_python_callers_see_privacy_warnings():
    con = duckdb.connect()
    make_table(con)
    con.execute("CREATE TABLE plain AS SELECT id, dept::VARCHAR AS dept, pay FROM t")
    with pytest.warns(PrivacyWarning, match="in memory"):
        owner = pcor_sql.Owner(con)
    with pytest.warns(PrivacyWarning, match="seeded run"):
        owner.explain_outlier("SELECT pay FROM t WHERE id = 42", verifier="grubbs", seed=7)
    with pytest.warns(PrivacyWarning, match="no declared domain"):
        owner.explain_outlier("SELECT pay FROM plain WHERE id = 42", verifier="grubbs", by="dept")


def test_the_ledger_lives_in_the_data_file_and_refuses_seeds(tmp_path):
    path = tmp_path / "data.duckdb"
    con = duckdb.connect(str(path))
    make_table(con)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # a file ledger: no in-memory warning
        owner = pcor_sql.Owner(con)
    assert owner.ledger.path == str(path)
    with pytest.raises(Refused, match="seed"):
        owner.explain_outlier("SELECT pay FROM t WHERE id = 42", verifier="grubbs", seed=7)
    with pytest.raises(UserError, match="keeps its own budget ledger"):
        pcor_sql.Owner(con, str(tmp_path / "other.duckdb"))
    allowed = pcor_sql.Owner(con, allow_seeded=True)
    with pytest.warns(PrivacyWarning, match="seeded"):
        allowed.explain_outlier("SELECT pay FROM t WHERE id = 42", verifier="grubbs", seed=7)
    [record] = allowed.ledger.history()
    assert record.seeded and record.unit == "main.t"  # the ledger's own database: no alias in the name
    con.close()
    reopened = duckdb.connect(str(path))
    assert pcor_sql.Owner(reopened).spent("t") == 0.2  # the charge persisted with the data
    reopened.close()


def test_a_ledger_file_for_in_memory_data(tmp_path, monkeypatch):
    con = duckdb.connect()
    make_table(con)
    ledger_path = tmp_path / "sub" / "ledger.duckdb"
    monkeypatch.setenv("PCOR_SQL_LEDGER", str(ledger_path))
    owner = pcor_sql.Owner(con)
    assert owner.ledger.path == str(ledger_path) and ledger_path.exists()
    owner.explain_outlier("SELECT pay FROM t WHERE id = 42", verifier="grubbs")
    owner.ledger.close()
    again = pcor_sql.Owner(con)
    assert again.spent("t") == 0.2
    again.ledger.close()
    bad = tmp_path / "not-a-db.duckdb"
    bad.write_text("hello")
    with pytest.raises(UserError, match="cannot open ledger"):
        pcor_sql.Owner(con, str(bad))


def test_a_database_file_is_one_account_under_every_alias_and_link(tmp_path):
    """The ledger inside data.duckdb charges its tables under names that carry no alias: the
    file opened through a hard link, attached again under another name, or reached after USE
    pays the same rows; another connection's ATTACH of the file is refused (its ledger is inside)."""
    path = tmp_path / "data.duckdb"
    con = duckdb.connect(str(path))
    make_table(con)
    pcor_sql.Owner(con).set_limit("t", LIMIT)
    con.close()
    os.link(path, tmp_path / "hard.duckdb")
    outcomes = []
    for name, spellings in [("data", ["t", "data.main.t"]), ("hard", ["v", "hard.t", "anything.t"])]:
        con = duckdb.connect(str(tmp_path / f"{name}.duckdb"))
        owner = pcor_sql.Owner(con)
        for spelling in spellings:
            if spelling == "anything.t":
                con.execute(f"ATTACH '{path}' AS anything (READ_ONLY)")  # the same file, a second path to it
            outcomes.append(_release(owner, f"SELECT pay FROM {spelling} WHERE id = 42"))
        assert owner.spent("t") <= LIMIT + 1e-12 and {s.unit for s in owner.status()} == {"main.t"}
        con.close()
    assert outcomes.count("released") == int(LIMIT / EPSILON) and "unattributable" not in outcomes
    memory = duckdb.connect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        elsewhere = pcor_sql.Owner(memory)
    for alias in ("data", "anything"):
        memory.execute(f"ATTACH '{tmp_path / 'hard.duckdb'}' AS {alias} (READ_ONLY)")
        with pytest.raises(UserError, match="keeps its own budget ledger"):
            elsewhere.explain_outlier(f"SELECT pay FROM {alias}.t WHERE id = 42", verifier="grubbs")
        memory.execute(f"DETACH {alias}")
    assert elsewhere.ledger.history() == ()
    memory.close()


def test_a_view_redefined_under_a_live_session_charges_its_new_table(owner):
    owner.con.execute("CREATE TABLE t2 AS SELECT * FROM t")
    owner.set_limit("t", LIMIT)
    owner.set_limit("t2", 0.1)
    assert _release(owner, "SELECT pay FROM v WHERE id = 42") == "released"
    owner.con.execute("CREATE OR REPLACE VIEW v AS SELECT * FROM t2")
    assert [_release(owner, "SELECT pay FROM v WHERE id = 42") for _ in range(3)] == ["refused"] * 3
    assert owner.spent("t2") == 0.0 and owner.spent("t") == pytest.approx(EPSILON)
    owner.set_limit("t2", LIMIT)
    assert _release(owner, "SELECT pay FROM v WHERE id = 42") == "released"
    assert owner.spent("t2") == pytest.approx(EPSILON) and owner.spent("t") == pytest.approx(EPSILON)
