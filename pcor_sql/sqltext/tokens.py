"""The one SQL tokenizer of pcor-sql, built on DuckDB's own (`duckdb.tokenize`).

It does not parse SQL — DuckDB's parser does that. It tells what is *not* code (strings,
quoted identifiers, comments) and how deep in brackets each token is, so that a `;`, `BY`,
`USING` or `WITH` inside a string, a comment or a subquery is never taken for a statement
boundary or one of our clauses. Because DuckDB lexes the text, its rules are exactly the ones
the SQL will later be run with ('' and "" doubling, E'' escapes, $tag$ quoting, nested /* */).

`duckdb.tokenize` gives only where each token starts (as a UTF-8 byte offset) and a coarse
type; everything else is derived from those offsets: a token ends where the blanks before the
next one begin, its kind refines DuckDB's type by its first character, and the bracket depth
counts the bracket tokens. Where DuckDB's answer is not enough a comment below says so.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import duckdb

from pcor_sql.errors import UserError
from pcor_sql.sqltext.quoting import type_exact

WORD = "word"
QUOTED_IDENT = "quoted_ident"
STRING = "string"
NUMBER = "number"
PARAM = "param"
OPERATOR = "operator"
PUNCT = "punct"
COMMENT = "comment"
SPACE = "space"

_OPEN = "([{"
_CLOSE = ")]}"
_PUNCT = frozenset("()[]{},;.")
_IDENT_QUOTES = ('"', "`")  # DuckDB also takes MySQL's `name`
# The blanks of DuckDB's lexer (PostgreSQL's): a no-break space, say, is part of an identifier.
_SQL_SPACE = " \t\n\r\f\v"
# DuckDB's tokenizer does not fail on an unterminated string, quoted identifier or comment: it
# runs that token to the end of the input. So the text is tokenized with this probe after it,
# and a probe that does not come back as a token of its own was swallowed by an open one.
_PROBE = "\n0"


@dataclass(frozen=True)
class Token:
    """One lexeme: `text` is `source[start:end]`; `depth` is the bracket depth around it
    (an opening bracket and its closing one have the depth outside them)."""

    kind: str
    text: str
    start: int
    end: int
    depth: int

    @property
    def upper(self) -> str:
        return self.text.upper()

    def is_word(self, *words: str) -> bool:
        """True for an unquoted word equal (case-insensitively) to one of `words`."""
        return self.kind == WORD and self.text.upper() in words

    def is_punct(self, char: str) -> bool:
        return self.kind == PUNCT and self.text == char


class Unterminated(UserError):
    """A string, quoted identifier or comment that is never closed; `start` is where it opens."""

    def __init__(self, text: str, start: int):
        opening = text[start:start + 2]
        if opening.startswith("/*"):
            what = "comment"
        elif opening.startswith(_IDENT_QUOTES):
            what = "quoted identifier"
        elif opening.startswith("$"):
            what = "dollar-quoted string"
        else:
            what = "string"
        line = text.count("\n", 0, start) + 1
        super().__init__(
            f"unterminated {what} starting at line {line}: {text[start:start + 20]!r}",
            "close it (quotes inside strings are written twice: 'it''s')",
        )
        self.what = what
        self.start = start


def _duckdb_tokens(text: str) -> list[tuple[int, str]]:
    """(character offset, DuckDB token type name) of each token DuckDB finds in `text`."""
    try:
        found = duckdb.tokenize(text + _PROBE)
    except TypeError:  # the binding refuses str that is not valid UTF-8 (a lone surrogate)
        raise UserError("the SQL text holds a character that is not valid Unicode", "remove or retype it") from None
    pairs = [(offset, kind.name) for offset, kind in found]
    if not text.isascii():  # DuckDB counts UTF-8 bytes: map each byte offset to its character
        sizes = (len(c.encode()) for c in text + _PROBE)
        char_at = {b: i for i, b in enumerate(itertools.accumulate(sizes, initial=0))}
        pairs = [(char_at[offset], kind) for offset, kind in pairs]
    # DuckDB can report two tokens at one offset (`$:` comes back as two operators at 0): keep the first.
    pairs = [p for p, before in zip(pairs, [(-1, "")] + pairs) if p[0] > before[0]]
    if pairs[-1][0] != len(text) + 1:
        raise Unterminated(text, pairs[-1][0])
    return pairs[:-1]


def _kind(duckdb_type: str, text: str) -> str:
    if duckdb_type == "comment":
        return COMMENT
    if duckdb_type == "string_const":
        return STRING
    if duckdb_type == "identifier" and text.startswith(_IDENT_QUOTES):
        return QUOTED_IDENT
    if duckdb_type in ("identifier", "keyword"):
        return WORD
    if text in _PUNCT:  # DuckDB calls brackets and ';' operators, and a lone '.' a number
        return PUNCT
    if duckdb_type == "numeric_const":
        return NUMBER
    # DuckDB lexes `$1` as the operator `$` and a number, and `?` as an operator.
    return PARAM if text in ("$", "?") else OPERATOR


def _lexemes(text: str) -> list[tuple[str, int, int]]:
    """(kind, start, end) of every token, blanks included, covering `text` in order."""
    pairs = _duckdb_tokens(text)
    out: list[tuple[str, int, int]] = []
    first = pairs[0][0] if pairs else len(text)
    if first > 0:
        # DuckDB skips only blanks; anything else left before its first token is kept as an operator.
        out.append((SPACE if not text[:first].strip(_SQL_SPACE) else OPERATOR, 0, first))
    for (start, duckdb_type), (following, _) in zip(pairs, pairs[1:] + [(len(text), "")]):
        end = start + len(text[start:following].rstrip(_SQL_SPACE))
        kind = _kind(duckdb_type, text[start:end])
        if kind in (NUMBER, WORD) and out and out[-1] == (PARAM, start - 1, start) and text[start - 1] == "$":
            out[-1] = (PARAM, start - 1, end)  # `$1` and `$name` are one parameter
        else:
            out.append((kind, start, end))
        if end < following:
            out.append((SPACE, end, following))
    return out


@type_exact
def tokenize(text: str) -> list[Token]:
    """Every token of `text`, whitespace and comments included, in order. An unterminated
    string, quoted identifier or comment raises `Unterminated` (a UserError)."""
    tokens: list[Token] = []
    depth = 0
    for kind, start, end in _lexemes(text):
        lexeme = text[start:end]
        token_depth = depth
        if kind == PUNCT and lexeme in _OPEN:
            depth += 1
        elif kind == PUNCT and lexeme in _CLOSE:
            depth -= 1
            token_depth = depth
        tokens.append(Token(kind, lexeme, start, end, token_depth))
    return tokens


def significant(tokens: list[Token]) -> list[Token]:
    """The tokens that carry meaning: no whitespace, no comments."""
    return [t for t in tokens if t.kind not in (SPACE, COMMENT)]


@type_exact
def split_statements(text: str) -> list[str]:
    """The statements of a script, split at each `;` that is code (not in a string, quoted
    identifier or comment). Each statement is returned stripped; empty ones (only blanks and
    comments) are dropped.

    Not `duckdb.extract_statements`: it parses each statement, so it rejects ours (EXPLAIN
    OUTLIER ...), and it does not say where in the text a statement is."""
    statements: list[str] = []
    start = 0
    has_code = False
    for tok in tokenize(text):
        if tok.is_punct(";"):
            if has_code:
                statements.append(text[start:tok.start].strip(_SQL_SPACE))
            start, has_code = tok.end, False
        elif tok.kind not in (SPACE, COMMENT):
            has_code = True
    if has_code:
        statements.append(text[start:].strip(_SQL_SPACE))
    return statements


def unquote_identifier(token: Token) -> str:
    """The name a word or a double-quoted identifier token stands for."""
    if token.kind == QUOTED_IDENT:
        quote = token.text[0]
        return token.text[1:-1].replace(quote * 2, quote)
    return token.text


def unquote_string(token: Token) -> str:
    """The value of a plain single-quoted string token ('' stands for ')."""
    return token.text[1:-1].replace("''", "'")
