"""Compact text forms the CLI takes: `--by a,b,c` and `--domain 'job_title=Nurse|Professor'`.

`--by`: names separated by commas; a name with a comma or surrounding spaces is written in
double quotes ("" for a quote inside). `--domain`: `attr=v1|v2|...`, several declarations
separated by `;`; a value holding `|`, `;`, `=` or surrounding spaces is written in single
quotes ('' for a quote inside), an attribute name in double quotes. Values stay strings: the
engine converts them to the column's type.
"""

from __future__ import annotations

from typing import Iterable

from pcor_sql.errors import UserError

_BY_FIX = 'write attribute names separated by commas, e.g. --by job_title,year (quote odd names: \'"job, title"\')'
_DOMAIN_FIX = "write attr=v1|v2|v3 (several: a=x|y;b=1|2; quote values holding | ; = in single quotes: 'a|b')"


class _Scanner:
    def __init__(self, text: str, what: str, fix: str):
        self.text, self.i, self.what, self.fix = text, 0, what, fix

    def error(self, problem: str) -> UserError:
        return UserError(f"{self.what}: {problem}", self.fix)

    def at_end(self) -> bool:
        return self.i >= len(self.text)

    def peek(self) -> str:
        return self.text[self.i] if self.i < len(self.text) else ""

    def skip_spaces(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def quoted(self, quote: str) -> str:
        """The quoted run at the cursor (doubled quotes stand for one), cursor after it."""
        start = self.i
        self.i += 1
        out = []
        while self.i < len(self.text):
            c = self.text[self.i]
            if c == quote:
                if self.text.startswith(quote * 2, self.i):
                    out.append(quote)
                    self.i += 2
                    continue
                self.i += 1
                return "".join(out)
            out.append(c)
            self.i += 1
        raise self.error(f"unterminated quote starting at {self.text[start:start + 15]!r}")

    def item(self, stops: str, quote: str) -> tuple[str, bool]:
        """One item up to a stop character: quoted (exactly) or bare (stripped)."""
        self.skip_spaces()
        if self.peek() == quote:
            value = self.quoted(quote)
            self.skip_spaces()
            if not self.at_end() and self.peek() not in stops:
                raise self.error(f"unexpected {self.peek()!r} after the quoted {value!r}")
            return value, True
        start = self.i
        while not self.at_end() and self.peek() not in stops:
            if self.peek() == quote:
                raise self.error(f"a quote inside {self.text[start:self.i + 1]!r}; quote the whole item")
            self.i += 1
        return self.text[start:self.i].strip(), False


def parse_by(text: str) -> tuple[str, ...]:
    """`"a,b,c"` → ("a", "b", "c"). Errors for an empty list, an empty name or a repeat."""
    if not isinstance(text, str) or not text.strip():
        raise UserError("--by is empty", _BY_FIX)
    scan = _Scanner(text, "--by", _BY_FIX)
    names: list[str] = []
    while True:
        name, quoted = scan.item(",", '"')
        if not name:
            raise scan.error("an attribute name is empty" if quoted else "an attribute name is missing (two commas, or a comma at an end)")
        if name in names:
            raise scan.error(f"{name!r} is named twice")
        names.append(name)
        if scan.at_end():
            return tuple(names)
        scan.i += 1  # the comma


def _declarations(scan: _Scanner) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    while True:
        scan.skip_spaces()
        if scan.at_end():
            if not out:
                raise scan.error("no declaration")
            return out
        name, _ = scan.item("=;|", '"')
        if not name:
            raise scan.error("an attribute name is missing")
        if scan.peek() != "=":
            raise scan.error(f"expected '=' after the attribute {name!r}")
        scan.i += 1
        values: list[str] = []
        while True:
            value, quoted = scan.item("|;=", "'")
            if scan.peek() == "=":
                raise scan.error(f"unexpected '=' in the values of {name!r}; quote values holding '=': 'a=b'")
            if not value and not quoted:
                raise scan.error(f"an empty value in the domain of {name!r} (two '|', or one at an end)")
            if value in values:
                raise scan.error(f"the value {value!r} is listed twice for {name!r}")
            values.append(value)
            if scan.peek() == "|":
                scan.i += 1
                continue
            break
        out.append((name, values))
        if scan.peek() == ";":
            scan.i += 1


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
            raise UserError("--domain is empty", _DOMAIN_FIX)
        for name, values in _declarations(_Scanner(text, "--domain", _DOMAIN_FIX)):
            if name in out:
                raise UserError(f"--domain: the domain of {name!r} is declared twice", "declare each attribute once")
            out[name] = values
    return out
