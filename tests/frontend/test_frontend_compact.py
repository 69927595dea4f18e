"""The CLI's compact forms: --by a,b,c and --domain 'attr=v1|v2;other=x'."""

from __future__ import annotations

import pytest

from pcor_sql.errors import UserError
from pcor_sql.frontend import parse_by, parse_domain_declaration, parse_domain_declarations


@pytest.mark.parametrize(
    "text, names",
    [
        ("a,b,c", ("a", "b", "c")),
        (" job_title , year ", ("job_title", "year")),
        ("job title,year", ("job title", "year")),
        ('"a, b",c', ("a, b", "c")),
        ('" padded ","q""uote"', (" padded ", 'q"uote')),
        ("dept's", ("dept's",)),
    ],
)
def test_parse_by(text, names):
    assert parse_by(text) == names


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "empty"),
        ("a,,b", "missing"),
        ("a,", "missing"),
        (",a", "missing"),
        ('""', "empty"),
        ("a,a", "named twice"),
        ('"a"b', "after the quoted"),
        ('a"b', "a quote inside"),
        ('"a', "unterminated"),
    ],
)
def test_parse_by_errors(text, problem):
    with pytest.raises(UserError) as err:
        parse_by(text)
    assert problem in err.value.problem and err.value.fix


@pytest.mark.parametrize(
    "text, declared",
    [
        ("job_title=Nurse|Professor", {"job_title": ["Nurse", "Professor"]}),
        ("a = x | y ; b = 1|2;", {"a": ["x", "y"], "b": ["1", "2"]}),
        ("a='x|y'|'it''s'|' padded '|'k=v'|'a;b'", {"a": ["x|y", "it's", " padded ", "k=v", "a;b"]}),
        ('"odd=name"=1', {"odd=name": ["1"]}),
        ("a=''", {"a": [""]}),
        ("a=x'); DROP TABLE t; --", None),
    ],
)
def test_parse_domain_declarations(text, declared):
    if declared is None:
        with pytest.raises(UserError):
            parse_domain_declarations(text)
    else:
        assert parse_domain_declarations(text) == declared


def test_several_texts_merge_in_order():
    assert parse_domain_declarations(["a=1|2", "b=x;c=y"]) == {"a": ["1", "2"], "b": ["x"], "c": ["y"]}
    with pytest.raises(UserError, match="declared twice"):
        parse_domain_declarations(["a=1", "a=2"])


def test_parse_domain_declaration_wants_exactly_one():
    assert parse_domain_declaration("job_title=Nurse|Professor") == ("job_title", ["Nurse", "Professor"])
    with pytest.raises(UserError, match="expected one declaration, found 2"):
        parse_domain_declaration("a=1;b=2")


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "empty"),
        ("job_title", "expected '='"),
        ("=x", "attribute name is missing"),
        (";", "attribute name is missing"),
        ("a=", "empty value"),
        ("a=x||y", "empty value"),
        ("a=x|", "empty value"),
        ("a=x=y", "unexpected '='"),
        ("a=x|x", "listed twice"),
        ("a='x'y", "after the quoted"),
        ("a='x", "unterminated"),
        ("a=it's", "a quote inside"),
    ],
)
def test_domain_errors(text, problem):
    with pytest.raises(UserError) as err:
        parse_domain_declarations(text)
    assert problem in err.value.problem and err.value.fix
