"""Ledger names for relations given as SQL text: `dataset_key("salaries")` → `salaries#3c1f…`.

The same relation spelled with other case, spacing or comments gets the same key (the text is
normalised on the one tokenizer); it is a name for the ledger, not a privacy unit — two
different texts reading the same table get different keys.
"""

from __future__ import annotations

import hashlib
import re

from pcor_sql.errors import UserError
from pcor_sql.sqltext.tokens import QUOTED_IDENT, STRING, Token, Unterminated, significant, tokenize


def dataset_key(relation_sql: str) -> str:
    """A stable ledger name for a relation given as SQL text (a table name, a file, a subquery):
    a readable slug and a hash of the text normalised so that case and spacing outside quotes,
    comments and a trailing semicolon do not matter, e.g. `salaries#3c1f0e9a5b7d2c44`."""
    if not isinstance(relation_sql, str):
        raise UserError(f"the relation must be SQL text, got {type(relation_sql).__name__}", "pass a string")
    normalized = _normalize_sql(relation_sql)
    if not normalized:
        raise UserError("the relation is empty", "name a table, a view, a file or a subquery")
    digest = hashlib.sha256(normalized.encode("utf-8")).hexdigest()[:16]
    slug = re.sub(r"[^0-9a-z]+", "_", normalized.lower()).strip("_")[:40].strip("_") or "relation"
    return f"{slug}#{digest}"


def _normalize_sql(text: str) -> str:
    """Case-fold and squeeze the text outside quotes (DuckDB's unquoted identifiers and keywords
    ignore case; spacing next to punctuation and quotes means nothing), drop comments and a
    trailing semicolon, keep quoted identifiers and string literals verbatim."""
    try:
        code = significant(tokenize(text))
    except Unterminated as exc:
        # dataset_key also names ledgers typed by hand (`budget set-limit NAME`), which need not
        # be SQL: an open quote keeps the rest as one literal, an open comment is dropped.
        code = significant(tokenize(text[:exc.start]))
        if exc.what != "comment":
            kind = QUOTED_IDENT if exc.what == "quoted identifier" else STRING
            code.append(Token(kind, text[exc.start:], exc.start, len(text), 0))
    while code and code[-1].is_punct(";"):
        code.pop()
    pieces: list[str] = []
    for previous, token in zip([None, *code], code):
        # Blanks or a comment between two words still separate them; elsewhere they mean nothing.
        if previous is not None and previous.end < token.start and _WORD_EDGE.match(previous.text[-1] + token.text[0]):
            pieces.append(" ")
        pieces.append(_case_folded(token))
    return "".join(pieces)


_WORD_EDGE = re.compile(r"\w\w")


def _case_folded(token: Token) -> str:
    if token.kind == QUOTED_IDENT or (token.kind == STRING and token.text.startswith("$")):
        return token.text
    if token.kind == STRING:  # only a prefix such as E'...' or X'...' ignores case
        prefix, quote, rest = token.text.partition("'")
        return prefix.lower() + quote + rest
    return token.text.lower()
