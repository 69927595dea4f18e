"""The other commands: coe, sql (script and prompt), budget, datasets, identify-anomaly."""

from __future__ import annotations

import csv
import io
import json

import duckdb
import pytest

from typer.testing import CliRunner

from pcor_sql.cli.main import app
from cli_helpers import FAST, QUERY, assert_clean_stderr, assert_error, invoke

import pcor_sql.api
from pcor_sql.cli.runner import repl, statement_complete
from pcor_sql.engine.datasets import declared_domains


def _ok(*args: str, input: str | None = None):
    result = invoke(*args, input=input)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert_clean_stderr(result)
    return result


# ---- coe ---------------------------------------------------------------------------------

COE = ("coe", QUERY, "--by", "job_title,year", "--verifier", "grubbs")


def test_coe_json_lines_one_valid_context_each(salaries_file):
    result = _ok(*COE, "--db", str(salaries_file), "--format", "jsonl")
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    summary = result.stderr.strip().splitlines()[-1]
    assert summary.startswith("coe: OWNER ONLY — NOT FOR RELEASE")
    assert f"{len(rows):,} valid of " in summary
    utilities = [r["utility"] for r in rows]
    assert utilities == sorted(utilities, reverse=True)  # largest first
    assert f"largest utility {int(utilities[0]):,}" in summary
    domains = declared_domains("salaries")
    for r in rows[:50]:
        assert {"context", "utility", "predicate", "record"} <= set(r) and r["not_for_release"] is True
        for attribute, values in r["context"].items():
            assert values == [v for v in domains[attribute] if v in values]  # domain order
            assert r["record"][attribute] in values  # admissible
    # Every line is a different context.
    assert len({json.dumps(r["context"], sort_keys=True) for r in rows}) == len(rows)


def test_coe_json_streams_exactly_the_library_ranking(salaries_file):
    """The lines are written as rendered, and are what `CoeResult.ranked()` holds, in order."""
    import duckdb

    import pcor_sql

    rows = [json.loads(line) for line in _ok(*COE, "--db", str(salaries_file), "--format", "jsonl").stdout.splitlines()]
    assert json.loads(_ok(*COE, "--db", str(salaries_file), "--format", "json").stdout) == rows  # one document
    con = duckdb.connect(str(salaries_file), read_only=True)
    try:
        [result] = pcor_sql.coe(con, QUERY, by="job_title,year", verifier="grubbs")
    finally:
        con.close()
    expected = [
        {"record": result.record, "context": c.context, "predicate": c.predicate, "utility": c.utility,
         "not_for_release": True}
        for c in result.ranked()
    ]
    assert rows == json.loads(json.dumps(expected))
    csv_rows = list(csv.reader(io.StringIO(_ok(*COE, "--db", str(salaries_file), "--format", "csv").stdout)))
    column = csv_rows[0].index("predicate")
    assert [r[column] for r in csv_rows[1:]] == [c.predicate for c in result.ranked()]
    assert [r[csv_rows[0].index("record.id")] for r in csv_rows[1:]] == [str(result.record["id"])] * result.size


def test_coe_limit_table_and_csv(salaries_file):
    table = _ok(*COE, "--db", str(salaries_file), "--limit", "2").stdout
    assert "OWNER ONLY — NOT FOR RELEASE" in table and "#2  utility" in table and "#3" not in table
    assert "more (use --limit N or --format json)" in table
    rows = list(csv.reader(io.StringIO(_ok(*COE, "--db", str(salaries_file), "--format", "csv", "--limit", "3").stdout)))
    assert rows[0] == ["record.id", "record.job_title", "record.employer", "record.year", "record.salary",
                       "utility", "predicate", "job_title", "year"]
    assert len(rows) == 4
    assert "Registered Nurse" in rows[1][-2].split("|")
    assert_error(invoke(*COE, "--db", str(salaries_file), "--limit", "0"), "--limit")


# ---- sql runner --------------------------------------------------------------------------

SCRIPT = """
CREATE TABLE notes AS SELECT 1 AS n;   -- ordinary SQL passes through
INSERT INTO notes VALUES (2);
EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 USING grubbs WITH (epsilon = 0.25, seed = 4);
SELECT sum(n) AS total FROM notes;
"""


