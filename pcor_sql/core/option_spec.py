"""Options declared once (harlequin's habit): one `OptionSpec` per option gives its name, type,
default, help, who may set it, and how each caller spells it — the CLI flag, the statement's
`WITH (name = ...)` or clause, the Python keyword. The CLI parameters, the statements' option
lists, the analyst's allow-list and the error hints are all generated from the specs.

Search options are declared by the search that reads them (`core.searches.SearchSpec.options`);
the request-wide ones by `pcor_sql.request_specs`. A new search option is one spec next to its
search, and nothing else.
"""

from __future__ import annotations

import enum
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Sequence

from pcor_sql.errors import UserError, register_spelling


class StrEnum(str, enum.Enum):
    """A closed set of names that still compares, prints and serialises as its text (so outputs
    and ledgers keep their strings) — `enum.StrEnum` of Python 3.11, for 3.10 too."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(m.value for m in cls)


class Who(StrEnum):
    """Who may set an option: the owner only, or an analyst too (the owner may set every one)."""

    OWNER = "owner"
    ANALYST = "analyst"


class Kind(StrEnum):
    """A value's type as every caller writes it."""

    NUMBER = "number"
    INTEGER = "integer"
    STRING = "string"
    BOOLEAN = "boolean"
    #: Structured values with their own parsers (a list of names, a selection, a verifier spec):
    #: never a `WITH (...)` literal, checked by the request.
    STRUCTURED = "structured"


@dataclass(frozen=True)
class OptionSpec:
    """One option. `example` is the value as written in a statement (`0.2`, `'bfs'`, `TRUE`);
    `sql` is "with" for `WITH (name = value)`, a clause keyword (`BY`, `DOMAIN`, `USING`), or
    None when statements cannot set it; `cli` is the flag (None: no flag of its own).
    `in_result` shows the value in a release's JSON (stable keys); `searches` names the
    searches that read it (empty: every request reads it)."""

    name: str
    kind: Kind
    default: Any
    help: str
    example: str
    who: Who = Who.ANALYST
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    minimum_inclusive: bool = True
    #: The largest value any caller may give (DESIGN.md §8 "Bounded work": every numeric option
    #: has one, enforced alike on the CLI, in Python, in statements and over HTTP).
    maximum: float | None = None
    sql: str | None = "with"
    cli: str | None = field(default="")
    searches: tuple[str, ...] = ()
    in_result: bool = False
    #: None is a value of its own (e.g. "no limit"), not "use the default".
    nullable: bool = False

    def __post_init__(self) -> None:
        if self.choices:
            choice_pattern(self.choices)  # a choice must be a lower-case ASCII word (the spelling rule)
        if self.cli == "":
            object.__setattr__(self, "cli", "--" + self.name.replace("_", "-"))
        if self.kind in (Kind.NUMBER, Kind.INTEGER) and self.maximum is None:
            raise TypeError(f"option {self.name!r} is numeric and declares no maximum (DESIGN.md §8 'Bounded work')")
        register_spelling(self.name, self.cli, self.sql)

    @property
    def flag(self) -> str | None:
        return self.cli

    def check(self, value: Any) -> Any:
        """`value` validated by exact type (a bool is not a number, a float not a count); a
        number of kind NUMBER comes back as a float, a choice as its text."""
        name, got = self.name, _shown(value)
        if value is None:
            if self.default is None or self.nullable:
                return None
            raise UserError(f"{name} needs a value", f"e.g. {self.hint()}")
        if self.kind is Kind.BOOLEAN:
            if type(value) is not bool:
                raise UserError(f"{name} must be true or false, got {got}", f"e.g. {self.hint()}")
            return value
        if self.kind is Kind.STRING:
            if not isinstance(value, str):
                raise UserError(f"{name} must be text, got {got}", f"e.g. {self.hint()}")
            text = str.__str__(value)
            problem = text_problem(text)
            if problem:
                raise UserError(f"{name} {problem}", "send valid Unicode text without NUL characters")
            return parse_choice(name, text, self.choices) if self.choices else text
        if self.kind is Kind.STRUCTURED:
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise UserError(f"{name} must be a number, got {got}", f"e.g. {self.hint()}")
        if self.kind is Kind.INTEGER:
            if not isinstance(value, numbers.Integral):
                raise UserError(f"{name} must be a whole number, got {got}", f"e.g. {self.hint()}")
            value = int(value)
        else:
            try:
                value = float(value)
            except OverflowError:
                raise UserError(f"{name} is too large: {got}", f"e.g. {self.hint()}") from None
            if not math.isfinite(value):
                raise UserError(f"{name} must be finite, got {got}", f"e.g. {self.hint()}")
        return self.bounded(value, f"e.g. {self.hint()}")

    def choice_pattern(self) -> str:
        """The JSON Schema `pattern` of the spellings `check` accepts (see `choice_pattern`)."""
        return choice_pattern(self.choices)

    def bounded(self, value: Any, fix: str) -> Any:
        """`value` if it respects the spec's bounds, else a UserError with `fix`."""
        low, high = self.minimum, self.maximum
        if low is not None and (value < low or (value == low and not self.minimum_inclusive)):
            bound = f"≥ {low:g}" if self.minimum_inclusive else f"> {low:g}"
            raise UserError(f"{self.name} must be {bound}, got {_short(value)}", fix)
        if high is not None and value > high:
            raise UserError(f"{self.name} must be ≤ {_number(high)}, got {_short(value)}",
                            f"give at most {_number(high)} ({self.name} is bounded so that no request is unbounded work)")
        return value


    def hint(self) -> str:
        from pcor_sql.errors import option_hint

        return option_hint(self.name, self.example)


