"""Ordinal attributes through registration (DESIGN.md §2, §6): bins frozen with the dataset's
domains, analysts' releases over them, and what an analyst may not do with bins."""

from __future__ import annotations

import re
import warnings

import duckdb
import numpy as np
import pytest

import pcor_sql
from pcor_sql.errors import PrivacyWarning, Refused, UserError

EDGES = [18, 30, 45, 65, 81]


@pytest.fixture
def owner():
    rng = np.random.default_rng(2)
    con = duckdb.connect()
    con.execute("CREATE TABLE people (id INTEGER, age INTEGER, dept VARCHAR, pay DOUBLE)")
    ages = rng.integers(18, 81, 300)
    rows = [(i, int(a), "ab"[i % 2], 1000.0 + 20 * int(a) + float(rng.normal(0, 30))) for i, a in enumerate(ages)]
    rows[9] = (9, 25, "a", 1000.0 + 20 * 70)  # the pay of a 70-year-old, aged 25
    con.executemany("INSERT INTO people VALUES (?, ?, ?, ?)", rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield pcor_sql.Owner(con)
    con.close()


def register(owner, **kw):
    return owner.register("people", "people", key="id", metric="pay", by="age,dept", domains={"dept": ["a", "b"]},
                          limit=5.0, releasable=[9], **kw)


def test_bins_are_frozen_with_the_domains(owner):
    d = register(owner, bins={"age": EDGES})
    assert d.bins == (("age", ("18", "30", "45", "65", "81")),)
    assert dict(d.domains)["age"] == ("[18, 30)", "[30, 45)", "[45, 65)", "[65, 81]")
    assert owner.dataset("people") == d  # read back from the ledger as written
    assert d.as_dict()["bins"] == {"age": ["18", "30", "45", "65", "81"]}
    owner.con.execute("INSERT INTO people VALUES (999, 18, 'a', 1.0)")
    assert owner.dataset("people").bins == d.bins


def test_an_analyst_release_is_one_age_range_and_charged(owner):
    register(owner, bins={"age": EDGES})
    analyst = owner.analyst()
    e = analyst.explain_outlier("people", 9, verifier="grubbs", epsilon=0.5, search="direct")
    [(lo, hi)] = re.findall(r'"age" >= (\d+) AND "age" <=? (\d+)', e.predicate)
    assert int(lo) <= 25 < int(hi)
    [s] = analyst.sql("EXPLAIN OUTLIER SELECT pay FROM people WHERE id = 9 USING grubbs WITH (epsilon = 0.5)")
    assert len(re.findall(r'"age" >= ', s.predicate)) == 1
    assert owner.spent("people") == pytest.approx(1.0)


def test_bins_are_the_owner_s(owner):
    register(owner, bins={"age": EDGES})
    analyst = owner.analyst()
    with pytest.raises(Refused, match="bins is the data owner's option"):
        analyst.explain_outlier("people", 9, bins={"age": [18, 81]})
    with pytest.raises(Refused, match="DOMAIN clause is the owner's"):
        analyst.sql("EXPLAIN OUTLIER SELECT pay FROM people WHERE id = 9 DOMAIN (age BINS (18, 81))")
    assert owner.spent("people") == 0


def test_a_numeric_attribute_without_bins_is_not_registered(owner):
    with pytest.raises(UserError, match=r"age is a numeric column with \d+ distinct values") as err:
        register(owner)
    assert "declare bins" in err.value.fix
    assert owner.datasets() == ()


def test_auto_bins_are_computed_once_with_a_warning(owner):
    with pytest.warns(PrivacyWarning, match="quantiles"):
        d = register(owner, bins={"age": "auto:3"})
    edges = [int(e) for e in dict(d.bins)["age"]]
    assert len(edges) == 4 and edges[0] == 18 and edges[-1] == 80
    owner.con.execute("INSERT INTO people VALUES (1000, 80, 'a', 1.0), (1001, 80, 'b', 1.0)")
    e = owner.analyst().explain_outlier("people", 9, verifier="grubbs", epsilon=0.5)
    assert re.search(r'"age" >= \d+', e.predicate)
    assert owner.dataset("people").bins == d.bins  # frozen: the new rows move no edge


def one_range(labels):
    """The run of consecutive bin labels as one interval: `[18, 30)`, `[30, 45)` → `[18, 45)`."""
    return labels[0].split(",")[0] + "," + labels[-1].split(",")[1]


def test_a_run_of_bins_reads_as_one_range_in_python_results(owner):
    """The analyst's release, the owner's `Explanation` and the owner's COE all say `age is
    [18, 45)` in words, not the bins' labels joined by `or`; the context itself keeps the
    labels, and the JSON gains no key."""
    register(owner, bins={"age": EDGES})  # a limit of 5 on the unit
    a = owner.analyst().explain_outlier("people", 9, verifier="grubbs", epsilon=0.5, search="direct")
    assert a.ranges == {"age": one_range(a.context["age"])}
    assert f"age is {one_range(a.context['age'])}" in a.summary or "age" not in a.summary
    assert "ranges" not in a.as_dict()
    # Seeded, ε = 4 on `direct`: the largest valid context, a run of several bins but not all
    # (the pay of a 70-year-old, aged 25).
    e = pcor_sql.explain_outlier(owner.con, "SELECT pay FROM people WHERE id = 9", by="age,dept",
                                 domains={"dept": ["a", "b"]}, bins={"age": EDGES}, verifier="grubbs",
                                 search="direct", epsilon=4, seed=1)
    labels = e.context["age"]
    assert 1 < len(labels) < len(EDGES) - 1  # the test can fail
    assert e.ranges == {"age": one_range(labels)}
    assert f"age is {one_range(labels)}" in e.summary and " or " not in e.summary
    assert e.as_dict()["summary"] == e.summary and "ranges" not in e.as_dict()
    [coe] = pcor_sql.coe(owner.con, "SELECT pay FROM people WHERE id = 9", by="age,dept", domains={"dept": ["a", "b"]},
                         bins={"age": EDGES}, verifier="grubbs")
    assert len(coe) > 1 and all(c.ranges == {"age": one_range(c.context["age"])} for c in coe)
