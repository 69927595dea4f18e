"""pcor-sql's statements, and ordinary SQL passed through.

    EXPLAIN OUTLIER <select> [BY a, b, ...] [DOMAIN (a IN ('x', 'y'), b IN (1, 2))]
        [USING verifier[(name = value, ...)]] [WITH (name = value, ...)]
    IDENTIFY ANOMALY <select> WITH (beta = 5, radius = 1000, epsilon = 0.5 [, ...])

Keywords are case-insensitive; the clauses may come in any order, each at most once. The
tokenizer finds where the SELECT ends: only a `BY`, `USING` or `WITH` outside strings,
comments and brackets can start a clause, and not `GROUP BY`/`ORDER BY`, `USING (` (a join)
or `USING SAMPLE`, or the `WITH` of a CTE that opens the SELECT; `DOMAIN (` only where an
expression or a table has just ended (so a function named domain is not a clause). The SELECT itself is then parsed
and validated by DuckDB's parser (`parse_select`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

import duckdb

from pcor_sql.core.option_spec import fold_word
from pcor_sql.errors import UserError
from pcor_sql.frontend.domain_clause import DOMAIN_EXAMPLE, Domains, parse_domain_clause
from pcor_sql.frontend.option_lists import (
    EXPLAIN_OPTIONS,
    IDENTIFY_OPTIONS,
    OptionValue,
    RawOption,
    check_options,
    option_tuple,
    parse_option_list,
)
from pcor_sql.frontend.select import SelectQuery, parse_select
from pcor_sql.frontend.start_predicate import parse_start_predicate
from pcor_sql.request_values import VerifierSpec
from pcor_sql.sqltext.tokens import OPERATOR, PUNCT, QUOTED_IDENT, WORD, Token, significant, split_statements, tokenize, unquote_identifier

EXPLAIN_GRAMMAR = (
    "EXPLAIN OUTLIER SELECT <metric> FROM <relation> WHERE <selector> "
    "[BY a, b] [DOMAIN (a IN ('x', 'y'))] [USING lof(k = 20)] [WITH (epsilon = 0.2, ...)]"
)
IDENTIFY_GRAMMAR = "IDENTIFY ANOMALY SELECT <columns> FROM <relation> [WHERE <selector>] WITH (beta = 5, radius = 1000, epsilon = 0.5)"
IDENTIFY_REQUIRED = ("beta", "radius", "epsilon")


class _WithOptions:
    """WITH options read by name: `statement.epsilon` is the value written, None if not given."""

    given: tuple[tuple[str, OptionValue], ...]
    _names: frozenset[str] = frozenset()

    def options(self) -> dict[str, OptionValue]:
        """The WITH options the statement gave, by name (values already typed and checked)."""
        return dict(self.given)

    def __getattr__(self, name: str) -> OptionValue | None:
        if name in type(self)._names:
            return dict(self.given).get(name)
        raise AttributeError(name)


@dataclass(frozen=True)
class ExplainOutlier(_WithOptions):
    """`EXPLAIN OUTLIER ...`. `by`, `domains` and `verifier` are None when not given; the
    WITH options are the statement options of `OutlierRequest`; `start` stays text, checked
    for form. `domains` are the DOMAIN clause's declarations, attribute → values."""

    text: str
    query: SelectQuery
    by: tuple[str, ...] | None = None
    verifier: VerifierSpec | None = None
    given: tuple[tuple[str, OptionValue], ...] = ()
    domains: Domains | None = None
    _names = frozenset(o.name for o in EXPLAIN_OPTIONS)


@dataclass(frozen=True)
class IdentifyAnomaly(_WithOptions):
    """`IDENTIFY ANOMALY ...`: beta, radius and epsilon are required WITH options."""

    text: str
    query: SelectQuery
    given: tuple[tuple[str, OptionValue], ...] = ()
    _names = frozenset(o.name for o in IDENTIFY_OPTIONS)


@dataclass(frozen=True)
class Passthrough:
    """Ordinary SQL, to be run by DuckDB unchanged."""

    sql: str


Statement = Union[ExplainOutlier, IdentifyAnomaly, Passthrough]


def _leading_kind(sig: Sequence[Token]) -> str | None:
    if len(sig) >= 2 and sig[0].is_word("EXPLAIN") and sig[1].is_word("OUTLIER"):
        return "explain"
    if len(sig) >= 2 and sig[0].is_word("IDENTIFY") and sig[1].is_word("ANOMALY"):
        return "identify"
    return None


#: Our statements' two leading words, and what to write instead of a near miss of them.
_LEADS = (("EXPLAIN", "OUTLIER", EXPLAIN_GRAMMAR), ("IDENTIFY", "ANOMALY", IDENTIFY_GRAMMAR))