def test_sql_runner_mixes_ordinary_sql_and_explain_outlier(tmp_path):
    script = tmp_path / "report.sql"
    script.write_text(SCRIPT, encoding="utf-8")
    objects = [json.loads(line) for line in _ok("sql", str(script), "--allow-seeded", "--format", "json").stdout.splitlines()]
    explanations = [o for o in objects if "explanation_sql" in o]
    assert len(explanations) == 1 and explanations[0]["epsilon"] == 0.25 and explanations[0]["seeded"] is True
    assert {"total": 3} in objects
    table = _ok("sql", "--seed", "2", "--allow-seeded", input=SCRIPT).stdout  # the same script on stdin, as tables
    assert "job_title ∈ {" in table and "total" in table
    sql_only = _ok("sql", "--format", "sql", input="EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 USING grubbs;").stdout
    assert sql_only.startswith("SELECT salary FROM salaries WHERE ")


def test_sql_runner_stops_at_the_first_bad_statement():
    result = invoke("sql", "--format", "json", input="SELECT 1 AS a;\nSELEC 2;\nSELECT 3 AS c;")
    assert result.exit_code == 2
    assert result.stdout.splitlines() == ['{"a": 1}']  # statement 1 ran and printed; 3 did not run
    assert result.stderr.startswith("error: statement 2 (line 2): ") and "syntax error" in result.stderr
    lone = invoke("sql", input="SELECT * FROM no_such_table")
    assert_error(lone, "no_such_table")
    # DuckDB runs a SELECT when it is read: its run-time errors are the user's too.
    late = invoke("sql", input="SELECT CAST(job_title AS INTEGER) FROM salaries")
    assert_error(late, "statement 1 (line 1)", "could not convert")
    assert_error(invoke("sql", "missing.sql"), "does not exist")


def test_sql_runner_owner_view_and_seed_defaults():
    text = "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 USING grubbs;"
    first = json.loads(_ok("sql", "--seed", "5", "--allow-seeded", "--owner-view", "--format", "json", input=text).stdout)
    second = json.loads(_ok("sql", "--seed", "5", "--allow-seeded", "--format", "json", input=text).stdout)
    assert first["owner"]["not_for_release"] is True and "owner" not in second
    assert first["context"] == second["context"] and first["seeded"]


def test_prompt_reads_until_semicolon_and_survives_errors(capsys):
    lines = iter(["SELECT 40 +", "2 AS answer;", "SELEC 1;", "SELECT 'a;b' AS s", ";", ".quit", "SELECT 99;"])

    def read(prompt: str) -> str:
        return next(lines)

    con = duckdb.connect()
    try:
        repl(con, "json", {"seed": None, "owner_view": False, "max_contexts": None}, read=read)
    finally:
        con.close()
    out, err = capsys.readouterr()
    assert out.splitlines() == ['{"answer": 42}', '{"s": "a;b"}']  # 99 never ran: .quit ended it
    assert err.startswith("error: ") and "syntax error" in err


def test_statement_complete():
    assert statement_complete("SELECT 1;")
    assert statement_complete("SELECT 1; -- done\n")
    assert not statement_complete("SELECT 'a;")
    assert not statement_complete("SELECT 1 /* ; */")
    assert not statement_complete("")


# ---- budget ------------------------------------------------------------------------------

