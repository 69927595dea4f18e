"""parse_start_predicate: only conjunctions of IN / = over attributes, values as Python values."""

from __future__ import annotations

import pytest

from pcor_sql.errors import UserError
from pcor_sql.frontend import parse_start_predicate

ATTRS = ["job_title", "year", "dept's", "Region"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("job_title IN ('Nurse','Professor') AND year IN ('2019')", {"job_title": ["Nurse", "Professor"], "year": ["2019"]}),
        ("year = 2019", {"year": [2019]}),
        ("2019 = year", {"year": [2019]}),
        ("year IN (2019, 2020, 2019)", {"year": [2019, 2020]}),
        ("\"dept's\" = 'it''s' AND region IN ('N')", {"dept's": ["it's"], "Region": ["N"]}),
        ("JOB_TITLE in ('a') and (YEAR = -1.5)", {"job_title": ["a"], "year": [-1.5]}),
        ("year IN (TRUE, 1, '1')", {"year": [True, 1, "1"]}),
        ("job_title = 'x''); DROP TABLE staff; --'", {"job_title": ["x'); DROP TABLE staff; --"]}),
        ("job_title = 'OR 1=1 AND'", {"job_title": ["OR 1=1 AND"]}),
    ],
)
def test_accepted_forms(parser_con, text, expected):
    assert parse_start_predicate(parser_con, text, ATTRS) == expected


def test_without_attributes_only_the_form_is_checked(parser_con):
    assert parse_start_predicate(parser_con, "anything IN (1)", None) == {"anything": [1]}


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("job_title = 'a' OR year = 1", "OR is not allowed"),
        ("NOT job_title = 'a'", "NOT is not allowed"),
        ("job_title NOT IN ('a')", "NOT is not allowed"),
        ("year > 2019", "unsupported kind"),
        ("year BETWEEN 1 AND 2", "unsupported kind"),
        ("lower(job_title) = 'a'", "must be an attribute name"),
        ("job_title = upper('a')", "plain literals"),
        ("job_title = region", "plain literals"),
        ("year = NULL", "NULL"),
        ("year IN (1 + 1)", "plain literals"),
        ("year = DATE '2020-01-01'", "plain literals"),
        ("s.year = 1", "qualified column"),
        ("salary = 1", "not a context attribute"),
        ("year = 1 AND year = 2", "constrains year twice"),
        ("year = 1 AND YEAR IN (2)", "constrains year twice"),
        ("year = 1 ORDER BY 1", "condition only"),
        ("year = 1 GROUP BY year", "condition only"),
        ("year = 1 UNION SELECT 1", "condition only"),
        ("year = 1 LIMIT 1", "condition only"),
        ("year = 1; DROP TABLE staff", "single condition"),
        ("job_title IN ('x'); DROP TABLE staff; --", "single condition"),
        ("year = 1) OR (1 = 1", "not a valid condition"),
        ("year IN (", "not a valid condition"),
        ("year = $1", "condition only"),
        ("year = 'unterminated", "unterminated"),
    ],
)
def test_refused_forms(parser_con, text, problem):
    with pytest.raises(UserError) as err:
        parse_start_predicate(parser_con, text, ATTRS)
    assert problem in err.value.problem
    assert err.value.fix


def test_case_insensitive_names_must_be_unambiguous(parser_con):
    assert parse_start_predicate(parser_con, "a = 1", ["A", "b"]) == {"A": [1]}
    assert parse_start_predicate(parser_con, "a = 1", ["A", "a"]) == {"a": [1]}  # an exact match wins
    with pytest.raises(UserError, match="not a context attribute"):
        parse_start_predicate(parser_con, "ab = 1", ["Ab", "aB"])


def test_parsing_executes_nothing(con):
    parse_start_predicate(con, "dept = 'x''); DROP TABLE staff; --'", ["dept"])
    with pytest.raises(UserError):
        parse_start_predicate(con, "dept = 'x'); DROP TABLE staff; --", ["dept"])
    assert con.execute("SELECT count(*) FROM staff").fetchall() == [(8,)]