def _near_miss(sig: Sequence[Token]) -> UserError | None:
    """`EXPLAIN OUTLIERS`, `IDENTIFY ANOMALIES`, `EXPLAIN OUTLEIR`: a first word within two edits
    of ours and a second within three (no DuckDB statement starts so), as an error naming ours —
    else DuckDB's bare parser error would be all the caller sees."""
    if len(sig) < 2 or sig[0].kind != WORD or sig[1].kind != WORD:
        return None
    first, second = sig[0].text.upper(), sig[1].text.upper()
    for lead, word, grammar in _LEADS:
        if _edits(first, lead) <= 2 and _edits(second, word) <= 3 and (first, second) != (lead, word):
            return UserError(f"{sig[0].text} {sig[1].text} is not a statement: did you mean {lead} {word}?",
                             f"write {grammar}")
    return None


def _edits(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions turning `a` into `b`."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, start=1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def is_pcor_statement(text: str) -> bool:
    """True if `text` starts with EXPLAIN OUTLIER or IDENTIFY ANOMALY."""
    return _leading_kind(significant(tokenize(text))) is not None


def parse_statement(con: duckdb.DuckDBPyConnection, text: str) -> Statement:
    """One statement: ours parsed and validated, anything else returned as Passthrough(text).

    A text holding several statements is passed through only if none of them is ours (DuckDB
    runs such scripts itself); with one of ours among them it is an error — split it with
    `split_statements` and run each."""
    if not isinstance(text, str):
        raise UserError(f"expected SQL text, got {type(text).__name__}", "pass the statement as a string")
    tokens = tokenize(text)
    sig = significant(tokens)
    # Trailing semicolons end the statement; any other top-level ';' separates statements.
    while sig and sig[-1].is_punct(";"):
        sig.pop()
    kind = _leading_kind(sig)
    if any(t.is_punct(";") for t in sig):
        if kind is not None or any(is_pcor_statement(s) for s in split_statements(text)):
            raise UserError(
                "several statements in one call, one of them EXPLAIN OUTLIER or IDENTIFY ANOMALY",
                "run one statement per call (the `pcor-sql sql` runner splits scripts at ';')",
            )
        return Passthrough(text)
    if kind is None:
        near = _near_miss(sig)
        if near is not None:
            raise near
        return Passthrough(text)
    end = sig[-1].end
    body = sig[2:]
    if kind == "explain":
        return _explain(con, text, body, end)
    return _identify(con, text, body, end)


def _clause_start(body: Sequence[Token]) -> int:
    """Index in `body` of the first token that starts one of our clauses (len if none)."""
    for i, tok in enumerate(body):
        if tok.depth != 0 or tok.kind != WORD:
            continue
        prev = body[i - 1] if i > 0 else None
        nxt = body[i + 1] if i + 1 < len(body) else None
        if tok.is_word("BY") and not (prev is not None and prev.is_word("GROUP", "ORDER", "PARTITION")):
            return i
        if _is_domain_clause(body, i):
            return i
        if tok.is_word("USING") and (nxt is None or not (nxt.is_punct("(") or nxt.is_word("SAMPLE"))):
            return i
        # A CTE's WITH can only open the SELECT; anywhere later a top-level WITH is ours.
        if tok.is_word("WITH") and (i > 0 or nxt is None or nxt.is_punct("(")):
            return i
    return len(body)


# Words after which `DOMAIN (` is SQL (a function call, a table function), not our clause.
_BEFORE_EXPRESSION = frozenset({
    "SELECT", "WHERE", "AND", "OR", "NOT", "ON", "WHEN", "THEN", "ELSE", "IN", "IS", "LIKE", "ILIKE", "GLOB",
    "SIMILAR", "BETWEEN", "CASE", "FROM", "JOIN", "HAVING", "AS", "DISTINCT", "ALL", "ANY", "SOME", "EXISTS",
    "LIMIT", "OFFSET", "QUALIFY", "LATERAL", "ESCAPE", "OVER", "FILTER", "SAMPLE", "TABLESAMPLE",
})


def _is_domain_clause(body: Sequence[Token], i: int) -> bool:
    """`DOMAIN (` at the top level, after the end of an expression, a table or a clause."""
    tok = body[i]
    if not tok.is_word("DOMAIN") or tok.depth != 0 or i + 1 >= len(body) or not body[i + 1].is_punct("("):
        return False
    prev = body[i - 1] if i > 0 else None
    if prev is None or prev.kind == OPERATOR or (prev.kind == PUNCT and not prev.is_punct(")")):
        return False
    return not (prev.kind == WORD and prev.upper in _BEFORE_EXPRESSION)


@dataclass(frozen=True)
class _Clauses:
    by: tuple[str, ...] | None = None
    verifier: VerifierSpec | None = None
    with_options: tuple[RawOption, ...] | None = None
    domains: Domains | None = None


def _split(text: str, body: Sequence[Token], end: int, statement: str, grammar: str) -> tuple[str, _Clauses]:
    if not body:
        raise UserError(f"{statement} needs a SELECT after it", f"write {grammar}")
    cut = _clause_start(body)
    if cut == 0:
        raise UserError(f"{statement} needs a SELECT before {body[0].text.upper()}", f"write {grammar}")
    select_end = body[cut].start if cut < len(body) else end
    select_text = text[body[0].start:select_end].strip()
    return select_text, _parse_clauses(body[cut:], statement, grammar)


def _parse_clauses(tokens: Sequence[Token], statement: str, grammar: str) -> _Clauses:
    # Per clause keyword: the error when it is given twice, and its parser (tokens, index after
    # the keyword) -> (value, index after the clause).
    clauses: dict[str, tuple[str, str, Callable[[Sequence[Token], int], tuple[Any, int]]]] = {
        "BY": ("BY is given twice", "list all attributes in one BY a, b, c", _parse_by_clause),
        "DOMAIN": ("DOMAIN is given twice", f"declare all domains in one {DOMAIN_EXAMPLE}", parse_domain_clause),
        "USING": ("USING is given twice", "name one verifier: USING lof(k = 20)", _parse_using),
        "WITH": ("WITH (...) is given twice", "put all options in one WITH (a = 1, b = 'x')", _parse_with),
    }
    found: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        word = next((w for w in clauses if tok.is_word(w)), None)
        if word is None:
            raise UserError(
                f"unexpected {tok.text!r} after the SELECT of {statement}",
                f"the SELECT may be followed only by its clauses: {grammar}",
            )
        problem, fix, parse = clauses[word]
        if word in found:
            raise UserError(problem, fix)
        found[word], i = parse(tokens, i + 1)
    return _Clauses(found.get("BY"), found.get("USING"), found.get("WITH"), found.get("DOMAIN"))


def _parse_with(tokens: Sequence[Token], i: int) -> tuple[tuple[RawOption, ...], int]:
    inner, i = _parenthesized(tokens, i, "WITH", "WITH (epsilon = 0.2)")
    return tuple(parse_option_list(inner, "WITH (...)")), i


def _is_clause_keyword(tok: Token, nxt: Token | None = None) -> bool:
    """BY, USING, WITH, or DOMAIN followed by '(' (so an attribute may be named domain)."""
    return tok.is_word("BY", "USING", "WITH") or (tok.is_word("DOMAIN") and nxt is not None and nxt.is_punct("("))


def _parse_by_clause(tokens: Sequence[Token], i: int) -> tuple[tuple[str, ...], int]:
    names: list[str] = []
    while True:
        tok = tokens[i] if i < len(tokens) else None
        if tok is None or tok.kind not in (WORD, QUOTED_IDENT) or _is_clause_keyword(tok, _at(tokens, i + 1)):
            found = "nothing" if tok is None else repr(tok.text)
            raise UserError(
                f"expected an attribute name in BY, found {found}",
                'list column names separated by commas: BY job_title, year (quote odd names: "job title")',
            )
        name = unquote_identifier(tok)
        if not name:
            raise UserError("an attribute name in BY is empty", "remove the empty quotes")
        if name in names:
            raise UserError(f"attribute {name} is named twice in BY", "name each attribute once")
        names.append(name)
        i += 1
        nxt = _at(tokens, i)
        if nxt is None or _is_clause_keyword(nxt, _at(tokens, i + 1)):
            return tuple(names), i
        if not nxt.is_punct(","):
            raise UserError(
                f"unexpected {nxt.text!r} in BY after {tok.text}",
                'separate attribute names with commas; quote names with spaces or symbols: "job title"',
            )
        i += 1


def _at(tokens: Sequence[Token], i: int) -> Token | None:
    return tokens[i] if i < len(tokens) else None


def _parenthesized(tokens: Sequence[Token], i: int, clause: str, example: str) -> tuple[list[Token], int]:
    """The tokens inside the parentheses opening at tokens[i], and the index after them."""
    tok = tokens[i] if i < len(tokens) else None
    if tok is None or not tok.is_punct("("):
        found = "nothing" if tok is None else repr(tok.text)
        raise UserError(f"expected '(' after {clause}, found {found}", f"write {example}")
    for j in range(i + 1, len(tokens)):
        if tokens[j].is_punct(")") and tokens[j].depth == tok.depth:
            inner = tokens[i + 1:j]
            nested = next((t for t in inner if t.kind == PUNCT and t.text in ("(", "[", "{")), None)
            if nested is not None:
                raise UserError(
                    f"unexpected {nested.text!r} inside {clause} (...)",
                    "option values are single literals: numbers, 'strings' or TRUE/FALSE",
                )
            return inner, j + 1
    raise UserError(f"the parenthesis after {clause} is not closed", f"write {example}")


def _parse_using(tokens: Sequence[Token], i: int) -> tuple[VerifierSpec, int]:
    tok = tokens[i] if i < len(tokens) else None
    if tok is None or tok.kind != WORD or _is_clause_keyword(tok, _at(tokens, i + 1)):
        found = "nothing" if tok is None else repr(tok.text)
        raise UserError(
            f"expected a verifier name after USING, found {found}",
            "write USING lof or USING lof(k = 20, threshold = 1.5)",
        )
    name = fold_word(tok.text)
    i += 1
    nxt = tokens[i] if i < len(tokens) else None
    if nxt is None or not nxt.is_punct("("):
        if nxt is not None and not _is_clause_keyword(nxt, _at(tokens, i + 1)):
            raise UserError(
                f"unexpected {nxt.text!r} after USING {tok.text}",
                f"give verifier options in parentheses: USING {name}(name = value, ...)",
            )
        return VerifierSpec(name), i
    inner, i = _parenthesized(tokens, i, f"USING {name}", f"USING {name}(k = 20)")
    raw = parse_option_list(inner, f"USING {name}(...)")
    return VerifierSpec(name, option_tuple(raw)), i


def _with_using_hint(exc: UserError, body: Sequence[Token]) -> UserError:
    """A syntax error near a top-level `USING (` is most likely a verifier without a name."""
    stray = any(
        t.is_word("USING") and t.depth == 0 and i + 1 < len(body) and body[i + 1].is_punct("(")
        for i, t in enumerate(body)
    )
    if stray and exc.problem.startswith("SQL syntax error") and 'near "("' in exc.problem:
        return UserError(exc.problem, "name the verifier before its options: USING lof(k = 20, threshold = 1.5)")
    return exc


def _explain(con: duckdb.DuckDBPyConnection, text: str, body: Sequence[Token], end: int) -> ExplainOutlier:
    select_text, clauses = _split(text, body, end, "EXPLAIN OUTLIER", EXPLAIN_GRAMMAR)
    try:
        query = parse_select(con, select_text, multiple=False)
    except UserError as exc:
        raise _with_using_hint(exc, body) from None
    opts = check_options(clauses.with_options or (), EXPLAIN_OPTIONS, "WITH (...)")
    if "start" in opts:
        parse_start_predicate(con, str(opts["start"]), clauses.by)
    if clauses.domains is not None and clauses.by is not None:
        outside = [name for name, _ in clauses.domains if name not in clauses.by]
        if outside:
            raise UserError(
                f"DOMAIN declares {outside[0]}, which is not among the BY attributes",
                f"add {outside[0]} to BY, or drop its declaration",
            )
    return ExplainOutlier(
        text=text, query=query, by=clauses.by, verifier=clauses.verifier, given=tuple(opts.items()),
        domains=clauses.domains,
    )


def _identify(con: duckdb.DuckDBPyConnection, text: str, body: Sequence[Token], end: int) -> IdentifyAnomaly:
    if body and body[0].is_word("VALUE"):
        raise UserError("IDENTIFY ANOMALY VALUE asks about a point of a registered dataset: an analyst's statement",
                        "send it through Owner.analyst().sql(...) or the analyst service; the owner asks by key: "
                        "IDENTIFY ANOMALY SELECT <columns> FROM <relation> WHERE <selector> WITH (...)")
    select_text, clauses = _split(text, body, end, "IDENTIFY ANOMALY", IDENTIFY_GRAMMAR)
    if clauses.by is not None:
        raise UserError("IDENTIFY ANOMALY takes no BY clause", f"write {IDENTIFY_GRAMMAR}")
    if clauses.verifier is not None:
        raise UserError("IDENTIFY ANOMALY takes no USING clause", f"write {IDENTIFY_GRAMMAR}")
    if clauses.domains is not None:
        raise UserError(
            "IDENTIFY ANOMALY takes no DOMAIN clause: an anomaly answer uses no contexts",
            f"write {IDENTIFY_GRAMMAR}",
        )
    query = parse_select(con, select_text, multiple=True)
    opts = check_options(clauses.with_options or (), IDENTIFY_OPTIONS, "WITH (...)")
    missing = [name for name in IDENTIFY_REQUIRED if name not in opts]
    if missing:
        raise UserError(
            f"IDENTIFY ANOMALY needs {', '.join(missing)} in WITH (...)",
            "write e.g. WITH (beta = 5, radius = 1000, epsilon = 0.5)",
        )
    k = opts.get("k")
    if k is not None and k > float(opts["beta"]) + 1:
        raise UserError(f"k must be between 1 and beta + 1 = {float(opts['beta']) + 1:g}, got {k}", "lower k or raise beta")
    return IdentifyAnomaly(text=text, query=query, given=tuple(opts.items()))