def test_budget_set_limit_status_history(db):
    change = json.loads(_ok("budget", "set-limit", "main.salaries", "1.5", "--db", str(db), "--format", "json").stdout)
    assert change == {"unit": "bundled:salaries", "notion": "ocdp", "limit": 1.5, "previous_limit": None,
                      "spent": 0.0, "below_spent": False}
    _ok("explain-outlier", QUERY, *FAST, "--db", str(db), "--epsilon", "0.5")
    status = [json.loads(line) for line in _ok("budget", "status", "--db", str(db), "--format", "jsonl").stdout.splitlines()]
    assert [(s["unit"], s["notion"], s["limit"], s["spent"], s["remaining"]) for s in status] == [
        ("bundled:salaries", "dp", None, 0.0, None), ("bundled:salaries", "ocdp", 1.5, 0.5, 1.0),
        ("bundled:salaries", "sp", None, 0.0, None)]
    one = [json.loads(line) for line in _ok("budget", "status", "salaries", "--notion", "ocdp", "--db", str(db),
                                            "--format", "jsonl").stdout.splitlines()]
    assert [(s["unit"], s["spent"]) for s in one] == [("bundled:salaries", 0.5)]
    history = [json.loads(line) for line in _ok("budget", "history", "salaries", "--db", str(db), "--format", "jsonl").stdout.splitlines()]
    assert len(history) == 1
    assert history[0]["epsilon"] == 0.5 and history[0]["mechanism"] == "pcor/bfs/tight" and history[0]["seeded"]
    # What was asked, resolved: the metric and keys, the verifier with its options, the search, ε.
    assert history[0]["statement"].startswith("EXPLAIN OUTLIER SELECT salary FROM salaries WHERE (id = 42) USING "
                                              "grubbs(alpha=0.05) WITH (epsilon = 0.5, search = 'bfs'")
    assert history[0]["seq"] == 1 and history[0]["role"] == "owner"
    # json is one document (a list), which json.loads reads whole; csv has flat columns.
    assert json.loads(_ok("budget", "status", "--db", str(db), "--format", "json").stdout) == status
    assert json.loads(_ok("budget", "history", "salaries", "--db", str(db), "--format", "json").stdout) == history
    [row] = csv.DictReader(io.StringIO(_ok("budget", "history", "salaries", "--db", str(db), "--format", "csv").stdout))
    assert row["epsilon"] == "0.5" and row["statement"].startswith("EXPLAIN OUTLIER SELECT salary") and row["seeded"] == "true" and row["unit"] == "bundled:salaries"
    status_csv = list(csv.DictReader(io.StringIO(_ok("budget", "status", "--db", str(db), "--format", "csv").stdout)))
    assert [(r["notion"], r["limit"], r["spent"]) for r in status_csv] == [("dp", "", "0.0"), ("ocdp", "1.5", "0.5"),
                                                                           ("sp", "", "0.0")]
    assert "bundled:salaries" in _ok("budget", "status", "--db", str(db)).stdout
    assert "seeded, not private" in _ok("budget", "history", "--db", str(db)).stdout
    lowered = _ok("budget", "set-limit", "salaries", "0.1", "--db", str(db))
    assert "is below the ε already spent" in lowered.stderr
    assert "set to ε = 0.1 (was 1.5; spent 0.5)" in lowered.stdout
    assert_error(invoke("budget", "set-limit", "salaries", "nan", "--db", str(db)), "budget limit")
    assert_error(invoke("budget", "set-limit", "salaries", "-1", "--db", str(db)), "budget limit")  # a value
    assert_error(invoke("budget", "set-limit", "salaries", "abc", "--db", str(db)), "must be a number")
    assert_error(invoke("budget", "status", "typo", "--db", str(db)), "typo")
    assert_error(invoke("budget", "set-limit", "salaries", "1", "--notion", "xdp", "--db", str(db)), "notion")
    assert_error(invoke("budget", "status", "--db", str(db), "--ledger", "x.duckdb"), "--ledger")


def test_budget_default_limit_and_public_units(db):
    _ok("budget", "default-limit", "0.5", "--db", str(db))
    refused = invoke("explain-outlier", QUERY, *FAST, "--db", str(db), "--epsilon", "0.6")
    assert_error(refused, "would exceed")
    status = [json.loads(line) for line in _ok("budget", "status", "salaries", "--notion", "ocdp", "--db", str(db),
                                               "--format", "jsonl").stdout.splitlines()]
    assert status[0]["limit"] == 0.5 and status[0]["limit_source"] == "default"
    _ok("budget", "public", "salaries", "--db", str(db))
    _ok("explain-outlier", QUERY, *FAST, "--db", str(db), "--epsilon", "0.6")  # public: not charged
    assert "(public)" in _ok("budget", "status", "--db", str(db)).stdout
    _ok("budget", "default-limit", "--clear", "--db", str(db))
    assert_error(invoke("budget", "default-limit", "--db", str(db)), "--clear")


