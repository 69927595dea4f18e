"""Ordinal attributes end to end on DuckDB (DESIGN.md §2): a generated table with an integer
age column, binned by declared edges.

- COE enumerates exactly the contexts whose age selection is a run of bins holding V's bin,
  compared with a brute force over every t-bit mask (the moment path and the one-by-one path,
  both utilities), each valid context's population re-read through its own released SQL;
- every search releases one age range holding V's age, and the release is re-checked from its
  own SQL (the explanation query run on DuckDB, the verifier applied to what it returns);
- a value outside the edges is an input error, for the data and for the record;
- the numeric attribute without bins is refused before any charge (the ledger stays empty).
"""

from __future__ import annotations

import re
import warnings

import duckdb
import numpy as np
import pytest

import pcor_sql
from pcor_sql.core.bins import bin_labels, bin_of
from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.registry import default_registry
from pcor_sql.errors import PrivacyWarning, UserError
from pcor_sql.session import Session

EDGES = [18, 30, 40, 50, 65, 81]
DEPTS = ("a", "b", "c")
SEARCHES = ("direct", "uniform", "random-walk", "dfs", "bfs", "explore")
RECORD = 7  # aged 33: bin [30, 40)


def people(rows: int = 240, seed: int = 4) -> duckdb.DuckDBPyConnection:
    """`people(id, age INTEGER, dept, salary)`: salary rises with age; record 7, aged 33 in
    dept a, earns what a 60-year-old does — an outlier among the young, not among all."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 81, rows)
    dept = rng.choice(DEPTS, rows)
    salary = 30_000 + 900 * (age - 18) + rng.normal(0, 2_500, rows)
    age[RECORD], dept[RECORD], salary[RECORD] = 33, "a", 30_000 + 900 * 42
    con = duckdb.connect()
    con.execute("CREATE TABLE people (id INTEGER NOT NULL, age INTEGER, dept VARCHAR, salary DOUBLE)")
    con.executemany("INSERT INTO people VALUES (?, ?, ?, ?)",
                    [(i, int(a), str(d), float(s)) for i, (a, d, s) in enumerate(zip(age, dept, salary))])
    return con


@pytest.fixture(scope="module")
def con():
    connection = people()
    yield connection
    connection.close()


QUERY = f"SELECT salary FROM people WHERE id = {RECORD}"
OPTIONS = dict(by="age,dept", domains={"dept": list(DEPTS)}, bins={"age": EDGES})


def brute_force_coe(con, verifier, utility, start_values=None):
    """{(age bins, depts): utility} over every admissible context by definition: every t-bit
    selection whose age part is one run holding V's bin and whose dept part holds V's dept,
    populations counted in numpy from the raw rows."""
    rows = con.execute("SELECT age, dept, salary FROM people").fetchall()
    ages = np.array([bin_of(EDGES, r[0]) for r in rows])
    depts = np.array([DEPTS.index(r[1]) for r in rows])
    salary = np.array([r[2] for r in rows])
    v, v_bin, v_dept = salary[RECORD], ages[RECORD], depts[RECORD]
    n_bins = len(EDGES) - 1
    out, admissible = {}, 0
    for age_bits in range(1, 1 << n_bins):
        chosen = [j for j in range(n_bins) if age_bits >> j & 1]
        if chosen != list(range(chosen[0], chosen[-1] + 1)) or v_bin not in chosen:
            continue
        for dept_bits in range(1 << len(DEPTS)):
            kept = [j for j in range(len(DEPTS)) if dept_bits >> j & 1]
            if v_dept not in kept:
                continue
            admissible += 1
            inside = np.isin(ages, chosen) & np.isin(depts, kept)
            if not verifier.check(ArrayPopulation.of(salary[inside], v)):
                continue
            if utility == "overlap":
                s_age, s_dept = start_values
                inside &= np.isin(ages, s_age) & np.isin(depts, s_dept)
            out[(tuple(chosen), tuple(kept))] = float(inside.sum())
    return out, admissible


def engine_coe(con, verifier_name, utility, start=None):
    [result] = pcor_sql.coe(con, QUERY, verifier=verifier_name, utility=utility, start=start, **OPTIONS)
    labels = bin_labels(EDGES)
    got = {}
    for c in result:
        key = (tuple(labels.index(x) for x in c.context["age"]), tuple(DEPTS.index(x) for x in c.context["dept"]))
        got[key] = c.utility
        # the released form of the context: one range over the raw column, selecting D_C
        assert len(re.findall(r'"age" >= \d+ AND "age" <=? \d+', c.predicate)) == 1 or '"age" IS NOT NULL' in c.predicate
        values = [r[0] for r in con.execute(f"SELECT salary FROM people WHERE {c.predicate}").fetchall()]
        assert make(verifier_name).check(ArrayPopulation.of(values, v_of(con)))
    return got, result.admissible


def make(spec):
    """The verifier a spec text names, e.g. `histogram(rel=0.05)`."""
    from pcor_sql.frontend.option_lists import parse_verifier_spec

    name, options = parse_verifier_spec(spec)
    return default_registry().make(name, **options)


def v_of(con):
    return con.execute(f"SELECT salary FROM people WHERE id = {RECORD}").fetchall()[0][0]


@pytest.mark.parametrize("verifier", ["grubbs", "zscore", "lof(k=5)", "histogram(rel=0.05)"])  # moments; one by one
def test_coe_is_exactly_the_valid_interval_contexts(con, verifier):
    expected, admissible = brute_force_coe(con, make(verifier), "population")
    got, engine_admissible = engine_coe(con, verifier, "population")
    assert engine_admissible == admissible == 2 * 4 * 4  # V in bin 1 of 5: 2 × 4 runs; 2^2 dept subsets
    assert got == expected
    assert expected  # the planted record is an outlier somewhere, so the comparison has content


@pytest.mark.parametrize("verifier", ["grubbs", "lof(k=5)"])
def test_coe_overlap_utility_meets_the_start_on_runs(con, verifier):
    valid, _ = brute_force_coe(con, make(verifier), "population")
    # a valid start with a run narrower than the whole range, so that meets cut runs
    (s_age, s_dept) = next(key for key in sorted(valid, key=lambda k: (-len(k[0]), k)) if len(key[0]) < 4)
    labels = bin_labels(EDGES)
    start = {"age": [labels[j] for j in s_age], "dept": [DEPTS[j] for j in s_dept]}
    expected, _ = brute_force_coe(con, make(verifier), "overlap", (list(s_age), list(s_dept)))
    got, _ = engine_coe(con, verifier, "overlap", start=start)
    assert got == expected


@pytest.mark.parametrize("search", SEARCHES)
def test_a_binned_age_release_is_one_range_valid_by_its_own_sql(con, search):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # seeded: not private, said so
        e = pcor_sql.explain_outlier(con, QUERY, search=search, verifier="grubbs", epsilon=1.0, seed=5,
                                     ledger=":memory:", **OPTIONS)
    ranges = re.findall(r'"age" >= (\d+) AND "age" (<=?) (\d+)', e.predicate)
    assert len(ranges) == 1, e.predicate
    lo, op, hi = int(ranges[0][0]), ranges[0][1], int(ranges[0][2])
    assert lo <= 33 < hi and lo in EDGES and hi in EDGES and (op == "<=") == (hi == EDGES[-1])
    assert e.predicate.count('"age"') == 2
    # the context lists the run of bins the range covers
    labels = bin_labels(EDGES)
    assert e.context["age"] == list(labels[EDGES.index(lo):EDGES.index(hi)])
    # validity re-checked from the released SQL alone
    values = [r[0] for r in con.execute(e.explanation_sql).fetchall()]
    assert default_registry().make("grubbs").check(ArrayPopulation.of(values, v_of(con)))


def test_infinite_ends_release_ranges_that_select_the_population(con):
    bins = {"age": ["-inf", 30, 40, 50, "inf"]}
    [result] = pcor_sql.coe(con, QUERY, verifier="zscore(z=2)", by="age,dept", domains={"dept": list(DEPTS)}, bins=bins)
    assert result.size > 3
    for c in result:
        assert "inf" not in c.predicate
        assert con.execute(f"SELECT count(*) FROM people WHERE {c.predicate}").fetchall()[0][0] == c.utility


def test_a_value_outside_the_edges_is_an_input_error(con):
    with pytest.raises(UserError, match=r"the data has age values outside its bins \[20, 81\]"):
        pcor_sql.coe(con, QUERY, verifier="grubbs", by="age", bins={"age": [20, 40, 81]})
    with pytest.raises(UserError, match=r"outside its bins \[40, 81\] — widen the first or last edge"):
        pcor_sql.coe(con, QUERY, verifier="grubbs", by="age", bins={"age": [40, 60, 81]})  # the record's age too


def test_bins_need_a_numeric_or_date_column(con):
    with pytest.raises(UserError, match="bins are declared for dept, which has type VARCHAR"):
        pcor_sql.coe(con, QUERY, verifier="grubbs", by="age,dept", bins={"age": EDGES, "dept": [1, 2]})
    with pytest.raises(UserError, match="is not a number"):
        pcor_sql.coe(con, QUERY, verifier="grubbs", by="age", bins={"age": ["2020-01-01", "2021-01-01"]})


def test_auto_bins_are_quantiles_with_a_privacy_warning(con):
    with pytest.warns(PrivacyWarning, match=r"age is binned by the data's quantiles \(auto:4\).*minimum, maximum"):
        [result] = pcor_sql.coe(con, QUERY, verifier="grubbs", by="age", bins={"age": "auto:4"})
    ages = [r[0] for r in con.execute("SELECT age FROM people").fetchall()]
    labels = {label for c in result for label in c.context["age"]}
    assert any(label.startswith(f"[{min(ages)}, ") for label in labels) or not labels
    assert all(label.endswith(")") or label.endswith(f", {max(ages)}]") for label in labels)


def test_a_numeric_attribute_without_bins_is_refused_before_any_charge():
    con = people()  # its own in-memory ledger: nothing charged before
    session = Session(con, ledger=":memory:", warn=lambda message: None)
    for by, problem in (("age,dept", "age is a numeric column with 63 distinct values"),
                        ("id", "id is a numeric column with 240 distinct values")):
        with pytest.raises(UserError, match=problem) as err:
            pcor_sql.explain_outlier(None, QUERY, session=session, by=by, epsilon=0.5)
        assert "declare bins" in err.value.fix and "auto:5" in err.value.fix and "a domain" in err.value.fix
    ledger = session.ledger()
    assert ledger.history() == () and all(s.spent == 0 for s in ledger.statuses())
    e = pcor_sql.explain_outlier(None, QUERY, session=session, epsilon=0.5, verifier="grubbs", **OPTIONS)
    assert len(ledger.history()) == 1 and max(s.spent for s in ledger.statuses()) == 0.5  # with bins: charged
    assert e.predicate.count('"age" >= ') == 1
    con.close()
    # 16 distinct numeric values are still labels (with the data-domain warning); a declared domain always is
    small = duckdb.connect()
    small.execute("CREATE TABLE t AS SELECT i AS id, i % 16 AS k, (i * 7919 % 101)::DOUBLE AS x FROM range(200) r(i)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        [r] = pcor_sql.coe(small, "SELECT x FROM t WHERE id = 3", by="k", verifier="grubbs")
        assert r.admissible == 2**15
        small.execute("UPDATE t SET k = i FROM range(200) r(i) WHERE id = i")
        with pytest.raises(UserError, match="k is a numeric column with 200 distinct values"):
            pcor_sql.coe(small, "SELECT x FROM t WHERE id = 3", by="k", verifier="grubbs")
        request = pcor_sql.outlier_request(small, "SELECT x FROM t WHERE id = 3", by="k", domains={"k": list(range(200))})
        assert len(Session(small).schema(request).attributes[0].domain) == 200  # declared: labels are meant
    small.close()


def test_any_column_with_more_than_64_values_is_refused():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i AS id, 'v' || (i % 65) AS label, i::DOUBLE AS x FROM range(300) r(i)")
    with pytest.raises(UserError, match="label is a column with 65 distinct values"):
        pcor_sql.coe(con, "SELECT x FROM t WHERE id = 3", by="label", verifier="grubbs")
    con.execute("UPDATE t SET label = 'v' || (id % 64)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        schema = Session(con).schema(pcor_sql.outlier_request(con, "SELECT x FROM t WHERE id = 3", by="label"))
    assert len(schema.attributes[0].domain) == 64
    con.close()
