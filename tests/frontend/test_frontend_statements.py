"""EXPLAIN OUTLIER / IDENTIFY ANOMALY statements, pass-through SQL, and the errors users see."""

from __future__ import annotations

import pytest

from pcor_sql.errors import UserError
from pcor_sql.frontend import (
    ExplainOutlier,
    IdentifyAnomaly,
    Passthrough,
    VerifierSpec,
    is_pcor_statement,
    parse_statement,
)

FULL = (
    "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 3 BY job_title, \"year\" "
    "USING lof(k = 20, threshold = 1.5) "
    "WITH (epsilon = 0.2, search = 'bfs', samples = 50, utility = 'population', "
    "start = 'job_title IN (''Nurse'', ''Professor'') AND year IN (''2019'')', accounting = 'tight', "
    "seed = 7, dataset = 'name', owner_view = TRUE)"
)


def test_every_clause_and_option(parser_con):
    s = parse_statement(parser_con, FULL)
    assert isinstance(s, ExplainOutlier)
    assert s.query.metric_sql == ("salary",) and s.query.selector_sql == "(id = 3)"
    assert s.by == ("job_title", "year")
    assert s.verifier == VerifierSpec("lof", (("k", 20), ("threshold", 1.5)))
    assert s.verifier.options_dict() == {"k": 20, "threshold": 1.5}
    assert (s.epsilon, s.search, s.samples, s.utility, s.accounting, s.seed, s.dataset, s.owner_view) == (
        0.2, "bfs", 50, "population", "tight", 7, "name", True
    )
    assert s.start == "job_title IN ('Nurse', 'Professor') AND year IN ('2019')"
    assert s.options()["epsilon"] == 0.2 and set(s.options()) == {name for name, _ in s.given}
    assert s.text == FULL


def test_defaults_are_none_and_clauses_may_come_in_any_order(parser_con):
    s = parse_statement(parser_con, "explain outlier select salary from t where id = 1 with (Epsilon = 1) using zscore by b, a;")
    assert s.by == ("b", "a") and s.verifier == VerifierSpec("zscore") and s.epsilon == 1.0
    assert isinstance(s.epsilon, float)
    assert s.search is None and s.samples is None and s.start is None and s.options() == {"epsilon": 1.0}
    bare = parse_statement(parser_con, "EXPLAIN OUTLIER SELECT salary FROM t")
    assert bare.by is None and bare.verifier is None and bare.given == ()


@pytest.mark.parametrize(
    "select",
    [
        "SELECT s.salary FROM staff s JOIN people p USING (id) WHERE p.city = 'x'",
        "SELECT total FROM (SELECT dept, sum(salary) AS total FROM staff GROUP BY dept ORDER BY dept) AS g WHERE total > 1",
        "SELECT salary FROM staff WHERE name = 'a WITH (epsilon = 1) BY x USING lof'",
        "SELECT salary FROM staff WHERE \"by\" = 1 AND \"with\" = 2 AND \"using\" = 3",
        "SELECT salary FROM staff /* BY a WITH (b = 1) */ WHERE id = 1 -- USING lof\n",
        "SELECT salary FROM read_csv('x.csv', header = true, columns = {'a': 'INT'}) WHERE id = 1",
        "SELECT salary FROM staff WHERE list_contains([1, 2], id) AND x = E'\\' BY y'",
        "SELECT sum(salary) OVER (PARTITION BY dept ORDER BY id) FROM staff",
    ],
)
def test_keywords_inside_the_select_are_not_clauses(parser_con, select):
    text = f"EXPLAIN OUTLIER {select} BY dept USING grubbs(alpha = 0.01) WITH (seed = 1)"
    try:
        s = parse_statement(parser_con, text)
    except UserError as exc:  # the window query is refused by parse_select, not by the clause finder
        assert "window" in exc.problem
        return
    assert s.by == ("dept",) and s.verifier == VerifierSpec("grubbs", (("alpha", 0.01),)) and s.seed == 1
    assert s.query.original == select.strip()


