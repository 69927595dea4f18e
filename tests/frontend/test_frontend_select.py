"""parse_select: the fields it renders, what it refuses (with a fix), and the rewrites."""

from __future__ import annotations

import duckdb
import pytest

from pcor_sql.errors import InternalError, UserError
from pcor_sql.frontend import (
    expand_star,
    explanation_sql,
    metric_alias,
    parse_select,
    population_sql,
    record_sql,
)


def test_fields_of_a_join_with_a_qualified_metric(parser_con):
    q = parse_select(parser_con, "SELECT s.salary FROM staff s JOIN people p ON s.id = p.id WHERE p.\"full name\" = 'it''s'")
    assert q.metric_sql == ("s.salary",)
    assert q.metric_names == ("salary",)
    assert q.metric_aliases == (None,)
    assert q.relation_sql == "(staff AS s INNER JOIN people AS p ON ((s.id = p.id)))"
    assert q.selector_sql == "(p.\"full name\" = 'it''s')"
    assert q.original.startswith("SELECT s.salary")
    assert not q.star


def test_expression_metric_has_no_name_but_keeps_its_alias(parser_con):
    q = parse_select(parser_con, "SELECT salary * 12 AS \"annual pay\" FROM staff")
    assert q.metric_sql == ("(salary * 12)",)
    assert q.metric_names == (None,)
    assert q.metric_aliases == ("annual pay",)
    assert q.metric_labels == ("annual pay",)
    assert q.selector_sql is None
    assert q.select_list_sql == '(salary * 12) AS "annual pay"'


def test_from_first_syntax_is_the_same_query(parser_con):
    a = parse_select(parser_con, "FROM staff SELECT salary WHERE id = 1")
    b = parse_select(parser_con, "SELECT salary FROM staff WHERE id = 1")
    assert (a.metric_sql, a.relation_sql, a.selector_sql) == (b.metric_sql, b.relation_sql, b.selector_sql)


def test_several_metrics_and_star_only_when_multiple(parser_con):
    q = parse_select(parser_con, "SELECT x, y AS why FROM pts", multiple=True)
    assert q.metric_sql == ("x", "y") and q.metric_names == ("x", "y") and q.metric_aliases == (None, "why")
    star = parse_select(parser_con, "SELECT * FROM pts WHERE id < 3", multiple=True)
    assert star.star and star.metric_sql == ("*",)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("SELEC salary FROM staff", "SQL syntax error: syntax error at or near \"SELEC\""),
        ("SELECT salary FROM staff WHERE", "SQL syntax error"),
        ("SELECT salary FROM staff; SELECT 1", "2 statements"),
        ("SELECT salary FROM staff; DROP TABLE staff", "2 statements"),
        ("", "empty"),
        ("-- nothing", "empty"),
        ("DELETE FROM staff", "only a SELECT"),
        ("SELECT dept FROM staff GROUP BY dept", "GROUP BY"),
        ("SELECT dept FROM staff GROUP BY ALL", "GROUP BY"),
        ("SELECT salary FROM staff HAVING salary > 1", "HAVING"),
        ("SELECT salary FROM staff ORDER BY salary", "ORDER BY"),
        ("SELECT salary FROM staff LIMIT 1", "LIMIT"),
        ("SELECT DISTINCT salary FROM staff", "DISTINCT"),
        ("SELECT salary FROM staff QUALIFY salary > 1", "QUALIFY"),
        ("SELECT sum(salary) FROM staff", "aggregate sum"),
        ("SELECT salary - AVG(salary) FROM staff", "aggregate avg"),
        ("SELECT count(DISTINCT salary) FROM staff", "aggregate count"),
        ("SELECT salary - avg(salary) OVER () FROM staff", "window function"),
        ("SELECT unnest([salary, 1]) FROM staff", "turns one row into several"),
        ("SELECT * FROM staff", "SELECT * does not name a metric"),
        ("SELECT salary, year FROM staff", "2 expressions"),
        ("SELECT salary FROM staff UNION SELECT salary FROM staff", "UNION"),
        ("WITH d AS (SELECT * FROM staff) SELECT salary FROM d", "common table expression"),
        ("SELECT salary FROM staff USING SAMPLE 3", "sampling"),
        ("SELECT salary FROM staff TABLESAMPLE 50%", "sampling"),
        ("SELECT salary FROM staff WHERE id = $1", "parameters"),
        ("SELECT salary FROM staff WHERE id = ?", "parameters"),
        ("SELECT 1", "no FROM clause"),
        ("SELECT s.salary FROM staff s, people p WHERE s.id = p.id", "comma join"),
        ("SELECT salary FROM (VALUES (1.0)) v(salary)", "cannot write this query back"),
    ],
)
def test_refused_queries_name_the_problem_and_a_fix(parser_con, text, problem):
    with pytest.raises(UserError) as err:
        parse_select(parser_con, text)
    assert problem in err.value.problem
    assert err.value.fix


