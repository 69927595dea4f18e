"""Contexts as bitsets over declared domains (PCOR paper §3, DESIGN.md §2).

A context is a t-bit integer: attribute i owns bits [offset_i, offset_i + |dom(A_i)|), bit
offset_i + j set means value j of dom(A_i) is selected. Python ints are the compact value
type on the hot path; `Context` wraps one with its space for display.

Any width: Python ints have no fixed size, so a space of 70 or 500 values works like one of
20 (there used to be a cap of 64 free bits). Only the searches that enumerate every
admissible context — `direct` and the owner's COE — stop at a size (`engine.coe.check_size`).
There is no separate fast path for ≤ 64 bits because none is needed: `neighbours()` costs
~60 ns per free bit at 57 bits and ~90–160 ns at 66 and 497 (`python -m benchmarks scale`,
lattice table), against ~10² µs for one verifier check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from pcor_sql.errors import InternalError, UserError, option_hint

@dataclass(frozen=True)
class Attribute:
    """A context attribute: a column name and its declared, ordered domain."""

    name: str
    domain: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not self.domain:
            raise UserError(
                f"attribute {self.name!r} has an empty domain",
                "declare at least one value for it",
            )
        if len(set(self.domain)) != len(self.domain):
            raise UserError(
                f"the domain of {self.name!r} lists a value twice",
                "declare each value once",
            )


class ContextSpace:
    """The lattice of contexts over some attributes, anchored at a record V.

    `anchor[i]` is the index of V's value in dom(A_i). Admissible contexts contain every
    anchor bit; the search moves by flipping one of the t − m free bits.
    """

    def __init__(self, attributes: Sequence[Attribute], anchor: Sequence[int]):
        if len(attributes) != len(anchor):
            raise InternalError("anchor length differs from the number of attributes")
        if not attributes:
            raise UserError("no context attributes", f"name them with {option_hint('by', 'a,b', sql='a, b')}")
        self.attributes = tuple(attributes)
        self.anchor = tuple(int(a) for a in anchor)
        offsets, total = [], 0
        for attr, a in zip(self.attributes, self.anchor):
            if not 0 <= a < len(attr.domain):
                raise InternalError(f"anchor index {a} outside the domain of {attr.name}")
            offsets.append(total)
            total += len(attr.domain)
        self.offsets = tuple(offsets)
        self.t = total
        self.m = len(self.attributes)
        self.full = (1 << total) - 1
        self.v_mask = sum(1 << (o + a) for o, a in zip(self.offsets, self.anchor))
        self.free_bits = tuple(b for b in range(total) if not (self.v_mask >> b) & 1)
        self._free_values = tuple(1 << b for b in self.free_bits)  # neighbours() XORs these
        self._attr_masks = tuple(((1 << len(a.domain)) - 1) << o for a, o in zip(self.attributes, self.offsets))

    # -- lattice -------------------------------------------------------------------------
    @property
    def n_admissible(self) -> int:
        """Number of admissible contexts, 2^(t − m)."""
        return 1 << len(self.free_bits)

    def is_admissible(self, mask: int) -> bool:
        return mask & self.v_mask == self.v_mask and 0 <= mask <= self.full

    def neighbours(self, mask: int) -> list[int]:
        """The admissible contexts connected to `mask` (one free bit flipped), in bit order."""
        return [mask ^ bit for bit in self._free_values]

    @staticmethod
    def weight(mask: int) -> int:
        return mask.bit_count()

    def free_bits_set(self, mask: int) -> Iterator[int]:
        return (b for b in self.free_bits if (mask >> b) & 1)

    def from_free(self, free_word: int) -> int:
        """The admissible context whose free bits are the bits of `free_word` (bit i → free_bits[i])."""
        mask = self.v_mask
        free_bits = self.free_bits
        while free_word:
            low = free_word & -free_word  # the lowest set bit: one step per set bit, any width
            mask |= 1 << free_bits[low.bit_length() - 1]
            free_word ^= low
        return mask

    def to_free(self, mask: int) -> int:
        """The free-bit word of an admissible context (the inverse of `from_free`)."""
        word = 0
        for i, b in enumerate(self.free_bits):
            if (mask >> b) & 1:
                word |= 1 << i
        return word

    # -- per attribute -------------------------------------------------------------------
    def attribute_bits(self, mask: int, i: int) -> int:
        """The |dom(A_i)|-bit selection of attribute i."""
        return (mask & self._attr_masks[i]) >> self.offsets[i]

    def selected_indices(self, mask: int, i: int) -> list[int]:
        bits = self.attribute_bits(mask, i)
        return [j for j in range(len(self.attributes[i].domain)) if (bits >> j) & 1]

    def is_full(self, mask: int, i: int) -> bool:
        return mask & self._attr_masks[i] == self._attr_masks[i]

    def values(self, mask: int) -> dict[str, list[Any]]:
        """attribute name → selected values in domain order."""
        return {
            a.name: [a.domain[j] for j in self.selected_indices(mask, i)]
            for i, a in enumerate(self.attributes)
        }

    def from_values(self, selection: Mapping[str, Sequence[Any]]) -> int:
        """Context mask of a selection; attributes not named select their full domain."""
        names = {a.name: i for i, a in enumerate(self.attributes)}
        for name in selection:
            if name not in names:
                raise UserError(
                    f"{name!r} is not a context attribute here",
                    f"use one of: {', '.join(names)}",
                )
        mask = 0
        for i, a in enumerate(self.attributes):
            if a.name not in selection:
                mask |= self._attr_masks[i]
                continue
            wanted = list(selection[a.name])
            if not wanted:
                raise UserError(f"no value selected for {a.name!r}", "select at least one value")
            for j in domain_indices(a.name, a.domain, wanted):
                mask |= 1 << (self.offsets[i] + j)
        return mask


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


@dataclass(frozen=True)
class Context:
    """A context value: its mask and the space it lives in."""

    mask: int
    space: ContextSpace

    @property
    def admissible(self) -> bool:
        return self.space.is_admissible(self.mask)

    @property
    def weight(self) -> int:
        return self.mask.bit_count()

    def neighbours(self) -> list["Context"]:
        return [Context(m, self.space) for m in self.space.neighbours(self.mask)]

    def values(self) -> dict[str, list[Any]]:
        return self.space.values(self.mask)


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
