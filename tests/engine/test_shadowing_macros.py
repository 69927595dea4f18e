"""A macro in the owner's database named like a built-in changes nothing the engine does.

DuckDB looks a function up by name, user macros first: `CREATE MACRO count(x) AS 0` makes every
unqualified `count(x)` return 0, and operators, list literals and row tuples are calls by name
too (`a + b` calls "+", `[x]` list_value, `(a, b)` row, `count(*)` count_star). Left alone, such
a macro would change populations and verdicts (the release), and the ledger's sums, its check
that a limit exists, its default-limit lookup (the budget). The engine's own SQL calls every
built-in as `system.main.<name>`, which no macro can take.

The test gives one database a macro for *every* built-in function name — scalar, aggregate and
window names a scalar macro returning 42, table functions a table macro — and runs the same
owner and analyst work on it and on a twin without macros: seeded releases over several
searches and verifiers, the owner's COE, an anomaly answer, an EXPLAIN OUTLIER statement, a
registration, an analyst's release, the refusals of a unit without a limit and of a release
past its limit, and the ledger's status, history and check against its history. Everything
must come out the same. The record's own query calls no function, so the macros can only
reach what the engine adds.
"""

from __future__ import annotations

import warnings

import duckdb
import numpy as np
import pytest

import pcor_sql
from pcor_sql.errors import PrivacyWarning

QUERY = "SELECT pay FROM people WHERE id = 9"
OPTIONS = dict(by="age,dept", domains={"dept": ["a", "b"]}, bins={"age": [18, 30, 45, 65, 81]})
STATEMENT = ("EXPLAIN OUTLIER SELECT pay FROM people WHERE id = 9 BY age, dept"
             " DOMAIN (dept IN ('a', 'b'), age BINS (18, 30, 45, 65, 81)) USING grubbs WITH (epsilon = 0.1, seed = 3)")


def _name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def shadow_every_builtin(con: duckdb.DuckDBPyConnection) -> int:
    """A macro for every built-in function name of this DuckDB (in the database's main schema,
    where `CREATE MACRO` puts it); returns how many."""
    rows = duckdb.connect().execute("SELECT DISTINCT function_name, function_type FROM duckdb_functions()").fetchall()
    scalar = sorted({n for n, kind in rows if kind in ("scalar", "aggregate", "window", "macro")})
    table = sorted({n for n, kind in rows if kind in ("table", "table_macro")})
    con.execute(";".join(f"CREATE MACRO {_name(n)}() AS 42, (a) AS 42, (a, b) AS 42, (a, b, c) AS 42" for n in scalar))
    con.execute(";".join(f"CREATE MACRO {_name(n)}() AS TABLE SELECT 42 AS x" for n in table))
    return len(scalar) + len(table)


def people(path: str) -> duckdb.DuckDBPyConnection:
    rng = np.random.default_rng(2)
    con = duckdb.connect(path)
    con.execute("CREATE TABLE people (id INTEGER, age INTEGER, dept VARCHAR, pay DOUBLE)")
    rows = [(i, int(a), "ab"[i % 2], 1000.0 + 20 * int(a) + float(rng.normal(0, 30)))
            for i, a in enumerate(rng.integers(18, 81, 300))]
    rows[9] = (9, 25, "a", 1000.0 + 20 * 70)  # the pay of a 70-year-old, aged 25
    con.executemany("INSERT INTO people VALUES (?, ?, ?, ?)", rows)
    con.execute("CREATE TABLE other (id INTEGER, pay DOUBLE)")
    con.executemany("INSERT INTO other VALUES (?, ?)", [(i, float(i)) for i in range(50)])
    return con


def outcome(step) -> object:
    """What a step returned, or its error as one line (a refusal is an outcome too)."""
    try:
        return step()
    except Exception as exc:  # any class: the class and message are what is compared
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"