def test_aggregates_in_subqueries_are_fine(parser_con):
    q = parse_select(parser_con, "SELECT salary - (SELECT avg(salary) FROM staff) FROM staff WHERE salary > (SELECT max(x) FROM u)")
    assert q.metric_sql == ("(salary - (SELECT avg(salary) FROM staff))",)


def test_explicit_cross_join_and_table_functions_after_a_comma_are_allowed(parser_con):
    assert parse_select(parser_con, "SELECT a.x FROM a CROSS JOIN b").relation_sql == "(a CROSS JOIN b)"
    q = parse_select(parser_con, "SELECT v FROM t, unnest(t.l) AS u(v)")
    assert "unnest" in q.relation_sql


@pytest.mark.parametrize(
    "text",
    [
        "SELECT a FROM t WHERE b BETWEEN 1 AND 3 AND c IS NOT DISTINCT FROM 3",
        "SELECT CASE WHEN a > 1 THEN a ELSE 0 END FROM t WHERE s ILIKE '%x%' OR s SIMILAR TO 'a.*'",
        "SELECT a FROM t WHERE d = DATE '2020-01-01' AND ts > TIMESTAMP '2020-01-01' - INTERVAL 3 DAY",
        "SELECT a::DOUBLE FROM t WHERE x['k'] = 1 AND l[1:2] = [1] AND {'x': 1}.x = 1",
        "SELECT a FROM t WHERE list_filter(l, lambda x: x > 1) = [] AND x = ANY([1, 2])",
        "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id) AND a IN (SELECT b FROM u)",
        "SELECT a FROM t NATURAL JOIN u POSITIONAL JOIN v",
        "SELECT a FROM (SELECT * FROM t UNION ALL SELECT * FROM u) AS x",
        "SELECT a FROM read_parquet(['a.parquet', 'b.parquet'], union_by_name = true) AS r(a)",
        "SELECT \"we\"\"ird\" FROM \"my table\" WHERE \"sel ect\" = E'it\\'s' AND y = $$a'b$$",
        "SELECT a FROM t WHERE x = 1e400 AND y = -0.0 AND z = 12345678901234567890123",
    ],
)
def test_pieces_reassemble_to_the_same_ast(parser_con, text):
    # parse_select itself refuses a query whose pieces do not parse back to its AST;
    # reassembling the rewrite once more must be stable too.
    q = parse_select(parser_con, text)
    again = parse_select(parser_con, explanation_sql(q, q.selector_sql))
    expected_selector = q.selector_sql if q.selector_sql is not None else "true"
    assert (again.metric_sql, again.relation_sql, again.selector_sql) == (q.metric_sql, q.relation_sql, expected_selector)


def test_rewrites_of_a_join_keep_aliases(con):
    q = parse_select(con, "SELECT s.salary FROM staff AS s JOIN people AS p ON s.id = p.id WHERE p.city = 'Rome'")
    pop = population_sql(q, "dept = 'Surgery'")
    assert pop == "SELECT s.salary FROM (staff AS s INNER JOIN people AS p ON ((s.id = p.id))) WHERE dept = 'Surgery'"
    assert sorted(r[0] for r in con.execute(pop).fetchall()) == [90000.0, 95000.0]
    rec = record_sql(q, ["dept", "city"], ordered=True)
    assert rec.endswith(" WHERE (p.city = 'Rome') ORDER BY ALL")
    assert con.execute(rec).fetchall() == [
        (39000.0, "Admin", "Rome"), (41000.0, "Admin", "Rome"), (90000.0, "Surgery", "Rome"), (95000.0, "Surgery", "Rome")
    ]
    assert [d[0] for d in con.execute(rec).description] == [metric_alias(0), "dept", "city"]


def test_empty_predicates_mean_true(parser_con):
    q = parse_select(parser_con, "SELECT salary FROM staff WHERE id = 7")
    assert explanation_sql(q, None) == explanation_sql(q, "  ") == "SELECT salary FROM staff WHERE TRUE"
    assert population_sql(q, "") == "SELECT salary FROM staff WHERE TRUE"


