"""Compact text forms the CLI takes: `--by a,b,c`, `--domain 'job_title=Nurse|Professor'` and
`--bins age=18,25,35,45` (bin edges of an ordinal attribute, or `age=auto:5`).

`--by`: names separated by commas; a name with a comma or surrounding spaces is written in
double quotes ("" for a quote inside). `--domain`: `attr=v1|v2|...`, several declarations
separated by `;`; a value holding `|`, `;`, `=` or surrounding spaces is written in single
quotes ('' for a quote inside), an attribute name in double quotes. Values stay strings: the
engine converts them to the column's type.

`--bins`: `attr=e1,e2,...` (several separated by `;`), edges as numbers, dates or
-inf/inf at the ends; `attr=auto:K` asks for K quantile bins from the data.

The forms are read with the SQL tokenizer, item by item (a name and a value quote
differently), so a quoted item follows SQL's quoting rules.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Sequence

from pcor_sql.core.bins import Bins, parse_bins
from pcor_sql.errors import UserError, option_hint, option_name
from pcor_sql.sqltext.tokens import (
    QUOTED_IDENT,
    STRING,
    Token,
    Unterminated,
    significant,
    tokenize,
    unquote_identifier,
    unquote_string,
)


def _by_fix() -> str:
    return f"write attribute names separated by commas, e.g. {option_hint('by', 'job_title,year')} (quote odd names: '\"job, title\"')"


_DOMAIN_FIX = "write attr=v1|v2|v3 (several: a=x|y;b=1|2; quote values holding | ; = in single quotes: 'a|b')"
# An item whose quote is never closed: the tokenizer stops there, the parse reports it in place.
_OPEN_QUOTE = "open_quote"
_SEPARATOR = "separator"
_QUOTED = (QUOTED_IDENT, STRING, _OPEN_QUOTE)


@dataclasses.dataclass(frozen=True)
class _Form:
    what: Callable[[], str]  # the option as the caller names it: `--by` on the command line, `by` from Python
    fix: Callable[[], str]
    separators: str

    def error(self, problem: str) -> UserError:
        return UserError(f"{self.what()}: {problem}", self.fix())

    def item(self, text: str, pos: int, quote: str) -> tuple[str, bool, str, int]:
        """The item starting at text[pos], in which only `quote` quotes: (its value, whether it
        was quoted, the separator after it or "" at the end, the position after that)."""
        tokens = self._tokens(text, pos, quote)
        cut = next((k for k, t in enumerate(tokens) if t.kind == _SEPARATOR), len(tokens))
        value, quoted = self._value(text, tokens[:cut], QUOTED_IDENT if quote == '"' else STRING)
        if cut == len(tokens):
            return value, quoted, "", len(text)
        return value, quoted, tokens[cut].text, tokens[cut].end

    def attribute(self, text: str, pos: int) -> tuple[str, int]:
        """The attribute name starting at text[pos] and the position after the '=' that must
        follow it."""
        name, _, separator, pos = self.item(text, pos, '"')
        if not name:
            raise self.error("an attribute name is missing")
        if separator != "=":
            raise self.error(f"expected '=' after the attribute {name!r}")
        return name, pos

    def listed(self, text: str, pos: int, name: str, noun: str, whose: str, equals_fix: str = "",
               unique: bool = False) -> tuple[list[str], int]:
        """The values after `name=` up to the end of its declaration (the list separator is the
        form's second), and the position after them; `unique`: a value listed twice is an error."""
        between = self.separators[1]
        out: list[str] = []
        separator = between
        while separator == between:
            value, quoted, separator, pos = self.item(text, pos, "'")
            if separator == "=":
                raise self.error(f"unexpected '=' in the {noun}s of {name!r}{equals_fix}")
            if not value and not quoted:
                raise self.error(f"an empty {noun} in the {whose} of {name!r} (two '{between}', or one at an end)")
            if unique and value in out:
                raise self.error(f"the value {value!r} is listed twice for {name!r}")
            out.append(value)
        return out, pos

    def _tokens(self, text: str, pos: int, quote: str) -> list[Token]:
        """The SQL tokens of text[pos:], placed in `text`. Only the separators and `quote` mean
        anything here: every other character is lexed as `_`, so that free text such as
        `dept's` or `1--5` opens no SQL string or comment."""
        lexable = "".join(c if c in self.separators or c == quote or c.isspace() else "_" for c in text[pos:])
        try:
            found, opened = significant(tokenize(lexable)), []
        except Unterminated as exc:
            found = significant(tokenize(lexable[:exc.start]))
            opened = [Token(_OPEN_QUOTE, text[pos + exc.start:], pos + exc.start, len(text), 0)]
        out: list[Token] = []
        for tok in found:
            start = pos + tok.start
            if tok.kind not in _QUOTED and set(tok.text) <= set(self.separators):
                # DuckDB lexes a run like `||` or `=|` as one operator: each character separates.
                out.extend(Token(_SEPARATOR, c, start + k, start + k + 1, 0) for k, c in enumerate(tok.text))
            else:
                out.append(Token(tok.kind, text[start:pos + tok.end], start, pos + tok.end, 0))
        return out + opened

    def _value(self, text: str, tokens: Sequence[Token], kind: str) -> tuple[str, bool]:
        """A single quoted token of `kind` (its value, exactly) or bare text (stripped)."""
        if not tokens:
            return "", False
        first = tokens[0]
        if first.kind == _OPEN_QUOTE:
            raise self.error(f"unterminated quote starting at {first.text[:15]!r}")
        if first.kind == kind:
            value = unquote_identifier(first) if kind == QUOTED_IDENT else unquote_string(first)
            if len(tokens) > 1:
                raise self.error(f"unexpected {text[tokens[1].start]!r} after the quoted {value!r}")
            return value, True
        quote = next((t for t in tokens if t.kind in _QUOTED), None)
        if quote is not None:
            raise self.error(f"a quote inside {text[first.start:quote.start + 1]!r}; quote the whole item")
        return text[first.start:tokens[-1].end].strip(), False


_BY = _Form(lambda: option_name("by").removesuffix("=..."), _by_fix, ",")
_DOMAIN = _Form(lambda: "--domain", lambda: _DOMAIN_FIX, "=|;")  # a form only the command line takes
_BINS_FIX = "write attr=e1,e2,e3 (edges in increasing order, -inf/inf allowed at the ends; several: a=1,2,3;b=0,10) or attr=auto:5"
_BINS = _Form(lambda: "--bins", lambda: _BINS_FIX, "=,;")


def parse_by(text: str) -> tuple[str, ...]:
    """`"a,b,c"` → ("a", "b", "c"). Errors for an empty list, an empty name or a repeat."""
    if not isinstance(text, str) or not text.strip():
        raise _BY.error("it is empty")
    names: list[str] = []
    pos = 0
    while True:
        name, quoted, separator, pos = _BY.item(text, pos, '"')
        if not name:
            raise _BY.error("an attribute name is empty" if quoted else "an attribute name is missing (two commas, or a comma at an end)")
        if name in names:
            raise _BY.error(f"{name!r} is named twice")
        names.append(name)
        if not separator:
            return tuple(names)


def _declarations(text: str) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    pos = 0
    while True:
        if not text[pos:].strip():
            if not out:
                raise _DOMAIN.error("no declaration")
            return out
        name, pos = _DOMAIN.attribute(text, pos)
        values, pos = _DOMAIN.listed(text, pos, name, "value", "domain", "; quote values holding '=': 'a=b'", unique=True)
        out.append((name, values))


def parse_domain_declaration(text: str) -> tuple[str, list[str]]:
    """`"job_title=Nurse|Professor"` → ("job_title", ["Nurse", "Professor"]): exactly one."""
    found = parse_domain_declarations(text)
    if len(found) != 1:
        raise UserError(
            f"--domain: expected one declaration, found {len(found)}",
            "declare one attribute here, or use parse_domain_declarations for several",
        )
    name, values = next(iter(found.items()))
    return name, values


def parse_domain_declarations(texts: str | Iterable[str]) -> dict[str, list[str]]:
    """One or more texts, each `a=x|y[;b=1|2...]`, merged into attribute → values (in the
    order declared). An attribute declared twice is an error."""
    if isinstance(texts, str):
        texts = [texts]
    out: dict[str, list[str]] = {}
    for text in texts:
        if not isinstance(text, str) or not text.strip():
            raise _DOMAIN.error("it is empty")
        for name, values in _declarations(text):
            if name in out:
                raise UserError(f"--domain: the domain of {name!r} is declared twice", "declare each attribute once")
            out[name] = values
    return out


def parse_bins_declarations(texts: str | Iterable[str]) -> dict[str, Bins]:
    """One or more texts, each `age=18,25,35[;b=0,10...]` or `age=auto:5`, merged into
    attribute → Bins (edges as text: numbers become numbers, dates stay text for the engine)."""
    if isinstance(texts, str):
        texts = [texts]
    out: dict[str, Bins] = {}
    for text in texts:
        if not isinstance(text, str) or not text.strip():
            raise _BINS.error("it is empty")
        pos = 0
        while text[pos:].strip():
            name, pos = _BINS.attribute(text, pos)
            if name in out:
                raise UserError(f"--bins: the bins of {name!r} are declared twice", "declare each attribute once")
            edges, pos = _BINS.listed(text, pos, name, "edge", "bins")
            out[name] = parse_bins(edges[0] if len(edges) == 1 else edges, name)
        if not out:
            raise _BINS.error("no declaration")
    return out