def test_identify_anomaly(parser_con):
    s = parse_statement(
        parser_con,
        "IDENTIFY ANOMALY SELECT x, y FROM pts WITH (beta = 5, radius = 1000, epsilon = 0.5, privacy = 'sp', k = 1, "
        "norm = 'linf', seed = 7, dataset = 'x')",
    )
    assert isinstance(s, IdentifyAnomaly)
    assert s.query.metric_sql == ("x", "y") and s.query.selector_sql is None
    assert (s.beta, s.radius, s.epsilon, s.privacy, s.k, s.norm, s.seed, s.dataset, s.owner_view) == (
        5.0, 1000.0, 0.5, "sp", 1, "linf", 7, "x", None
    )
    star = parse_statement(parser_con, "identify anomaly select * from pts where id = 3 with (beta=1, radius=0, epsilon=1)")
    assert star.query.star and star.privacy is None


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 1",
        "  select * from t where x = 'EXPLAIN OUTLIER'",
        "EXPLAIN SELECT 1",
        "EXPLAIN ANALYZE SELECT 1",
        "CREATE TABLE outlier (a INT);",
        "-- EXPLAIN OUTLIER\nSELECT 1",
        "SELECT 1; SELECT 2",
        "PRAGMA version",
        "",
    ],
)
def test_other_sql_passes_through_unchanged(parser_con, text):
    assert parse_statement(parser_con, text) == Passthrough(text)
    assert not is_pcor_statement(text)


def test_leading_comments_do_not_hide_our_statements(parser_con):
    s = parse_statement(parser_con, "/* report */ -- explain it\nEXPLAIN  /* x */ OUTLIER SELECT salary FROM t WHERE id = 1")
    assert isinstance(s, ExplainOutlier)
    assert is_pcor_statement("  identify\nanomaly select x from t with (beta = 1, radius = 1, epsilon = 1)")


