"""`IDENTIFY ANOMALY VALUE`: an anomaly question about a point of the metric space.

    IDENTIFY ANOMALY VALUE (income = 50000 [, age = 30 ...]) FROM <dataset>
        WITH (beta = 5, radius = 1000, epsilon = 0.5 [, privacy = 'dp', k = 1, norm = 'l2'])

The point is the value i of the sensitive-privacy paper (DESIGN.md §3, §6): one number per
metric column, in the data or not, so the answer — the mechanism's randomized bit — is defined
for every i and says nothing by being given. The dataset is a registered dataset's name (an
analyst's statement). Values are single numeric literals, never expressions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pcor_sql.errors import UserError
from pcor_sql.frontend.option_lists import IDENTIFY_OPTIONS, OptionValue, check_options, parse_literal, parse_option_list
from pcor_sql.sqltext.tokens import QUOTED_IDENT, WORD, Token, significant, tokenize, unquote_identifier

VALUE_GRAMMAR = ("IDENTIFY ANOMALY VALUE (income = 50000) FROM <dataset> "
                 "WITH (beta = 5, radius = 1000, epsilon = 0.5)")
REQUIRED = ("beta", "radius", "epsilon")


@dataclass(frozen=True)
class IdentifyValue:
    """A parsed `IDENTIFY ANOMALY VALUE` statement: `point` is (column, number) in the order
    written; `given` the WITH options, typed and checked."""

    text: str
    dataset: str
    point: tuple[tuple[str, float], ...]
    given: tuple[tuple[str, OptionValue], ...] = ()

    def options(self) -> dict[str, OptionValue]:
        return dict(self.given)


def _statement_tokens(text: str) -> list[Token]:
    sig = significant(tokenize(text))
    while sig and sig[-1].is_punct(";"):
        sig.pop()
    return sig


def is_value_statement(text: object) -> bool:
    """True if `text` starts with IDENTIFY ANOMALY VALUE."""
    if not isinstance(text, str):
        return False
    sig = _statement_tokens(text)
    return len(sig) >= 3 and sig[0].is_word("IDENTIFY") and sig[1].is_word("ANOMALY") and sig[2].is_word("VALUE")


def _name(tok: Token | None, what: str) -> str:
    if tok is None or tok.kind not in (WORD, QUOTED_IDENT):
        found = "nothing" if tok is None else repr(tok.text)
        raise UserError(f"expected {what}, found {found}", f"write {VALUE_GRAMMAR}")
    return unquote_identifier(tok)


def _inside(tokens: Sequence[Token], i: int, clause: str) -> tuple[list[Token], int]:
    """The tokens between the parenthesis opening at tokens[i] and its match, and the index after."""
    if i >= len(tokens) or not tokens[i].is_punct("("):
        raise UserError(f"expected '(' after {clause}", f"write {VALUE_GRAMMAR}")
    depth = tokens[i].depth
    for j in range(i + 1, len(tokens)):
        if tokens[j].is_punct(")") and tokens[j].depth == depth:
            return list(tokens[i + 1:j]), j + 1
    raise UserError(f"the parenthesis after {clause} is not closed", f"write {VALUE_GRAMMAR}")


def _point(tokens: Sequence[Token]) -> tuple[tuple[str, float], ...]:
    """`column = number, ...` (at least one; each column once)."""
    point: list[tuple[str, float]] = []
    i = 0
    while True:
        column = _name(tokens[i] if i < len(tokens) else None, "a column name in VALUE (...)")
        if i + 1 >= len(tokens) or tokens[i + 1].text != "=":
            raise UserError(f"expected '=' after {column} in VALUE (...)", f"write VALUE ({column} = 50000)")
        value, i = parse_literal(tokens, i + 2, column)
        if isinstance(value, (bool, str)):
            raise UserError(f"the value of {column} must be a number, got {value!r}", f"write {column} = 50000")
        if any(c == column for c, _ in point):
            raise UserError(f"{column} is given twice in VALUE (...)", "give each column once")
        point.append((column, float(value)))
        if i >= len(tokens):
            return tuple(point)
        if not tokens[i].is_punct(","):
            raise UserError(f"expected ',' or ')' after the value of {column}, found {tokens[i].text!r}",
                            "values are single numbers, separated by commas")
        i += 1


def parse_value_statement(text: str) -> IdentifyValue:
    """Parse `IDENTIFY ANOMALY VALUE (...) FROM <dataset> WITH (...)` (see the module docstring)."""
    if not is_value_statement(text):
        raise UserError("not an IDENTIFY ANOMALY VALUE statement", f"write {VALUE_GRAMMAR}")
    sig = _statement_tokens(text)
    if any(t.is_punct(";") for t in sig):
        raise UserError("several statements in one call", "send one statement")
    inner, i = _inside(sig, 3, "VALUE")
    if not inner:
        raise UserError("VALUE () names no column", f"write {VALUE_GRAMMAR}")
    point = _point(inner)
    if i >= len(sig) or not sig[i].is_word("FROM"):
        raise UserError("expected FROM <dataset> after VALUE (...)", f"write {VALUE_GRAMMAR}")
    dataset = _name(sig[i + 1] if i + 1 < len(sig) else None, "a dataset name after FROM")
    i += 2
    raw = []
    if i < len(sig):
        if not sig[i].is_word("WITH"):
            raise UserError(f"unexpected {sig[i].text!r} after FROM {dataset}", f"write {VALUE_GRAMMAR}")
        options, i = _inside(sig, i + 1, "WITH")
        raw = parse_option_list(options, "WITH (...)")
        if i < len(sig):
            raise UserError(f"unexpected {sig[i].text!r} after WITH (...)", f"write {VALUE_GRAMMAR}")
    given = check_options(raw, IDENTIFY_OPTIONS, "WITH (...)")
    missing = [name for name in REQUIRED if name not in given]
    if missing:
        raise UserError(f"IDENTIFY ANOMALY VALUE needs {', '.join(missing)} in WITH (...)",
                        "write e.g. WITH (beta = 5, radius = 1000, epsilon = 0.5)")
    return IdentifyValue(text=text, dataset=dataset, point=point, given=tuple(given.items()))
