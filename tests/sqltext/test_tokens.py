"""The tokenizer (DuckDB's, with offsets turned into tokens) knows what is not code: strings,
quoted identifiers, comments, brackets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.errors import UserError
from pcor_sql.sqltext.tokens import (
    COMMENT,
    NUMBER,
    OPERATOR,
    PARAM,
    PUNCT,
    QUOTED_IDENT,
    STRING,
    WORD,
    Unterminated,
    significant,
    split_statements,
    tokenize,
    unquote_identifier,
    unquote_string,
)


def kinds(text):
    return [(t.kind, t.text) for t in significant(tokenize(text))]


def test_tokens_cover_the_text_exactly():
    text = "SELECT \"a \"\"b\"\"\" FROM t -- c\n WHERE x = 'it''s' /* a /* nested */ c */ AND y = E'\\'' AND z = $$;$$"
    tokens = tokenize(text)
    assert "".join(t.text for t in tokens) == text
    assert all(text[t.start:t.end] == t.text for t in tokens)


@pytest.mark.parametrize(
    "text, kind, value",
    [
        ("'it''s'", STRING, "'it''s'"),
        ("E'it\\'s; no'", STRING, "E'it\\'s; no'"),
        ("$$a'b;$$", STRING, "$$a'b;$$"),
        ("$tag$ $$ ; $tag$", STRING, "$tag$ $$ ; $tag$"),
        ('"a "" b"', QUOTED_IDENT, '"a "" b"'),
        ("`a `` b`", QUOTED_IDENT, "`a `` b`"),
        ("/* a /* b */ ; */", COMMENT, "/* a /* b */ ; */"),
        ("-- ; 'x", COMMENT, "-- ; 'x"),
        ("$1", PARAM, "$1"),
        ("?", PARAM, "?"),
        ("1.5e-3", NUMBER, "1.5e-3"),
        (".5", NUMBER, ".5"),
        ("1_000", NUMBER, "1_000"),
    ],
)
def test_lexemes(text, kind, value):
    tokens = tokenize(text)
    assert [(t.kind, t.text) for t in tokens] == [(kind, value)]


def test_depth_counts_brackets_and_matching_brackets_share_it():
    tokens = significant(tokenize("a (b [c] d) e"))
    assert [(t.text, t.depth) for t in tokens] == [
        ("a", 0), ("(", 0), ("b", 1), ("[", 1), ("c", 2), ("]", 1), ("d", 1), (")", 0), ("e", 0)
    ]


def test_words_are_compared_case_insensitively():
    tok = significant(tokenize("wItH"))[0]
    assert tok.kind == WORD and tok.is_word("WITH") and not tok.is_word("BY")


def test_unquoting():
    ident, string, backticked = significant(tokenize('"a ""b""" \'it\'\'s\' `x``y`'))
    assert unquote_identifier(ident) == 'a "b"' and unquote_identifier(backticked) == "x`y"
    assert unquote_string(string) == "it's"


@pytest.mark.parametrize("text", ["SELECT 'abc", 'SELECT "abc', "SELECT 1 /* open", "SELECT $$x", "SELECT E'\\'"])
def test_unterminated_is_a_user_error(text):
    with pytest.raises(UserError, match="unterminated"):
        tokenize(text)


def test_split_statements_respects_strings_and_comments():
    script = """
    CREATE TABLE t (a VARCHAR);  -- a comment; with a semicolon
    INSERT INTO t VALUES ('x; y'), ('it''s;'), (E'\\';');
    /* ; */
    SELECT "a;b" FROM t;;
    EXPLAIN OUTLIER SELECT a FROM t WITH (start = 'a = '';''')
    """
    assert split_statements(script) == [
        "CREATE TABLE t (a VARCHAR)",
        "-- a comment; with a semicolon\n    INSERT INTO t VALUES ('x; y'), ('it''s;'), (E'\\';')",
        '/* ; */\n    SELECT "a;b" FROM t',
        "EXPLAIN OUTLIER SELECT a FROM t WITH (start = 'a = '';''')",
    ]


def test_split_statements_drops_empty_ones():
    assert split_statements("") == []
    assert split_statements(" ; -- only a comment\n ; /* x */") == []
    assert split_statements("SELECT 1") == ["SELECT 1"]


def test_split_statements_rejects_an_unterminated_string():
    with pytest.raises(UserError):
        split_statements("SELECT 'a; SELECT 2")


def test_offsets_are_characters_not_utf8_bytes():
    text = "SELECT 'é' AS \"ü\" -- ç\n, $1x"
    tokens = tokenize(text)
    assert "".join(t.text for t in tokens) == text
    assert [(t.kind, t.text) for t in significant(tokens)] == [
        (WORD, "SELECT"), (STRING, "'é'"), (WORD, "AS"), (QUOTED_IDENT, '"ü"'), (PUNCT, ","), (PARAM, "$1"), (WORD, "x"),
    ]


@pytest.mark.parametrize(
    "text, lexemes",
    [
        ("a::int>=3", [(WORD, "a"), (OPERATOR, "::"), (WORD, "int"), (OPERATOR, ">="), (NUMBER, "3")]),
        ("t.*", [(WORD, "t"), (PUNCT, "."), (OPERATOR, "*")]),
        ("f(a[1],{'k':2})", [(WORD, "f"), (PUNCT, "("), (WORD, "a"), (PUNCT, "["), (NUMBER, "1"), (PUNCT, "]"),
                             (PUNCT, ","), (PUNCT, "{"), (STRING, "'k'"), (OPERATOR, ":"), (NUMBER, "2"),
                             (PUNCT, "}"), (PUNCT, ")")]),
        ("$name", [(PARAM, "$name")]),
        ("k=-3", [(WORD, "k"), (OPERATOR, "="), (OPERATOR, "-"), (NUMBER, "3")]),
        ("x'ff' e'a\\'b'", [(STRING, "x'ff'"), (STRING, "e'a\\'b'")]),
    ],
)
def test_duckdb_lexes_operators_brackets_and_prefixed_strings(text, lexemes):
    assert kinds(text) == lexemes


def test_unterminated_says_what_and_where():
    with pytest.raises(Unterminated) as err:
        tokenize("SELECT 1;\nSELECT /* open")
    assert err.value.what == "comment" and err.value.start == 17 and "line 2" in err.value.problem


_FRAGMENTS = st.sampled_from(
    ["SELECT", "a", "é", '"q;"', "'s;'", "'it''s'", "E'\\''", "$$;$$", "-- c;\n", "/* ; */", ";", ";", "(", ")",
     "[", "]", ",", ".", "::", ">=", "1.5", "$1", "?", " ", "\n", "\t"]
)
_SCRIPTS = st.lists(_FRAGMENTS, max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_SCRIPTS, st.text(max_size=40)))
def test_tokens_cover_the_text_in_order(text):
    try:
        tokens = tokenize(text)
    except Unterminated:
        return
    assert "".join(t.text for t in tokens) == text
    assert [t.start for t in tokens[1:]] == [t.end for t in tokens[:-1]]
    assert all(t.text and text[t.start:t.end] == t.text for t in tokens)


@settings(max_examples=300, deadline=None)
@given(_SCRIPTS)
def test_split_statements_loses_no_significant_token(text):
    try:
        statements = split_statements(text)
    except Unterminated:
        return
    code = [t.text for t in significant(tokenize(text)) if not t.is_punct(";")]
    assert [t.text for s in statements for t in significant(tokenize(s))] == code
    assert all(split_statements(s) == [s] for s in statements)