def test_record_sql_quotes_odd_column_names(con):
    q = parse_select(con, "SELECT \"pay rate\" FROM \"odd \"\"table\"\"\" WHERE \"sel\"\"ect\" = 'plain'")
    rec = record_sql(q, ["dept's", "sel\"ect"])
    assert rec == (
        "SELECT \"pay rate\" AS \"__pcor_metric_0\", \"dept's\", \"sel\"\"ect\" FROM \"odd \"\"table\"\"\" "
        "WHERE (\"sel\"\"ect\" = 'plain')"
    )
    assert sorted(con.execute(rec).fetchall()) == [(10.0, "a'b", "plain"), (99.0, "c d", "plain")]


def test_record_sql_needs_an_expanded_star(con):
    q = parse_select(con, "SELECT * EXCLUDE (name, dept) FROM staff WHERE id = 7", multiple=True)
    with pytest.raises(InternalError):
        record_sql(q)
    e = expand_star(con, q)
    assert e.metric_sql == ("id", '"year"', "salary") and e.metric_names == ("id", "year", "salary")
    assert e.original == q.original and not e.star
    assert con.execute(record_sql(e)).fetchall() == [(7, 2020, 250000.0)]


def test_expand_star_keeps_the_qualifier_and_refuses_duplicate_names(con):
    q = expand_star(con, parse_select(con, "SELECT p.* FROM staff s JOIN people p ON s.id = p.id", multiple=True))
    assert q.metric_sql == ("p.id", 'p."full name"', "p.city")
    with pytest.raises(UserError, match="several columns named 'id'"):
        expand_star(con, parse_select(con, "SELECT * FROM staff s JOIN people p ON s.id = p.id", multiple=True))
    with pytest.raises(UserError, match="cannot list the columns"):
        expand_star(con, parse_select(con, "SELECT * FROM no_such_table", multiple=True))


def test_expand_star_sees_temporary_tables(con):
    con.execute("CREATE TEMP TABLE tmp_pts AS SELECT 1.0 AS x, 2.0 AS y")
    assert expand_star(con, parse_select(con, "SELECT * FROM tmp_pts", multiple=True)).metric_sql == ("x", "y")


def test_a_connection_with_a_pending_result_is_left_usable(con):
    pending = con.execute("SELECT * FROM range(10)")
    parse_select(con, "SELECT salary FROM staff")
    assert con.execute("SELECT 1").fetchall() == [(1,)]
    del pending


def test_macros_are_followed_to_the_aggregates_they_call():
    con = duckdb.connect()
    try:
        con.execute("CREATE MACRO my_total(x) AS sum(x)")
        con.execute("CREATE TEMP MACRO twice_total(x) AS 2 * my_total(x)")
        con.execute("CREATE MACRO plus_one(x) AS x + 1")
        con.create_function("py_double", lambda x: x * 2.0, ["DOUBLE"], "DOUBLE")
        for text, name in [("SELECT my_total(a) FROM t", "my_total"), ("SELECT 1 + twice_total(a) FROM t", "twice_total")]:
            with pytest.raises(UserError, match=f"aggregate {name}"):
                parse_select(con, text)
        assert parse_select(con, "SELECT plus_one(py_double(a)) FROM t").metric_sql == ("plus_one(py_double(a))",)
    finally:
        con.close()


def _statements_run(con, action) -> int:
    """How many statements `action` runs on `con`, by DuckDB's query log."""
    con.execute("CALL enable_logging('QueryLog')")
    count = "SELECT count(*) FROM duckdb_logs WHERE type = 'QueryLog'"
    before = con.execute(count).fetchall()[0][0]
    action()
    return con.execute(count).fetchall()[0][0] - before - 1  # less the count that reads the log


def test_parsing_a_select_takes_two_round_trips():
    # One parse of the text; one that renders the pieces and parses their reassembly.
    from pcor_sql.frontend import parse_statement

    con = duckdb.connect()
    try:
        assert _statements_run(con, lambda: None) == 0
        assert _statements_run(con, lambda: parse_select(con, "SELECT salary FROM salaries WHERE id = 42")) <= 2
        explain = "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 BY dept USING lof(k = 3) WITH (epsilon = 1)"
        assert _statements_run(con, lambda: parse_statement(con, explain)) <= 2
    finally:
        con.close()
