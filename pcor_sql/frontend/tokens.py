"""A small SQL tokenizer: enough to find statement boundaries and pcor-sql's own clauses.

It does not parse SQL — DuckDB's parser does that. It only has to know what is *not* code
(strings, quoted identifiers, comments) and how deep in brackets each token is, so that a
`;`, `BY`, `USING` or `WITH` inside a string, a comment or a subquery is never taken for a
statement boundary or one of our clauses. It follows DuckDB's (PostgreSQL's) lexical rules:
'' doubles a quote in strings and "" in identifiers, E'...' strings take backslash escapes,
$tag$...$tag$ is a dollar-quoted string, /* */ comments nest.
"""

from __future__ import annotations

from dataclasses import dataclass

from pcor_sql.errors import UserError

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
_STRING_PREFIXES = ("E", "X", "B", "N")


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


def _is_ident_start(c: str) -> bool:
    return c.isalpha() or c == "_" or ord(c) > 127


def _is_ident_char(c: str) -> bool:
    return c.isalnum() or c in "_$" or ord(c) > 127


def _unterminated(what: str, text: str, start: int) -> UserError:
    line = text.count("\n", 0, start) + 1
    return UserError(
        f"unterminated {what} starting at line {line}: {text[start:start + 20]!r}",
        "close it (quotes inside strings are written twice: 'it''s')",
    )


def _quoted_end(text: str, i: int, quote: str, backslash: bool) -> int:
    """End (exclusive) of the quoted run opening at text[i] == quote."""
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if backslash and c == "\\":
            j += 2
            continue
        if c == quote:
            if j + 1 < n and text[j + 1] == quote:
                j += 2
                continue
            return j + 1
        j += 1
    return -1


def _block_comment_end(text: str, i: int) -> int:
    level, j, n = 0, i, len(text)
    while j < n:
        if text.startswith("/*", j):
            level += 1
            j += 2
        elif text.startswith("*/", j):
            level -= 1
            j += 2
            if level == 0:
                return j
        else:
            j += 1
    return -1


def _dollar(text: str, i: int) -> tuple[str, int]:
    """At text[i] == '$': a dollar-quoted string ('string', end) or a parameter ('param', end)."""
    n = len(text)
    j = i + 1
    if j < n and text[j].isdigit():
        while j < n and text[j].isdigit():
            j += 1
        return PARAM, j
    if j < n and (text[j].isalpha() or text[j] == "_"):
        while j < n and (text[j].isalnum() or text[j] == "_"):
            j += 1
    if j < n and text[j] == "$":
        tag = text[i:j + 1]
        close = text.find(tag, j + 1)
        if close < 0:
            raise _unterminated("dollar-quoted string", text, i)
        return STRING, close + len(tag)
    return PARAM, j


def _number_end(text: str, i: int) -> int:
    n = len(text)
    j = i
    while j < n and (text[j].isdigit() or text[j] == "_"):
        j += 1
    if j < n and text[j] == ".":
        j += 1
        while j < n and (text[j].isdigit() or text[j] == "_"):
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k < n and text[k].isdigit():
            j = k
            while j < n and text[j].isdigit():
                j += 1
    return j


def tokenize(text: str) -> list[Token]:
    """Every token of `text`, whitespace and comments included, in order."""
    tokens: list[Token] = []
    depth = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        kind = OPERATOR
        token_depth = depth
        if c.isspace():
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            kind = SPACE
        elif c == "-" and nxt == "-":
            j = text.find("\n", i)
            j = n if j < 0 else j
            kind = COMMENT
        elif c == "/" and nxt == "*":
            j = _block_comment_end(text, i)
            if j < 0:
                raise _unterminated("comment", text, i)
            kind = COMMENT
        elif c == "'":
            j = _quoted_end(text, i, "'", backslash=False)
            if j < 0:
                raise _unterminated("string", text, i)
            kind = STRING
        elif c == '"':
            j = _quoted_end(text, i, '"', backslash=False)
            if j < 0:
                raise _unterminated("quoted identifier", text, i)
            kind = QUOTED_IDENT
        elif c == "$":
            kind, j = _dollar(text, i)
        elif c == "?":
            j, kind = i + 1, PARAM
        elif c.isdigit() or (c == "." and nxt.isdigit()):
            j, kind = _number_end(text, i), NUMBER
        elif _is_ident_start(c):
            j = i + 1
            while j < n and _is_ident_char(text[j]):
                j += 1
            kind = WORD
            if j < n and text[j] == "'" and text[i:j].upper() in _STRING_PREFIXES:
                j = _quoted_end(text, j, "'", backslash=text[i:j].upper() == "E")
                if j < 0:
                    raise _unterminated("string", text, i)
                kind = STRING
        elif c in _OPEN:
            j, kind = i + 1, PUNCT
            depth += 1
        elif c in _CLOSE:
            j, kind = i + 1, PUNCT
            depth -= 1
            token_depth = depth
        elif c in ",;.":
            j, kind = i + 1, PUNCT
        else:
            j = i + 1
        tokens.append(Token(kind, text[i:j], i, j, token_depth))
        i = j
    return tokens


def significant(tokens: list[Token]) -> list[Token]:
    """The tokens that carry meaning: no whitespace, no comments."""
    return [t for t in tokens if t.kind not in (SPACE, COMMENT)]


def split_statements(text: str) -> list[str]:
    """The statements of a script, split at each `;` that is code (not in a string, quoted
    identifier or comment). Each statement is returned stripped; empty ones (only blanks and
    comments) are dropped."""
    statements: list[str] = []
    start = 0
    has_code = False
    for tok in tokenize(text):
        if tok.is_punct(";"):
            if has_code:
                statements.append(text[start:tok.start].strip())
            start, has_code = tok.end, False
        elif tok.kind not in (SPACE, COMMENT):
            has_code = True
    if has_code:
        statements.append(text[start:].strip())
    return statements


def unquote_identifier(token: Token) -> str:
    """The name a word or a double-quoted identifier token stands for."""
    if token.kind == QUOTED_IDENT:
        return token.text[1:-1].replace('""', '"')
    return token.text


def unquote_string(token: Token) -> str:
    """The value of a plain single-quoted string token ('' stands for ')."""
    return token.text[1:-1].replace("''", "'")