def test_registered_datasets_on_the_cli(db):
    added = _ok("dataset", "add", "payroll", "salaries", "--key", "id", "--metric", "salary", "--by", "job_title,year",
                "--limit", "1", "--db", str(db))
    assert "registered payroll" in added.stdout and "bundled:salaries" in added.stdout
    listed = [json.loads(line) for line in _ok("dataset", "list", "--db", str(db), "--format", "json").stdout.splitlines()]
    assert [(d["name"], d["key"], d["metrics"]) for d in listed] == [("payroll", "id", ["salary"])]
    shown = json.loads(_ok("dataset", "show", "payroll", "--db", str(db), "--format", "json").stdout)
    assert shown["domains"]["year"][0] == "2012" and {b["notion"] for b in shown["budgets"]} == {"ocdp", "dp", "sp"}
    assert "domain job_title:" in _ok("dataset", "show", "payroll", "--db", str(db)).stdout
    assert_error(invoke("dataset", "add", "payroll", "salaries", "--key", "id", "--metric", "salary", "--by", "year",
                        "--db", str(db)), "already")
    assert_error(invoke("dataset", "show", "nope", "--db", str(db)), "no registered dataset 'nope'")
    e = json.loads(_ok("explain-outlier", QUERY, *FAST, "--dataset", "payroll", "--db", str(db), "--format", "jsonl").stdout)
    assert e["dataset"] == "payroll" and e["budget"]["limit"] == 1.0
    _ok("dataset", "remove", "payroll", "--db", str(db))
    assert _ok("dataset", "list", "--db", str(db), "--format", "json").stdout == ""


def test_seeds_need_allow_seeded_on_a_persistent_ledger(db, ledger_file):
    assert_error(invoke("explain-outlier", QUERY, "--verifier", "grubbs", "--seed", "1", "--db", str(db)),
                 "seed", "--allow-seeded")
    assert_error(invoke("explain-outlier", QUERY, "--verifier", "grubbs", "--seed", "1"), "--allow-seeded")
    plain = invoke("explain-outlier", QUERY, "--verifier", "grubbs", "--ledger", ":memory:", "--seed", "1")
    assert plain.exit_code == 0 and "warning: the budget ledger is in memory" in plain.stderr
    _ok("explain-outlier", QUERY, "--verifier", "grubbs")  # the per-user ledger file
    assert ledger_file.exists()


# ---- examples (the bundled datasets) ------------------------------------------------------------------------

def test_examples_list_and_export(tmp_path):
    listed = [json.loads(line) for line in _ok("examples", "list", "--format", "jsonl").stdout.splitlines()]
    assert json.loads(_ok("examples", "list", "--format", "json").stdout) == listed
    assert [d["name"] for d in listed] == ["salaries", "homicides", "diamonds"]
    assert 42 in listed[0]["planted_outliers"] and listed[0]["metric"] == "salary"
    assert "salaries" in _ok("examples", "list").stdout
    parquet = tmp_path / "s.parquet"
    _ok("examples", "export", "salaries", str(parquet))
    database = tmp_path / "d.duckdb"
    _ok("examples", "export", "diamonds", str(database), "--format", "duckdb")
    con = duckdb.connect()
    try:
        assert con.execute(f"SELECT count(*) FROM read_parquet('{parquet}')").fetchall() == [(51000,)]
        con.execute(f"ATTACH '{database}' AS d (READ_ONLY)")
        assert con.execute("SELECT count(*) FROM d.diamonds").fetchall() == [(53940,)]
        assert con.execute("SELECT typeof(cut) FROM d.diamonds LIMIT 1").fetchall()[0][0].startswith("ENUM")
    finally:
        con.close()
    assert_error(invoke("examples", "export", "salaries", str(parquet)), "already exists")
    _ok("examples", "export", "salaries", str(parquet), "--overwrite")
    assert_error(invoke("examples", "export", "nope", str(tmp_path / "x.parquet")), "unknown dataset")


