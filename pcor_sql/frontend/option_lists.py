"""Option lists: `WITH (name = value, ...)`, `USING verifier(name = value, ...)`, and the same
verifier spec as text (`--verifier 'lof(k=20)'`, the API's `verifier="lof(k=20)"`).

Values are numbers, single-quoted strings or TRUE/FALSE — never expressions, so nothing in
an option can reach SQL as code: a string option stays a Python string from here on.
Names are case-insensitive words. Each statement declares its options (`OptionSpec`): an
unknown, repeated, mistyped or out-of-range option is a UserError naming it and the fix.
A verifier's options are checked by the verifier registry instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence, Union

from pcor_sql.errors import InternalError, UserError
from pcor_sql.core.option_spec import OptionSpec, fold_word
from pcor_sql.request_specs import Job, statement_specs
from pcor_sql.sqltext.tokens import (
    NUMBER,
    OPERATOR,
    QUOTED_IDENT,
    STRING,
    WORD,
    Token,
    significant,
    tokenize,
    unquote_string,
)

OptionValue = Union[int, float, str, bool]

NUMBER_KIND = "number"
INTEGER_KIND = "integer"
STRING_KIND = "string"
BOOLEAN_KIND = "boolean"


@dataclass(frozen=True)
class RawOption:
    """`name = value` as written; `token` locates it for messages."""

    name: str
    value: OptionValue
    token: Token


#: The `WITH (...)` options of each statement, generated from the option specs.
EXPLAIN_OPTIONS = statement_specs(Job.EXPLAIN)
IDENTIFY_OPTIONS = statement_specs(Job.IDENTIFY)


def _shown(token: Token | None) -> str:
    return "the end of the statement" if token is None else repr(token.text)


def _value(tokens: Sequence[Token], i: int, name: str) -> tuple[OptionValue, int]:
    """The literal value starting at tokens[i] and the index after it."""
    tok = tokens[i] if i < len(tokens) else None
    if tok is None or tok.is_punct(",") or tok.is_punct(")"):
        raise UserError(f"option {name} has no value", f"write {name} = <value>")
    sign = 1
    if tok.kind == OPERATOR and tok.text in ("+", "-"):
        sign = -1 if tok.text == "-" else 1
        i += 1
        tok = tokens[i] if i < len(tokens) else None
        if tok is None or tok.kind != NUMBER:
            raise UserError(f"option {name} has a sign but no number after it", f"write e.g. {name} = 0.5")
    if tok.kind == NUMBER:
        text = tok.text
        try:
            number: int | float = float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError:
            raise UserError(f"option {name} has a malformed number {text!r}", f"write e.g. {name} = 0.5") from None
        return sign * number, i + 1
    if tok.kind == STRING:
        if not tok.text.startswith("'"):
            raise UserError(
                f"option {name} uses a special string form {tok.text[:12]!r}",
                "write the value as a plain single-quoted string: 'text' (quotes inside doubled: 'it''s')",
            )
        return unquote_string(tok), i + 1
    if tok.kind == QUOTED_IDENT:
        raise UserError(
            f"the value of {name} is in double quotes, which SQL reads as a name",
            f"write it in single quotes: {name} = '{tok.text[1:-1]}'",
        )
    if tok.is_word("TRUE", "FALSE"):
        return tok.upper == "TRUE", i + 1
    if tok.kind == WORD:
        raise UserError(
            f"the value of {name} must be a number, a quoted string or TRUE/FALSE, got the bare word {tok.text!r}",
            f"quote it: {name} = '{tok.text}'",
        )
    raise UserError(
        f"option {name} has an unsupported value starting at {tok.text!r}",
        "values are numbers, single-quoted strings or TRUE/FALSE (no expressions)",
    )


def parse_literal(tokens: Sequence[Token], i: int, name: str) -> tuple[OptionValue, int]:
    """The literal starting at tokens[i] — a signed number, a 'string' or TRUE/FALSE, never
    an expression — and the index after it; `name` is what the value is for, in messages."""
    return _value(tokens, i, name)


def parse_option_list(tokens: Sequence[Token], where: str) -> list[RawOption]:
    """`name = value, ...` (the tokens between the parentheses; none is allowed)."""
    options: list[RawOption] = []
    seen: set[str] = set()
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.kind != WORD:
            raise UserError(
                f"expected an option name in {where}, found {tok.text!r}",
                "write options as name = value, separated by commas",
            )
        name = fold_word(tok.text)
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if nxt is None or not (nxt.kind == OPERATOR and nxt.text == "="):
            raise UserError(f"expected '=' after option {tok.text} in {where}, found {_shown(nxt)}", f"write {tok.text} = <value>")
        value, i = _value(tokens, i + 2, name)
        if name in seen:
            raise UserError(f"option {name} is given twice in {where}", "give each option once")
        seen.add(name)
        options.append(RawOption(name, value, tok))
        if i < len(tokens):
            if not tokens[i].is_punct(","):
                raise UserError(
                    f"expected ',' or ')' after the value of {name} in {where}, found {tokens[i].text!r}",
                    "separate options with commas; values are single literals (no expressions)",
                )
            i += 1
            if i >= len(tokens):
                raise UserError(f"{where} ends with a comma", "remove the trailing comma")
    return options


def _check_kind(spec: OptionSpec, value: OptionValue) -> OptionValue:
    kind = spec.kind
    example = f"{spec.name} = {spec.example}"  # as written in WITH (...)
    got = f"the string '{value}'" if isinstance(value, str) else repr(value)
    if kind == BOOLEAN_KIND:
        if not isinstance(value, bool):
            raise UserError(f"{spec.name} must be TRUE or FALSE, got {got}", f"write {example}")
        return value
    if kind == STRING_KIND:
        if not isinstance(value, str):
            raise UserError(f"{spec.name} must be a single-quoted string, got {got}", f"write {example}")
        if "\x00" in value:
            raise UserError(f"{spec.name} contains a NUL character", "remove it")
        # A fixed-value option is parsed by its spec, as on the CLI, in Python and over HTTP (DESIGN.md §6).
        return spec.check(value) if spec.choices else value
    if isinstance(value, (bool, str)):
        hint = " without quotes" if isinstance(value, str) else ""
        raise UserError(f"{spec.name} must be a number, got {got}", f"write {example}{hint}")
    if kind == INTEGER_KIND and not isinstance(value, int):
        raise UserError(f"{spec.name} must be a whole number, got {value!r}", f"write {example}")
    if kind not in (NUMBER_KIND, INTEGER_KIND):
        raise InternalError(f"unknown option kind {kind!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{spec.name} must be finite, got {value!r}", f"write {example}")
    spec.bounded(value, f"write e.g. {example}")
    return float(value) if kind == NUMBER_KIND else value


def check_options(raw: Sequence[RawOption], specs: Sequence[OptionSpec], where: str) -> dict[str, OptionValue]:
    """Validate parsed options against a statement's specs; numbers of kind `number` become floats."""
    by_name: Mapping[str, OptionSpec] = {s.name: s for s in specs}
    out: dict[str, OptionValue] = {}
    for opt in raw:
        spec = by_name.get(opt.name)
        if spec is None:
            known = ", ".join(s.name for s in specs)
            raise UserError(f"unknown option '{opt.name}' in {where}", f"known options: {known}")
        out[opt.name] = _check_kind(spec, opt.value)
    return out