ERRORS = [
    # (statement, words the problem must contain)
    ("EXPLAIN OUTLIER", "needs a SELECT"),
    ("EXPLAIN OUTLIER BY a", "needs a SELECT before BY"),
    ("EXPLAIN OUTLIER SELEC salary FROM t", "SQL syntax error"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WHERE id = 1; DROP TABLE t", "several statements"),
    ("SELECT 1; EXPLAIN OUTLIER SELECT salary FROM t", "several statements"),
    ("EXPLAIN OUTLIER SELECT salary FROM t GROUP BY salary", "GROUP BY"),
    ("EXPLAIN OUTLIER SELECT avg(salary) FROM t", "aggregate avg"),
    ("EXPLAIN OUTLIER SELECT salary, id FROM t", "2 expressions"),
    ("EXPLAIN OUTLIER SELECT * FROM t", "SELECT *"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (x = 1)", "unknown option 'x' in WITH (...)"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (k = 20)", "unknown option 'k'"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = 'abc')", "epsilon must be a number, got the string 'abc'"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = '0.2')", "epsilon must be a number"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = TRUE)", "epsilon must be a number"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = 0)", "epsilon must be > 0"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = -0.5)", "epsilon must be > 0"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = 1e999)", "epsilon must be finite"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = )", "epsilon has no value"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon)", "expected '=' after option epsilon"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = 1, epsilon = 2)", "given twice"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (EPSILON = 1, epsilon = 2)", "given twice"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = 1,)", "ends with a comma"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = 1 search = 'bfs')", "expected ',' or ')'"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = 0.1 + 0.1)", "expected ',' or ')'"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = (0.2))", "unexpected '('"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = 0.2", "not closed"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (search = bfs)", "bare word 'bfs'"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (search = 'sideways')", "unknown search 'sideways'"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (utility = 'size')", "unknown utility"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (accounting = 'loose')", "unknown accounting"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (samples = 2.5)", "samples must be a whole number"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (samples = 0)", "samples must be ≥ 1"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (seed = -1)", "seed must be ≥ 0"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (owner_view = 1)", "owner_view must be TRUE or FALSE"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (dataset = 3)", "dataset must be a single-quoted string"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (dataset = E'x')", "special string form"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH ('epsilon' = 1)", "expected an option name"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (a = 1) WITH (b = 2)", "given twice"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH epsilon = 1", "expected '(' after WITH, found 'epsilon'"),
    ("EXPLAIN OUTLIER WITH d AS (SELECT 1 AS salary) SELECT salary FROM d", "common table expression"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH", "expected '(' after WITH"),
    ("EXPLAIN OUTLIER SELECT salary FROM t USING", "expected a verifier name after USING"),
    ("EXPLAIN OUTLIER SELECT salary FROM t USING 'lof'", "expected a verifier name after USING"),
    ("EXPLAIN OUTLIER SELECT salary FROM t USING lof(k 20)", "expected '=' after option k"),
    ("EXPLAIN OUTLIER SELECT salary FROM t USING lof(k = 20", "not closed"),
    ("EXPLAIN OUTLIER SELECT salary FROM t USING lof k = 20", "unexpected 'k' after USING lof"),
    ("EXPLAIN OUTLIER SELECT salary FROM t USING lof(k = 20) USING grubbs", "USING is given twice"),
    ("EXPLAIN OUTLIER SELECT salary FROM t USING lof(k = 1, k = 2)", "given twice in USING lof(...)"),
    ("EXPLAIN OUTLIER SELECT salary FROM t USING (k = 20)", "SQL syntax error"),
    ("EXPLAIN OUTLIER SELECT salary FROM t BY", "expected an attribute name in BY"),
    ("EXPLAIN OUTLIER SELECT salary FROM t BY a,", "expected an attribute name in BY"),
    ("EXPLAIN OUTLIER SELECT salary FROM t BY a b", "unexpected 'b' in BY"),
    ("EXPLAIN OUTLIER SELECT salary FROM t BY a, a", "named twice"),
    ("EXPLAIN OUTLIER SELECT salary FROM t BY a BY b", "BY is given twice"),
    ("EXPLAIN OUTLIER SELECT salary FROM t BY 'a'", "expected an attribute name in BY"),
    ("EXPLAIN OUTLIER SELECT salary FROM t BY a LIMIT 3", "unexpected 'LIMIT' in BY"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilon = 1) LIMIT 3", "unexpected 'LIMIT' after the SELECT"),
    ("EXPLAIN OUTLIER SELECT salary FROM t WITH (start = 'a = 1 OR b = 2')", "OR is not allowed"),
    ("EXPLAIN OUTLIER SELECT salary FROM t BY a WITH (start = 'c = 1')", "not a context attribute"),
    ("IDENTIFY ANOMALY SELECT x FROM t", "needs beta, radius, epsilon"),
    ("IDENTIFY ANOMALY SELECT x FROM t WITH (beta = 5, radius = 1)", "needs epsilon"),
    ("IDENTIFY ANOMALY SELECT x FROM t WITH (beta = 0.5, radius = 1, epsilon = 1)", "beta must be ≥ 1"),
    ("IDENTIFY ANOMALY SELECT x FROM t WITH (beta = 5, radius = -1, epsilon = 1)", "radius must be ≥ 0"),
    ("IDENTIFY ANOMALY SELECT x FROM t WITH (beta = 5, radius = 1, epsilon = 0)", "epsilon must be > 0"),
    ("IDENTIFY ANOMALY SELECT x FROM t WITH (beta = 5, radius = 1, epsilon = 1, k = 7)", "k must be between 1 and beta + 1"),
    ("IDENTIFY ANOMALY SELECT x FROM t WITH (beta = 5, radius = 1, epsilon = 1, k = 0)", "k must be ≥ 1"),
    ("IDENTIFY ANOMALY SELECT x FROM t WITH (beta = 5, radius = 1, epsilon = 1, privacy = 'ldp')", "unknown privacy"),
    ("IDENTIFY ANOMALY SELECT x FROM t WITH (beta = 5, radius = 1, epsilon = 1, norm = 'l3')", "unknown norm"),
    ("IDENTIFY ANOMALY SELECT x FROM t WITH (beta = 5, radius = 1, epsilon = 1, search = 'bfs')", "unknown option 'search'"),
    ("IDENTIFY ANOMALY SELECT x FROM t BY a WITH (beta = 5, radius = 1, epsilon = 1)", "takes no BY"),
    ("IDENTIFY ANOMALY SELECT x FROM t USING lof WITH (beta = 5, radius = 1, epsilon = 1)", "takes no USING"),
    ("IDENTIFY ANOMALY SELECT sum(x) FROM t WITH (beta = 5, radius = 1, epsilon = 1)", "aggregate sum"),
]