# ---- the spelling rule of every option with a fixed set of values (DESIGN.md §6) ---------------
#
# One rule, applied by the spec on the CLI, in Python, in statements and over HTTP: a word is
# accepted in any mix of ASCII upper and lower case and means its canonical lower-case choice;
# nothing else is folded — no surrounding spaces, no Unicode case mapping (`"\u212a".lower()` is
# "k" and `"\u017f".casefold()` is "s": a look-alike would otherwise name a choice in one
# interface and not in another).

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold_word(text: str) -> str:
    """`text` with its ASCII letters in lower case, every other character as it is."""
    return text.translate(_ASCII_LOWER)


def parse_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """The canonical choice `value` spells (one of `choices`, in any ASCII case), else a
    UserError naming the accepted values."""
    if isinstance(value, str):
        text = str.__str__(value)
        for choice in choices:
            if fold_word(text) == str(choice):
                return str(choice)
    shown = repr(str.__str__(value)) if isinstance(value, str) else repr(value)
    raise UserError(f"unknown {name} {shown}", f"use one of: {', '.join(map(str, choices))} (in any case)")


def one_of(names: Sequence[Any]) -> str:
    """'a, b or c': choices named in a help text or a refusal, from their declaration."""
    shown = [str(n) for n in names]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def choice_pattern(choices: tuple[str, ...]) -> str:
    """A regular expression (ECMA 262 and Python alike) matching exactly the spellings
    `parse_choice` accepts: each ASCII letter as `[Xx]`, every other character as itself."""
    def word(choice: str) -> str:
        if not all(c.isascii() and (c.isalnum() or c in "-_") for c in choice) or fold_word(choice) != choice:
            raise TypeError(f"choice {choice!r} is not a lower-case ASCII word")
        return "".join(f"[{c.upper()}{c}]" if c.isalpha() else c for c in choice)

    return "^(?:" + "|".join(word(str(c)) for c in choices) + ")$"


def text_problem(text: str) -> str | None:
    """What makes `text` unfit to cross into SQL or a response (DESIGN.md §8 "Inputs are
    exact"), or None: a NUL ends C strings early, and a lone surrogate (JSON's `\\udfff`) cannot
    be encoded as UTF-8 — by DuckDB, by a response, by a log."""
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (it holds a lone surrogate such as \\udfff)"
    return None


def _number(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e18 else f"{x:g}"


def _short(value: Any) -> str:
    """A number as an error may show it: a huge integer by its size, not its thousand digits."""
    if isinstance(value, int) and abs(value) >= 10**18:
        return f"a {len(str(abs(value)))}-digit number"
    return repr(value)


def _shown(value: Any) -> str:
    return f"the string {str.__str__(value)!r}" if isinstance(value, str) else repr(value)