def option_tuple(raw: Sequence[RawOption]) -> tuple[tuple[str, OptionValue], ...]:
    return tuple((o.name, o.value) for o in raw)


_SPEC_FIX = "write it like lof(k = 20, threshold = 1.5)"


def parse_verifier_spec(text: str) -> tuple[str, dict[str, OptionValue]]:
    """A verifier spec as text → (name, options): `lof(k = 20, threshold = 1.5)` →
    ("lof", {"k": 20, "threshold": 1.5}); `lof` and `lof()` → ("lof", {}).

    The same grammar as `USING lof(...)` in a statement (it is `parse_option_list`): values are
    numbers, single-quoted strings ('it''s') or TRUE/FALSE; the name and option names are
    case-insensitive and returned lower-cased. Bad text is a UserError naming the spec; whether
    the verifier and its options exist is the verifier registry's to check (`make(name, **options)`)."""
    if not isinstance(text, str):
        raise UserError(f"verifier spec {text!r} is not text", _SPEC_FIX)
    try:
        return _verifier_spec(significant(tokenize(text)))
    except UserError as exc:
        raise UserError(f"cannot read verifier spec {text!r}: {exc.problem}", exc.fix or _SPEC_FIX) from None


def _verifier_spec(tokens: Sequence[Token]) -> tuple[str, dict[str, OptionValue]]:
    if not tokens:
        raise UserError("it is empty", _SPEC_FIX)
    if tokens[0].kind != WORD:
        raise UserError(f"it must start with a verifier name, found {tokens[0].text!r}", _SPEC_FIX)
    name = fold_word(tokens[0].text)
    if len(tokens) == 1:
        return name, {}
    if not tokens[1].is_punct("("):
        raise UserError(f"expected '(' after {tokens[0].text}, found {tokens[1].text!r}", _SPEC_FIX)
    close = next((j for j, t in enumerate(tokens) if t.is_punct(")") and t.depth == tokens[1].depth), None)
    if close is None:
        raise UserError("the parenthesis is not closed", f"write {name}(k = 20)")
    if close != len(tokens) - 1:
        raise UserError(f"unexpected {tokens[close + 1].text!r} after ')'", "end the spec with its ')'")
    return name, dict(option_tuple(parse_option_list(tokens[2:close], f"{name}(...)")))
