"""SQL text for the benchmarks' own fixed names and values (the library's quoting is internal)."""

from __future__ import annotations


def ident(name: str) -> str:
    """`name` as a double-quoted identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(value: str) -> str:
    """`value` as a single-quoted string literal."""
    return "'" + value.replace("'", "''") + "'"


def id_list(ids: object) -> str:
    """Integer ids as the inside of `IN (...)`."""
    return ", ".join(str(int(i)) for i in ids)  # type: ignore[attr-defined]