def test_the_old_datasets_spelling_still_works_and_says_it_is_going(tmp_path):
    """`pcor-sql datasets` (the bundled data's old name, beside `dataset`, the registered ones):
    hidden, the same commands, one warning line on stderr naming the new command."""
    old, new = invoke("datasets", "list", "--format", "json"), _ok("examples", "list", "--format", "json")
    assert old.exit_code == 0 and json.loads(old.stdout) == json.loads(new.stdout)
    [line] = old.stderr.splitlines()
    assert line.startswith("warning: ") and "pcor-sql examples" in line
    assert "datasets" not in new.stderr
    top = _ok("--help").stdout
    assert "examples" in top and " datasets " not in top


# ---- identify-anomaly --------------------------------------------------------------------

def _FakeAnswer(record: dict, anomaly: bool, epsilon: float):  # noqa: N802 - a stand-in result
    from pcor_sql.results import AnomalyResult

    return AnomalyResult(record=record, anomaly=anomaly, epsilon=epsilon, privacy="sp", k=1, beta=5.0, radius=1.0,
                         norm="l2", seeded=True, dataset="h", units=("bundled:homicides",),
                         owner={"not_for_release": True, "true_answer": anomaly, "ball_count": 3})


def test_identify_anomaly_wiring_and_output(monkeypatch):
    """The command passes its options through and prints what the library returns (a stand-in
    library function here, so this runs whatever the state of the anomaly engine)."""
    calls = []

    def fake(con, query, **kwargs):
        calls.append((query, kwargs))
        return (_FakeAnswer({"id": 1, "victim_age": 30}, True, kwargs["epsilon"]),
                _FakeAnswer({"id": 2, "victim_age": 31}, False, kwargs["epsilon"]))

    monkeypatch.setattr(pcor_sql.api, "identify_anomalies", fake)
    args = ("identify-anomaly", "SELECT victim_age FROM homicides WHERE id < 3", "--beta", "5", "--radius", "1",
            "--epsilon", "0.5", "--privacy", "dp", "--k", "2", "--norm", "l1", "--seed", "9", "--allow-seeded", "--dataset", "h")
    lines = _ok(*args, "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line)["anomaly"] for line in lines] == [True, False]
    query, kwargs = calls[0]
    assert query == "SELECT victim_age FROM homicides WHERE id < 3"
    assert kwargs == {"beta": 5.0, "radius": 1.0, "epsilon": 0.5, "privacy": "dp", "k": 2, "norm": "l1",
                      "seed": 9, "dataset": "h", "session": kwargs["session"], "progress": None,
                      "max_records": 1, "workers": 1}  # unset flags: left out
    table = _ok(*args, "--owner-view").stdout
    assert "2 answers, total ε = 1" in table and "ball count 3" in table and "NOT FOR RELEASE" in table
    # One line per record says which record and the answer; its details are indented below it.
    heads = [line for line in table.splitlines() if not line.startswith(" ")]
    assert heads[0].startswith("1 of 2: id=1, victim_age=30: anomaly: at most β = 5")
    assert heads[1].startswith("2 of 2: id=2, victim_age=31: not an anomaly: more than β = 5")
    document = json.loads(_ok(*args, "--format", "json").stdout)  # one document: a list
    assert [a["anomaly"] for a in document] == [True, False]
    rows = list(csv.DictReader(io.StringIO(_ok(*args, "--format", "csv").stdout)))
    assert [(r["record.id"], r["anomaly"]) for r in rows] == [("1", "true"), ("2", "false")]
    assert all("{" not in cell for r in rows for cell in r.values())
    assert_error(invoke("identify-anomaly", "SELECT victim_age FROM homicides", "--radius", "1", "--epsilon", "1"), "--beta")


@pytest.mark.skipif(not hasattr(pcor_sql.api, "identify_anomaly"), reason="pcor_sql.api.identify_anomaly is not there yet")
def test_identify_anomaly_on_the_library(db):
    result = _ok("identify-anomaly", "SELECT salary FROM salaries WHERE id IN (42, 43)", "--max-records", "2", "--beta", "5",
                 "--radius", "1000", "--epsilon", "0.5", "--seed", "1", "--allow-seeded", "--db", str(db), "--format", "jsonl")
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a["record"]["id"] for a in answers] == [42, 43]
    for a in answers:
        assert isinstance(a["anomaly"], bool) and a["epsilon"] == 0.5 and a["privacy"] == "sp" and a["k"] == 1
        assert "true_answer" not in json.dumps(a)


