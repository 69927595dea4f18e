"""`--bins` on explain-outlier, coe and dataset add: ranges on the command line, and the
refusal of a numeric attribute without bins (one line, nothing charged)."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pytest

import pcor_sql

from cli_helpers import assert_error, invoke

QUERY = "SELECT pay FROM people WHERE id = 9"


@pytest.fixture
def people_db(tmp_path):
    path = tmp_path / "people.duckdb"
    rng = np.random.default_rng(3)
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE people (id INTEGER, age INTEGER, dept VARCHAR, pay DOUBLE)")
    rows = [(i, int(a), "ab"[i % 2], 1000.0 + 20 * int(a) + float(rng.normal(0, 30)))
            for i, a in enumerate(rng.integers(18, 81, 200))]
    rows[9] = (9, 25, "a", 1000.0 + 20 * 70)
    con.executemany("INSERT INTO people VALUES (?, ?, ?, ?)", rows)
    con.close()
    return path


def test_explain_outlier_with_bins_releases_a_range(people_db):
    result = invoke("explain-outlier", QUERY, "--db", str(people_db), "--by", "age,dept", "--domain", "dept=a|b",
                    "--bins", "age=18,30,45,65,81", "--verifier", "grubbs", "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    assert first_json(result.stdout)["predicate"].count('"age" >= ') == 1


def one_range(labels):
    """The run of consecutive bin labels as one interval: `[18, 30)`, `[30, 45)` → `[18, 45)`."""
    return labels[0].split(",")[0] + "," + labels[-1].split(",")[1]


def test_a_run_of_bins_reads_as_one_range(people_db):
    """The summary (text and JSON) and the released-context lines say `age is [18, 45)`, not
    `[18, 30) or [30, 45)`. A large ε on `direct` picks the largest valid context: a run of
    several bins, not all of them (pay of a 70-year-old, aged 25)."""
    args = ("explain-outlier", QUERY, "--db", str(people_db), "--by", "age,dept", "--domain", "dept=a|b",
            "--bins", "age=18,30,45,65,81", "--verifier", "grubbs", "--search", "direct", "--epsilon", "50",
            "--seed", "1", "--allow-seeded")
    doc = first_json(invoke(*args, "--format", "json").stdout)
    labels = doc["context"]["age"]
    assert 1 < len(labels) < 4  # the test can fail: a run of several bins, and not the whole attribute
    ages = one_range(labels)
    assert f"age is {ages}" in doc["summary"] and " or " not in doc["summary"]
    text = invoke(*args).stdout
    assert f"age is {ages}" in text.splitlines()[0] and " or " not in text.splitlines()[0]
    assert any(line.split() == ["age", "∈", *ages.split()] for line in text.splitlines())


def first_json(text):
    """The first record of a JSON document or of JSON lines."""
    try:
        doc = json.loads(text)
    except ValueError:
        doc = json.loads(text.splitlines()[0])
    return doc[0] if isinstance(doc, list) else doc


def test_coe_with_bins(people_db):
    result = invoke("coe", QUERY, "--db", str(people_db), "--by", "age", "--bins", "age=-inf,30,45,inf",
                    "--verifier", "grubbs", "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    contexts = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert contexts and all("inf" not in json.dumps(c.get("predicate", "")) for c in contexts)


def test_a_numeric_attribute_without_bins_is_refused_and_not_charged(people_db):
    result = invoke("explain-outlier", QUERY, "--db", str(people_db), "--by", "age", "--verifier", "grubbs")
    assert_error(result, "age is a numeric column with", "--bins 'age=e1,e2,e3,...'")
    con = duckdb.connect(str(people_db))
    try:
        owner = pcor_sql.Owner(con)  # the ledger pinned to the file
        assert owner.ledger.history() == () and all(s.spent == 0 for s in owner.status())  # nothing charged
    finally:
        con.close()


def test_dataset_add_with_bins(people_db):
    added = invoke("dataset", "add", "people", "people", "--key", "id", "--metric", "pay", "--by", "age,dept",
                   "--domain", "dept=a|b", "--bins", "age=18,30,45,65,81", "--db", str(people_db))
    assert added.exit_code == 0, added.stderr
    shown = invoke("dataset", "show", "people", "--db", str(people_db))
    assert "bins age: 18,30,45,65,81 = [18, 30) [30, 45) [45, 65) [65, 81]" in shown.stdout


def test_bad_bins_flag(people_db):
    assert_error(invoke("explain-outlier", QUERY, "--db", str(people_db), "--by", "age", "--bins", "age=3,2"),
                 "increase strictly")
