"""The `DOMAIN (...)` clause of `EXPLAIN OUTLIER`: declared domains written in the statement.

    EXPLAIN OUTLIER SELECT salary FROM staff WHERE id = 7
        BY dept, year
        DOMAIN (dept IN ('Admin', 'Nursing', 'Surgery'), year IN (2019, 2020, 2021))

Each declaration is `attr IN (v1, v2, ...)` or `attr = v`, separated by commas; values are
literals as in `WITH (...)` (numbers, 'strings', TRUE/FALSE — never expressions), in the
order the domain lists them. It means what the CLI's `--domain 'dept=Admin|Nursing|Surgery'`
and the API's `domains={...}` mean: the values a context may select, including values the
data may not hold (enumerating only present values would reveal which exist). The engine
converts them to the column's type and refuses a data value outside its declared domain.

`attr BINS (e1, e2, ...)` declares an ordinal attribute instead (DESIGN.md §2): bins
[e1, e2), [e2, e3), ..., the last closed, '-inf'/'inf' allowed at the ends; contexts keep a
run of bins, released as a range (`age >= 25 AND age < 45`). It means what `--bins
age=18,25,35` and `bins={'age': [18, 25, 35]}` mean; its declaration is a `core.bins.Bins`,
which the request moves to its bins. `attr BINS 'auto:5'` asks for quantile bins from the
data (the edges are data: a privacy warning says so).

    EXPLAIN OUTLIER SELECT salary FROM people WHERE id = 7
        BY age, dept DOMAIN (age BINS (18, 25, 35, 45, 55, 65, 81))
"""

from __future__ import annotations

from typing import Sequence

from pcor_sql.core.bins import Bins, parse_bins
from pcor_sql.errors import UserError
from pcor_sql.frontend.option_lists import OptionValue, parse_literal
from pcor_sql.sqltext.tokens import QUOTED_IDENT, WORD, Token, unquote_identifier

DOMAIN_EXAMPLE = "DOMAIN (dept IN ('Admin', 'Nursing'), year IN (2019, 2020))"

Domains = tuple[tuple[str, "tuple[OptionValue, ...] | Bins"], ...]


def parse_domain_clause(tokens: Sequence[Token], i: int) -> tuple[Domains, int]:
    """The declarations in the parentheses opening at tokens[i] (just after DOMAIN), and the
    index after the closing parenthesis."""
    open_ = tokens[i] if i < len(tokens) else None
    if open_ is None or not open_.is_punct("("):
        found = "nothing" if open_ is None else repr(open_.text)
        raise UserError(f"expected '(' after DOMAIN, found {found}", f"write {DOMAIN_EXAMPLE}")
    close = next((j for j in range(i + 1, len(tokens)) if tokens[j].is_punct(")") and tokens[j].depth == open_.depth), None)
    if close is None:
        raise UserError("the parenthesis after DOMAIN is not closed", f"write {DOMAIN_EXAMPLE}")
    inner = tokens[i + 1:close]
    if not inner:
        raise UserError("DOMAIN () declares nothing", f"write {DOMAIN_EXAMPLE}, or leave the clause out")
    out: dict[str, tuple[OptionValue, ...]] = {}
    j = 0
    while True:
        name, values, j = _declaration(inner, j)
        if name in out:
            raise UserError(f"DOMAIN declares {name} twice", f"list all its values once: {name} IN (...)")
        out[name] = values
        if j == len(inner):
            return tuple(out.items()), close + 1
        if not inner[j].is_punct(","):
            raise UserError(
                f"unexpected {inner[j].text!r} after the domain of {name}",
                f"separate declarations with commas: {DOMAIN_EXAMPLE}",
            )
        j += 1
        if j == len(inner):
            raise UserError("DOMAIN (...) ends with a comma", "remove the trailing comma")


def _declaration(tokens: Sequence[Token], j: int) -> tuple[str, tuple[OptionValue, ...], int]:
    tok = tokens[j]
    if tok.kind not in (WORD, QUOTED_IDENT):
        raise UserError(f"expected an attribute name in DOMAIN, found {tok.text!r}", f"write {DOMAIN_EXAMPLE}")
    name = unquote_identifier(tok)
    if not name:
        raise UserError("an attribute name in DOMAIN is empty", "remove the empty quotes")
    nxt = tokens[j + 1] if j + 1 < len(tokens) else None
    if nxt is not None and nxt.text == "=":
        value, j = parse_literal(tokens, j + 2, name)
        return name, (value,), j
    if nxt is not None and nxt.is_word("BINS"):
        return _bins(tokens, j + 2, name)
    if nxt is None or not nxt.is_word("IN"):
        found = "nothing" if nxt is None else repr(nxt.text)
        raise UserError(f"expected IN after {name} in DOMAIN (or BINS, for ranges), found {found}",
                        f"write {name} IN ('a', 'b'), or {name} BINS (18, 25, 35) for ranges")
    values, k = _literals(tokens, j + 2, name, f"{name} IN ('a', 'b')", "the domain")
    return name, values, k


def _bins(tokens: Sequence[Token], k: int, name: str) -> tuple[str, Bins, int]:
    """`BINS (e1, e2, ...)` — edges, numbers or date strings, '-inf'/'inf' at the ends — or
    `BINS 'auto:5'` (quantile bins from the data, with a privacy warning)."""
    example = f"{name} BINS (18, 25, 35, 45)"
    tok = tokens[k] if k < len(tokens) else None
    if tok is not None and not tok.is_punct("("):
        value, k = parse_literal(tokens, k, name)
        if not isinstance(value, str):
            raise UserError(f"expected '(' after {name} BINS in DOMAIN", f"write {example}, or {name} BINS 'auto:5'")
        return name, parse_bins(value, name), k
    edges, k = _literals(tokens, k, name, example, "the bins")
    return name, parse_bins(list(edges), name), k


def _literals(tokens: Sequence[Token], k: int, name: str, example: str, what: str) -> tuple[tuple[OptionValue, ...], int]:
    """`(v1, v2, ...)` opening at tokens[k]: distinct literals, and the index after ')'."""
    paren = tokens[k] if k < len(tokens) else None
    if paren is None or not paren.is_punct("("):
        raise UserError(f"expected '(' in {what} of {name} in DOMAIN", f"write {example}")
    values: list[OptionValue] = []
    k += 1
    while True:
        gap = tokens[k] if k < len(tokens) else None
        if gap is None or gap.is_punct(")") or gap.is_punct(","):
            if not values and gap is not None and gap.is_punct(")"):
                raise UserError(f"{what} of {name} is empty", "declare at least one value")
            raise UserError(f"a value is missing in {what} of {name}", f"write {example}")
        value, k = parse_literal(tokens, k, name)
        if any(type(v) is type(value) and v == value for v in values):
            raise UserError(f"the value {value!r} is listed twice in {what} of {name}", "list each value once")
        values.append(value)
        sep = tokens[k] if k < len(tokens) else None
        if sep is not None and sep.is_punct(")"):
            return tuple(values), k + 1
        if sep is None or not sep.is_punct(","):
            found = "the end of DOMAIN" if sep is None else repr(sep.text)
            raise UserError(
                f"expected ',' or ')' in {what} of {name}, found {found}",
                "values are single literals separated by commas: 'a', 'b', 2019",
            )
        k += 1