def test_version_short_help_and_a_bare_command():
    version = invoke("--version")
    assert version.exit_code == 0 and version.stdout.strip() == f"pcor-sql {pcor_sql.__version__}"
    bare = invoke()
    assert bare.exit_code == 0 and "Usage: pcor-sql" in bare.stdout and "explain-outlier" in bare.stdout
    for args in (("-h",), ("explain-outlier", "-h"), ("budget", "status", "-h")):
        short = invoke(*args)
        assert short.exit_code == 0 and "Usage:" in short.stdout, args
    assert invoke("-V").stdout == version.stdout


def _commands(group=None, path=()):
    """(path, command) of every command of the app, groups included."""
    from typer.main import get_command

    from pcor_sql.cli.main import app

    group = group or get_command(app)
    for name, command in group.commands.items():
        yield (*path, name), command
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))


def test_every_help_has_an_example_and_every_listing_is_whole():
    for path, command in _commands():
        shown = invoke(*path, "--help")
        assert shown.exit_code == 0, path
        if not hasattr(command, "commands"):
            assert "Example:" in shown.stdout and "pcor-sql " in shown.stdout.split("Example:", 1)[1], path
        elif path != ("budget",):  # the budget group is being rewritten and checked there
            listing = shown.stdout.split("Commands:", 1)[1]
            assert "..." not in listing, (path, listing)
    top = invoke("--help").stdout.split("Commands:", 1)[1]
    assert "..." not in top


@pytest.mark.parametrize(
    "args, needle",
    [
        (("explain-outlier", QUERY, "--epsilon", "-1"), "epsilon must be a finite number > 0"),
        (("explain-outlier", QUERY, "--samples", "-3"), "samples must be a positive integer"),
        (("explain-outlier", QUERY, "--descents", "-2"), "descents"),
        (("explain-outlier", QUERY, "--seed", "-7"), "seed"),
        (("explain-outlier", QUERY, "--max-contexts", "-5"), "--max-contexts must be at least 1"),
        (("coe", QUERY, "--limit", "-1"), "--limit must be at least 1"),
        (("identify-anomaly", QUERY, "--beta", "-5", "--radius", "1", "--epsilon", "0.5"), "beta"),
        (("identify-anomaly", QUERY, "--beta", "5", "--radius", "-1", "--epsilon", "0.5"), "radius"),
        (("identify-anomaly", QUERY, "--beta", "5", "--radius", "1", "--epsilon", "-0.5"), "epsilon"),
        (("identify-anomaly", QUERY, "--beta", "5", "--radius", "1", "--epsilon", "0.5", "--k", "-1"), "k"),
        (("sql", "-", "--max-contexts", "-1"), "--max-contexts must be at least 1"),
    ],
)
def test_a_negative_number_is_read_as_the_value_and_refused_by_range(args, needle):
    error = assert_error(invoke(*args, input=""), needle)
    assert "no such option" not in error.lower()


def test_unknown_dataset_names_are_errors(tmp_path):
    assert_error(invoke("datasets", "export", "typo", str(tmp_path / "x.parquet")), "unknown dataset 'typo'")


def test_shell_completion_is_on():
    assert "--install-completion" in invoke("--help").stdout
    # The completion itself, as bash asks for it (`--show-completion` depends on detecting the
    # parent shell, which a test run cannot promise).
    done = CliRunner().invoke(app, [], prog_name="pcor-sql", env={
        "_PCOR_SQL_COMPLETE": "complete_bash", "COMP_WORDS": "pcor-sql bud", "COMP_CWORD": "1"})
    assert done.exit_code == 0 and done.stdout.split() == ["budget"]


def test_glossary_command():
    everything = _ok("glossary").stdout
    for term in ("ε (epsilon)", "ε1 (epsilon1)", "OCDP", "COE", "utility", "verifier", "search"):
        assert term in everything
    one = _ok("glossary", "epsilon1").stdout
    assert one.startswith("ε1 (epsilon1)") and "OCDP" not in one
    assert [json.loads(line)["term"] for line in _ok("glossary", "OCDP", "--json").stdout.splitlines()] == ["OCDP"]
    assert_error(invoke("glossary", "nope"), "no glossary entry")