def work(con: duckdb.DuckDBPyConnection) -> dict[str, object]:
    out: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        owner = pcor_sql.Owner(con, allow_seeded=True)
        for search in ("direct", "bfs", "explore", "random-walk"):
            for verifier in ("grubbs", "lof(k=5)", "histogram(rel=0.05)"):
                out[f"{search} {verifier}"] = outcome(lambda: owner.explain_outlier(
                    QUERY, verifier=verifier, search=search, epsilon=0.1, seed=3, **OPTIONS).predicate)
        out["coe"] = outcome(lambda: [(c.predicate, c.utility) for c in owner.coe(QUERY, verifier="zscore", **OPTIONS)[0]])
        out["anomaly"] = outcome(lambda: owner.identify_anomaly(QUERY, beta=5, radius=10.0, epsilon=0.5, seed=3,
                                                                owner_view=True).owner)
        out["statement"] = outcome(lambda: [e.predicate for e in owner.sql(STATEMENT)])
        out["register"] = outcome(lambda: owner.register("people", "people", key="id", metric="pay", limit=5.0,
                                                         releasable=[9], **OPTIONS).domains)
        analyst = owner.analyst()
        out["analyst"] = outcome(lambda: sorted(analyst.explain_outlier("people", 9, verifier="grubbs", epsilon=0.5,
                                                                        search="direct").context))
        out["past the limit"] = outcome(lambda: analyst.explain_outlier("people", 9, verifier="grubbs", epsilon=4.9))
        out["no limit"] = outcome(lambda: owner.explain_outlier("SELECT pay FROM other WHERE id = 3", by="id",
                                                                domains={"id": list(range(50))}, epsilon=0.1))
        out["status"] = [(s.unit, s.notion, round(s.spent, 9), s.limit) for s in owner.status()]
        out["history"] = [(h.unit, h.notion, h.epsilon, h.outcome) for h in owner.ledger.history()]
        out["verify"] = owner.verify_ledger()
    return out


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """(what the work gives without macros, what it gives with every built-in shadowed)."""
    results = []
    for shadowed in (False, True):
        con = people(str(tmp_path_factory.mktemp("db") / "people.duckdb"))
        try:
            if shadowed:
                assert shadow_every_builtin(con) > 1000
                # The macros are live on the owner's connection: the owner's own SQL gets them.
                assert con.execute("SELECT count(pay), 1 + 1 FROM people LIMIT 1").fetchall() == [(42, 42)]
            results.append(work(con))
        finally:
            con.close()
    return results


def test_every_builtin_shadowed_changes_no_release_and_no_charge(twins):
    plain, shadowed = twins
    assert {k: v for k, v in shadowed.items() if v != plain[k]} == {}


def test_the_work_did_what_it_should(twins):
    """The comparison above means something: releases were made, refusals refused, the ledger
    charged and agrees with its history."""
    plain, _ = twins
    assert all('"age" >= 18' in plain[f"{s} grubbs"] for s in ("direct", "bfs", "explore", "random-walk"))
    assert isinstance(plain["coe"], list) and len(plain["coe"]) > 1
    assert plain["anomaly"]["not_for_release"] is True
    assert plain["past the limit"].startswith("BudgetExceeded")
    assert plain["no limit"].startswith("Refused") and "holds limits" in plain["no limit"]
    assert any(s[1] == "ocdp" and s[2] > 1 for s in plain["status"]) and plain["verify"] == ()
    assert len(plain["history"]) > 10


def test_one_macro_named_count_star_neither_skips_a_limit_nor_empties_populations(tmp_path):
    """`count(*)` calls count_star by name. Before the engine qualified it, this one macro made
    the ledger read "no limit anywhere" (a unit without a limit was charged, not refused, in a
    ledger that holds limits) and every cell's population 0."""
    seen = []
    for macro in ("", "CREATE MACRO count_star() AS 0"):
        con = people(str(tmp_path / f"people{len(seen)}.duckdb"))
        try:
            if macro:
                con.execute(macro)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyWarning)
                owner = pcor_sql.Owner(con, allow_seeded=True)
                owner.set_limit("people", 5.0)
                refused = outcome(lambda: owner.explain_outlier("SELECT pay FROM other WHERE id = 3", by="id",
                                                                domains={"id": list(range(50))}, epsilon=0.1))
                coe = outcome(lambda: [(c.predicate, c.utility) for c in owner.coe(QUERY, verifier="zscore", **OPTIONS)[0]])
                seen.append((refused, coe, owner.ledger.history()))
        finally:
            con.close()
    (refused, coe, history), shadowed = seen
    assert refused.startswith("Refused") and history == () and len(coe) > 1
    assert shadowed == seen[0]


def test_a_macro_named_isfinite_does_not_break_the_ledger_s_checks(tmp_path):
    """The ledger's CHECK constraints are bound at each write: with `isfinite` unqualified, a
    macro returning false made every charge fail its CHECK (no release could be charged)."""
    con = people(str(tmp_path / "people.duckdb"))
    try:
        con.execute("CREATE MACRO isfinite(x) AS false")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            owner = pcor_sql.Owner(con, allow_seeded=True)
            owner.set_limit("people", 5.0)
            e = owner.explain_outlier(QUERY, verifier="grubbs", search="direct", epsilon=0.5, seed=3, **OPTIONS)
            assert '"age" >= 18' in e.predicate
            assert owner.spent("people") == pytest.approx(0.5) and owner.verify_ledger() == ()
    finally:
        con.close()
