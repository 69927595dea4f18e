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

An ordinal attribute (declared bins, DESIGN.md §2) selects a contiguous run of bins holding
V's bin: admissibility checks the run, and the moves (`neighbours`, `grow_bits`,
`shrink_bits`) flip only the bins at its ends. A space without ordinal
attributes takes exactly the plain bitset paths (same contexts, same order, same draws).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from pcor_sql.core.bins import bin_labels, bin_of, check_edges, edge_text, run_label
from pcor_sql.core.randomness import uniform_open
from pcor_sql.core.selection import domain_indices
from pcor_sql.errors import InternalError, UserError, option_hint


@dataclass(frozen=True)
class Attribute:
    """A context attribute: a column name and its declared, ordered domain.

    An ordinal attribute (`edges` set: DESIGN.md §2) has the bins between its edges as its
    domain, one label per bin (`Attribute.binned`); its contexts keep contiguous runs of bins."""

    name: str
    domain: tuple[Any, ...]
    edges: tuple[Any, ...] | None = None

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
        if self.edges is not None:
            check_edges(self.edges)
            if tuple(self.domain) != bin_labels(self.edges):
                raise InternalError(f"the domain of the ordinal attribute {self.name} is not its bin list")

    @classmethod
    def binned(cls, name: str, edges: Sequence[Any]) -> "Attribute":
        """The ordinal attribute over the bins between `edges` (checked: increasing, ±inf at the ends)."""
        edges = tuple(edges)
        check_edges(edges)
        return cls(name, bin_labels(edges), edges)

    @property
    def ordinal(self) -> bool:
        return self.edges is not None

    def position(self, value: Any) -> int:
        """The domain index of a record's value: its bin for an ordinal attribute."""
        j = bin_of(self.edges, value) if self.edges is not None else _index(self.domain, value)
        if j is None:
            raise self.outside(value, "the record has")
        return j

    def outside(self, value: Any, who: str = "the data has") -> UserError:
        """The input error for a value outside the declared domain (or bins)."""
        if self.edges is not None:
            span = f"its bins [{edge_text(self.edges[0])}, {edge_text(self.edges[-1])}]"
            fix = "widen the first or last edge (-inf and inf are allowed there)"
            if who == "the record has":
                return UserError(f"the record has {self.name} = {value!r}, outside {span}", f"{fix}, or pick another record")
            return UserError(f"the data has {self.name} values outside {span}", f"{fix}, or filter those rows out")
        if who == "the record has":
            return UserError(f"the record has {self.name} = {value!r}, outside its declared domain",
                             f"add {value!r} to the declared domain of {self.name}")
        return UserError(
            f"the data has {self.name} = {value!r}, which is outside its declared domain",
            f"add {value!r} to the declared domain of {self.name}, or filter those rows out",
        )


def _index(domain: Sequence[Any], value: Any) -> int | None:
    return domain.index(value) if value in domain else None


