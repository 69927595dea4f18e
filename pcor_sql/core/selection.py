"""A user's selection of context attributes and values matched against what is declared: names
as SQL identifiers (case-insensitive when unambiguous), values as text in a declared domain."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pcor_sql.errors import UserError


def domain_indices(name: str, domain: Sequence[Any], wanted: Sequence[Any], which: str = "declared",
                   fix: str = "use a declared value or extend the domain declaration") -> list[int]:
    """Positions in `domain` of the `wanted` values, matched as text (as SQL literals and
    registered domains are written); a value outside it is the error naming `which` domain."""
    index = {str(v): j for j, v in enumerate(domain)}
    out = []
    for v in wanted:
        j = index.get(str(v))
        if j is None:
            raise UserError(f"{v!r} is not in the {which} domain of {name!r}", fix)
        out.append(j)
    return out


def resolve_name(name: str, attributes: Sequence[str], what: str) -> str:
    """`name` spelled as in `attributes`: exact, else the one case-insensitive match (SQL
    identifiers ignore case); otherwise a UserError naming the attributes."""
    if name in attributes:
        return name
    folded = [a for a in attributes if a.casefold() == name.casefold()]
    if len(folded) == 1:
        return folded[0]
    known = ", ".join(attributes) if attributes else "(none)"
    raise UserError(f"{what} names {name!r}, which is not a context attribute", f"attributes are: {known}")


def resolve_selection(
    selection: Mapping[str, Sequence[Any]], attributes: Sequence[str], what: str
) -> dict[str, list[Any]]:
    """A selection keyed by names as the user wrote them, re-keyed as `attributes` spell them."""
    out: dict[str, list[Any]] = {}
    for name, values in selection.items():
        key = resolve_name(name, attributes, what)
        if key in out:
            raise UserError(f"{what} constrains {key} twice", f"list all its values once: {key} IN (...)")
        out[key] = list(values)
    return out