@pytest.mark.parametrize("text, problem", ERRORS, ids=[e[0][16:70] for e in ERRORS])
def test_errors_name_the_problem_and_the_fix(parser_con, text, problem):
    with pytest.raises(UserError) as err:
        parse_statement(parser_con, text)
    assert problem in err.value.problem
    assert err.value.fix
    assert "\n" not in str(err.value)


def test_unknown_option_lists_the_known_ones(parser_con):
    with pytest.raises(UserError) as err:
        parse_statement(parser_con, "EXPLAIN OUTLIER SELECT salary FROM t WITH (epsilom = 0.2)")
    assert err.value.problem == "unknown option 'epsilom' in WITH (...)"
    assert err.value.fix.startswith("known options: epsilon, search, samples, utility, start, accounting, seed, dataset")


def test_a_using_without_a_name_gets_a_hint(parser_con):
    with pytest.raises(UserError) as err:
        parse_statement(parser_con, "EXPLAIN OUTLIER SELECT salary FROM t USING (k = 20)")
    assert "USING lof(k = 20" in err.value.fix


INJECTIONS = [
    "x'); DROP TABLE staff; --",
    "'; DROP TABLE staff; --",
    "x\"; DROP TABLE staff; --",
    "$$; DROP TABLE staff; $$",
    "*/ DROP TABLE staff; /*",
]


@pytest.mark.parametrize("payload", INJECTIONS)
def test_injection_in_option_strings_stays_a_string(con, payload):
    quoted = "'" + payload.replace("'", "''") + "'"
    s = parse_statement(con, f"EXPLAIN OUTLIER SELECT salary FROM staff WHERE id = 7 WITH (dataset = {quoted})")
    assert s.dataset == payload
    v = parse_statement(con, f"EXPLAIN OUTLIER SELECT salary FROM staff USING lof(note = {quoted})")
    assert v.verifier.options == (("note", payload),)
    assert con.execute("SELECT count(*) FROM staff").fetchall() == [(8,)]


@pytest.mark.parametrize("payload", INJECTIONS)
def test_unescaped_injection_in_a_statement_is_inert(con, payload):
    # Pasted without doubling its quotes: either the statement is refused, or the text
    # between the quotes is just the value of a string option.
    try:
        s = parse_statement(con, f"EXPLAIN OUTLIER SELECT salary FROM staff WHERE id = 7 WITH (dataset = '{payload}')")
    except UserError:
        pass
    else:
        assert s.dataset == payload and "'" not in payload
    assert con.execute("SELECT count(*) FROM staff").fetchall() == [(8,)]


@pytest.mark.parametrize("payload", INJECTIONS)
def test_injection_in_the_start_option_is_an_error_or_a_plain_value(con, payload):
    start = "dept IN ('" + payload.replace("'", "''") + "')"
    quoted = "'" + start.replace("'", "''") + "'"
    s = parse_statement(con, f"EXPLAIN OUTLIER SELECT salary FROM staff WHERE id = 7 BY dept WITH (start = {quoted})")
    assert s.start == start
    raw = "'dept IN (''" + payload + "'')'"  # the payload's own quotes left undoubled
    try:
        parse_statement(con, f"EXPLAIN OUTLIER SELECT salary FROM staff WHERE id = 7 BY dept WITH (start = {raw})")
    except UserError:
        pass
    assert con.execute("SELECT count(*) FROM staff").fetchall() == [(8,)]