class ContextSpace:
    """The lattice of contexts over some attributes, anchored at a record V.

    `anchor[i]` is the index of V's value in dom(A_i). Admissible contexts contain every
    anchor bit and, on an ordinal attribute, select a contiguous run of bins; the search moves
    by flipping one bit that keeps the context admissible — any of the t − m free bits of a
    categorical attribute, one end of an ordinal attribute's run (grow or shrink it by one bin).

    Admissible contexts are numbered 0 … n_admissible − 1 by a mixed-radix index (`from_free`;
    attribute 0 is the lowest digit). A categorical attribute's digit is its free-bit
    word (radix 2^(|dom| − 1)), so on a space without ordinal attributes the index is the
    free-bit word. An ordinal attribute with B bins and V in bin a has digit
    (a − lo) + (a + 1)·(hi − a) for the run [lo, hi]: radix (a + 1)(B − a), 0 = V's bin alone.
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
        #: The ordinal attributes' positions; a space without any keeps the plain bitset paths.
        self.ordinal = tuple(i for i, a in enumerate(self.attributes) if a.ordinal)
        self.radices = tuple(
            (a + 1) * (len(attr.domain) - a) if attr.ordinal else 1 << (len(attr.domain) - 1)
            for attr, a in zip(self.attributes, self.anchor)
        )
        self._attr_free = tuple(tuple(b for b in self.free_bits if self._attr_masks[i] >> b & 1) for i in range(self.m))
        self._free_mask = sum(self._free_values)
        self._free_positions = np.asarray(self.free_bits, dtype=np.int64)
        # Wider than 60 bits, a context is keyed in dicts by its bytes (`key`).
        self._key_bytes = (total + 7) // 8 if total > 60 else 0
        self._n_coins = sum(len(self._attr_free[i]) for i in range(self.m) if i not in self.ordinal)

    # -- lattice -------------------------------------------------------------------------
    @property
    def n_admissible(self) -> int:
        """Number of admissible contexts: 2^(t − m) without ordinal attributes; each ordinal
        attribute contributes (a + 1)(B − a) runs instead of 2^(B − 1) subsets."""
        if not self.ordinal:
            return 1 << len(self.free_bits)
        return math.prod(self.radices)

    def is_admissible(self, mask: int) -> bool:
        if not (mask & self.v_mask == self.v_mask and 0 <= mask <= self.full):
            return False
        for i in self.ordinal:
            run = self.attribute_bits(mask, i)
            run >>= (run & -run).bit_length() - 1
            if run & (run + 1):  # not one block of ones: a gap in the run of bins
                return False
        return True

    def run(self, mask: int, i: int) -> tuple[int, int]:
        """(first, last) bin index selected on attribute i (the run of an admissible context)."""
        bits = self.attribute_bits(mask, i)
        return (bits & -bits).bit_length() - 1, bits.bit_length() - 1

    def neighbours(self, mask: int) -> list[int]:
        """The admissible contexts connected to `mask` (one bit flipped), in bit order."""
        if not self.ordinal:
            return [mask ^ bit for bit in self._free_values]
        return [mask ^ (1 << b) for b in self._moves(mask, grow=True, shrink=True)]

    def neighbour_flips(self, mask: int) -> Sequence[int]:
        """What `neighbours(mask)` XORs into `mask`, in the same order (one bit each), without
        building the neighbours: a sweep that may need only a few of them takes them lazily."""
        if not self.ordinal:
            return self._free_values
        return [1 << b for b in self._moves(mask, grow=True, shrink=True)]

    def grow_bits(self, mask: int) -> list[int]:
        """The bits whose addition keeps `mask` admissible (one value more), in bit order."""
        if not self.ordinal:
            return self._set_bits(~mask & self._free_mask)
        return self._moves(mask, grow=True, shrink=False)

    def shrink_bits(self, mask: int) -> list[int]:
        """The bits whose removal keeps `mask` admissible (one value less), in bit order."""
        if not self.ordinal:
            return self._set_bits(mask & self._free_mask)
        return self._moves(mask, grow=False, shrink=True)

    def _set_bits(self, bits: int) -> list[int]:
        """The positions of the set bits of `bits` (≥ 0), ascending. Unpacked by numpy: a loop
        over the free bits shifts a Python int per bit (30 µs a call at 497 bits, 9 µs here)."""
        raw = np.frombuffer(bits.to_bytes((self.t + 7) // 8, "little"), dtype=np.uint8)
        return np.flatnonzero(np.unpackbits(raw, bitorder="little")).tolist()

    def _moves(self, mask: int, *, grow: bool, shrink: bool) -> list[int]:
        out: list[int] = []
        for i in range(self.m):
            if i not in self.ordinal:
                out.extend(b for b in self._attr_free[i] if grow and not (mask >> b) & 1 or shrink and (mask >> b) & 1)
                continue
            o, a, last = self.offsets[i], self.anchor[i], len(self.attributes[i].domain) - 1
            lo, hi = self.run(mask, i)
            if grow and lo > 0:
                out.append(o + lo - 1)
            if shrink and lo < a:
                out.append(o + lo)
            if shrink and hi > a:
                out.append(o + hi)
            if grow and hi < last:
                out.append(o + hi + 1)
        return out

    def key(self, mask: int) -> int | bytes:
        """What a dict of contexts is keyed by: the mask itself up to 60 bits, else its bytes.
        Python hashes an int modulo 2^61 − 1, so two neighbours of a context, one bit j and one
        bit j + 61 away, hash alike: on a 5,000-value attribute ~40 of a context's neighbours
        share each hash, a lookup walks their chain comparing 5,000-bit ints (62 µs a lookup
        measured under cProfile, the most of a BFS release). Bytes hash by their content
        (SipHash); the map is one to one, so the keys are the contexts."""
        return mask.to_bytes(self._key_bytes, "little") if self._key_bytes else mask

    @staticmethod
    def weight(mask: int) -> int:
        return mask.bit_count()

    def from_free(self, free_word: int) -> int:
        """The admissible context with index `free_word` (see the class docstring); without
        ordinal attributes, the context whose free bits are the bits of `free_word` (bit i →
        free_bits[i])."""
        if self.ordinal:
            return self._from_index(free_word)
        mask = self.v_mask
        free_bits = self.free_bits
        while free_word:
            low = free_word & -free_word  # the lowest set bit: one step per set bit, any width
            mask |= 1 << free_bits[low.bit_length() - 1]
            free_word ^= low
        return mask

    def digit_bits(self, i: int, digit: int) -> int:
        """Attribute i's selection (|dom(A_i)| bits, unshifted) for its index digit `digit`."""
        a = self.anchor[i]
        if i in self.ordinal:
            lo, hi = a - digit % (a + 1), a + digit // (a + 1)
            return ((1 << (hi - lo + 1)) - 1) << lo
        bits, j = 1 << a, 0
        while digit:
            if j == a:
                j += 1
            if digit & 1:
                bits |= 1 << j
            digit >>= 1
            j += 1
        return bits

    def digit(self, mask: int, i: int) -> int:
        """Attribute i's index digit in admissible context `mask` (the inverse of `digit_bits`)."""
        a = self.anchor[i]
        if i in self.ordinal:
            lo, hi = self.run(mask, i)
            return (a - lo) + (a + 1) * (hi - a)
        bits, out, k = self.attribute_bits(mask, i), 0, 0
        for j in range(len(self.attributes[i].domain)):
            if j == a:
                continue
            if (bits >> j) & 1:
                out |= 1 << k
            k += 1
        return out

    def _from_index(self, index: int) -> int:
        mask = 0
        for i, radix in enumerate(self.radices):
            index, d = divmod(index, radix)
            mask |= self.digit_bits(i, d) << self.offsets[i]
        return mask

    def random_admissible(self, source: Any) -> int:
        """A uniformly random admissible context: each free bit of a categorical attribute a
        fair coin, each ordinal attribute's run uniform among its (a + 1)(B − a) runs."""
        coins = uniform_open(source, self._n_coins) < 0.5
        if not self.ordinal and self._n_coins <= 32:  # a few bits: the Python steps cost less
            return self.from_free(sum(1 << i for i in np.flatnonzero(coins).tolist()))
        if not self.ordinal:
            # from_free of the coins' word, packed by numpy: the same context (free bit i set iff
            # coin i) without a Python step per set bit (28 µs a draw at 86 free bits, now ~3).
            bits = np.zeros(self.t, dtype=bool)
            bits[self._free_positions[coins]] = True
            return self.v_mask | int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")
        mask, k = self.v_mask, 0
        for i in range(self.m):
            if i in self.ordinal:
                mask |= self.digit_bits(i, int(source.integers(0, self.radices[i]))) << self.offsets[i]
                continue
            for b in self._attr_free[i]:
                if coins[k]:
                    mask |= 1 << b
                k += 1
        return mask

    def random_admissible_many(self, source: Any, count: int) -> list[int] | None:
        """`count` draws of `random_admissible`, in order: the same contexts from the same coins
        (one draw of count × coins uniforms is the doubles of count draws of coins each); None
        on a space with ordinal attributes, whose runs' integers interleave with the coins."""
        if self.ordinal:
            return None
        coins = (uniform_open(source, count * self._n_coins) < 0.5).reshape(count, self._n_coins)
        bits = np.zeros((count, self.t), dtype=bool)
        bits[:, self._free_positions] = coins
        packed = np.packbits(bits, axis=1, bitorder="little")
        return [self.v_mask | int.from_bytes(row.tobytes(), "little") for row in packed]

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

    def ranges(self, mask: int) -> dict[str, str]:
        """Ordinal attribute name → its run of bins as one interval label, `[18, 35)` rather than
        the bins' labels `[18, 25)`, `[25, 35)` (`core.bins.run_label`): how people read it."""
        return {self.attributes[i].name: run_label(self.attributes[i].edges, *self.run(mask, i)) for i in self.ordinal}

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
            chosen = sorted(set(domain_indices(a.name, a.domain, wanted)))
            if a.ordinal and chosen != list(range(chosen[0], chosen[-1] + 1)):
                raise UserError(f"the bins selected for {a.name!r} are not one run", "select consecutive bins")
            for j in chosen:
                mask |= 1 << (self.offsets[i] + j)
        return mask


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