def test_quoted_identifiers_with_quotes_in_by(parser_con):
    s = parse_statement(parser_con, 'EXPLAIN OUTLIER SELECT "pay rate" FROM "odd ""table""" BY "dept\'s", "sel""ect", plain')
    assert s.by == ("dept's", 'sel"ect', "plain")
    assert s.query.relation_sql == '"odd ""table"""'


# ---- the DOMAIN clause -------------------------------------------------------------------

DOMAIN_BASE = "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 3 "


def test_domain_clause_declares_values_in_order(parser_con):
    s = parse_statement(
        parser_con,
        DOMAIN_BASE + "BY job_title, \"year\" DOMAIN (job_title IN ('Nurse', 'it''s'), \"year\" IN (2020, -1, 2.5)) "
        "USING grubbs WITH (seed = 1)",
    )
    assert s.by == ("job_title", "year") and s.verifier == VerifierSpec("grubbs")
    assert s.domains == (("job_title", ("Nurse", "it's")), ("year", (2020, -1, 2.5)))
    alone = parse_statement(parser_con, DOMAIN_BASE + "DOMAIN (dept = 'x')")
    assert alone.by is None and alone.domains == (("dept", ("x",)),)
    assert parse_statement(parser_con, DOMAIN_BASE + "BY a").domains is None


@pytest.mark.parametrize(
    "select",
    [
        "SELECT salary FROM salaries WHERE domain(x) = 1",
        "SELECT salary FROM salaries WHERE x = 1 AND domain (x)",
        "SELECT domain (x) FROM t WHERE id = 1",
        "SELECT salary FROM t AS domain WHERE domain.id = 1",
    ],
)
def test_a_function_or_alias_named_domain_is_not_the_clause(parser_con, select):
    s = parse_statement(parser_con, "EXPLAIN OUTLIER " + select + " BY a")
    assert s.domains is None and s.by == ("a",)


def test_an_attribute_may_be_named_domain(parser_con):
    assert parse_statement(parser_con, DOMAIN_BASE + "BY domain, year").by == ("domain", "year")


@pytest.mark.parametrize(
    "tail, problem",
    [
        ("BY a DOMAIN (a IN ())", "the domain of a is empty"),
        ("BY a DOMAIN (a IN (1, 1))", "listed twice"),
        ("BY a DOMAIN (a IN (1, ))", "a value is missing"),
        ("BY a DOMAIN (a IN (1 + 2))", "expected ',' or ')'"),
        ("BY a DOMAIN (a IN (b))", "bare word"),
        ("BY a DOMAIN (a IN (1), a IN (2))", "declares a twice"),
        ("BY a DOMAIN (a IN (1)) DOMAIN (a IN (2))", "DOMAIN is given twice"),
        ("BY a DOMAIN ()", "declares nothing"),
        ("BY a DOMAIN (a IN (1),)", "ends with a comma"),
        ("BY a DOMAIN (a LIKE 'x')", "expected IN after a"),
        ("BY a DOMAIN (b IN (1))", "not among the BY attributes"),
        ("BY a DOMAIN (a IN (1) b IN (2))", "unexpected 'b'"),
    ],
)
def test_domain_clause_errors(parser_con, tail, problem):
    with pytest.raises(UserError, match=problem.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        parse_statement(parser_con, DOMAIN_BASE + tail)


def test_identify_anomaly_takes_no_domain(parser_con):
    with pytest.raises(UserError, match="no DOMAIN clause"):
        parse_statement(
            parser_con, "IDENTIFY ANOMALY SELECT salary FROM salaries DOMAIN (a = 1) WITH (beta = 1, radius = 1, epsilon = 1)"
        )
