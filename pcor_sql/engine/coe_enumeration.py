"""Exact enumeration of COE(D, V): every valid context of V and its utility.

Verifiers decided by moments (Grubbs, z-score) are checked for all admissible contexts at
once: per attribute, a subset-sum ("zeta") transform turns the per-value cell statistics into
statistics for every subset containing V's value — on an ordinal attribute, for every run of
bins containing V's bin (prefix combinations outward from it) — so the whole lattice's counts,
centred sums, minima and maxima are dense arrays indexed by the context index
(`ContextSpace.from_free`: the free-bit word when no attribute is ordinal). Other
verifiers are asked context by context through the evaluator (with its cache).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, cast

import numpy as np

from pcor_sql.core.search_specs import SEARCH_SPECS
from pcor_sql.core.space import ContextSpace
from pcor_sql.core.verifiers.base import VectorizedVerifier, Verifier
from pcor_sql.core.verifiers.capabilities import capabilities_of
from pcor_sql.engine.summary import CellSummary
from pcor_sql.core.work import spend
from pcor_sql.errors import UserError, option_hint, option_name
from pcor_sql.core.choices import Utility

_PROGRESS_STEPS = 100


class LatticeOracle(Protocol):
    """What the enumeration reads from the evaluator. A protocol, not the class, so that this
    module does not import the evaluator that calls it."""

    space: ContextSpace
    summary: CellSummary
    verifier: Verifier
    v: float
    plain: bool
    utility_name: str
    start: int | None

    def is_valid(self, mask: int) -> bool: ...

    def utility(self, mask: int) -> float: ...


#: The most admissible contexts `direct` and COE ever enumerate, whatever the limit asked for:
#: 2^40 contexts are days of verifier calls and terabytes of lattice arrays, and free-bit words
#: index int64 arrays. Wider spaces are for the sampling searches, which never enumerate.
MAX_ENUMERABLE = 1 << 40


def _admissible(n: int) -> str:
    """A count of admissible contexts: digits while short."""
    if n <= MAX_ENUMERABLE:
        return f"{n:,}"
    return f"2^{n.bit_length() - 1} (about {float(n):.1e})" if n & (n - 1) == 0 else f"about {float(n):.1e}"


def check_size(n_admissible: int, max_admissible: int) -> None:
    """The guard of `direct` and COE: a UserError naming the admissible count and the
    searches that work when the space is past the limit or past MAX_ENUMERABLE."""
    sampling = ", ".join(name for name in SEARCH_SPECS if name != "direct")
    if n_admissible > MAX_ENUMERABLE:
        raise UserError(
            f"the context space has {_admissible(n_admissible)} admissible contexts, too many to enumerate "
            f"(the direct search and coe visit every one; at most {_admissible(MAX_ENUMERABLE)})",
            f"use a sampling search ({sampling}) or fewer attributes ({option_name('by')})",
        )
    if n_admissible > max_admissible:
        raise UserError(
            f"the context space has {_admissible(n_admissible)} admissible contexts, more than the limit of "
            f"{max_admissible:,}",
            f"use a sampling search ({option_hint('search', 'bfs')}), fewer attributes ({option_name('by')}), "
            f"smaller declared domains, or raise the limit ({option_name('max_contexts')})",
        )


def enumerate_coe(
    ev: LatticeOracle, max_admissible: int, progress: Callable[[int, int], None] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(masks, utilities as float64) of the valid contexts, in free-word order."""
    space = ev.space
    total = space.n_admissible
    check_size(total, max_admissible)
    spend(total)  # a request's work cap (`core.work`) sees the whole enumeration before it starts
    if not ev.plain and capabilities_of(ev.verifier).vectorized:
        words, utilities = _vectorized(ev, progress)
    else:
        words, utilities = _one_by_one(ev, progress)
    return words_to_masks(space, words), utilities


def words_to_masks(space, words: np.ndarray) -> np.ndarray:
    """Context masks of indices (free-bit words without ordinal attributes): uint64 when the
    context fits 64 bits, else Python ints."""
    words = np.asarray(words, dtype=np.uint64)
    if space.t > 64:
        return np.array([space.from_free(int(w)) for w in words], dtype=object)
    if space.ordinal:
        masks = np.zeros(words.shape, dtype=np.uint64)
        stride = 1
        for i, radix in enumerate(space.radices):
            table = np.array([space.digit_bits(i, d) << space.offsets[i] for d in range(radix)], dtype=np.uint64)
            masks |= table[((words // np.uint64(stride)) % np.uint64(radix)).astype(np.int64)]
            stride *= radix
        return masks
    masks = np.full(words.shape, space.v_mask, dtype=np.uint64)
    for i, bit in enumerate(space.free_bits):
        masks |= ((words >> np.uint64(i)) & np.uint64(1)) << np.uint64(bit)
    return masks


def lattice_moments(ev: LatticeOracle) -> dict[str, np.ndarray]:
    """n, s1, s2, lo, hi for every admissible context, indexed by its index (`from_free`)."""
    summary, space = ev.summary, ev.space
    sizes = [len(a.domain) for a in space.attributes]
    dense = {
        "n": np.zeros(sizes, dtype=np.float64),
        "s1": np.zeros(sizes, dtype=np.float64),
        "s2": np.zeros(sizes, dtype=np.float64),
        "lo": np.full(sizes, np.inf),
        "hi": np.full(sizes, -np.inf),
    }
    idx = tuple(summary.coords.T)
    np.add.at(dense["n"], idx, summary.count.astype(np.float64))
    np.add.at(dense["s1"], idx, summary.s1)
    np.add.at(dense["s2"], idx, summary.s2)
    np.minimum.at(dense["lo"], idx, summary.vmin)
    np.maximum.at(dense["hi"], idx, summary.vmax)
    ops = {"n": np.add, "s1": np.add, "s2": np.add, "lo": np.minimum, "hi": np.maximum}
    out = {}
    for key, arr in dense.items():
        # Axes reversed so that the C-order flat index equals the free-bit word (attribute 0 lowest).
        arr = np.transpose(arr, tuple(reversed(range(space.m))))
        for i in range(space.m):
            axis_transform = _interval_axis if i in space.ordinal else _zeta_axis
            arr = axis_transform(arr, space.m - 1 - i, space.anchor[i], ops[key])
        out[key] = np.ascontiguousarray(arr).reshape(-1)
    return out


def _zeta_axis(arr: np.ndarray, axis: int, anchor: int, op: np.ufunc) -> np.ndarray:
    """Along `axis` (one value per slot), the combination over every subset containing `anchor`;
    output slot w holds the subset {anchor} ∪ {free value b : bit b of w}."""
    arr = np.moveaxis(arr, axis, 0)
    free = [j for j in range(arr.shape[0]) if j != anchor]
    out = arr[anchor][None, ...]
    for j in free:
        out = np.concatenate([out, op(out, arr[j][None, ...])], axis=0)
    return np.moveaxis(out, 0, axis)


def _interval_axis(arr: np.ndarray, axis: int, anchor: int, op: np.ufunc) -> np.ndarray:
    """Along `axis` (one bin per slot) of an ordinal attribute, the combination over every run
    of bins [lo, hi] holding `anchor`; output slot (anchor − lo) + (anchor + 1)·(hi − anchor)
    holds that run (`ContextSpace.digit_bits`)."""
    arr = np.moveaxis(arr, axis, 0)
    rows = []
    upward = arr[anchor]
    for hi in range(anchor, arr.shape[0]):
        if hi > anchor:
            upward = op(upward, arr[hi])
        run = upward
        rows.append(run)
        for lo in range(anchor - 1, -1, -1):
            run = op(run, arr[lo])
            rows.append(run)
    return np.moveaxis(np.stack(rows), 0, axis)


def _vectorized(ev: LatticeOracle, progress: Callable[[int, int], None] | None) -> tuple[np.ndarray, np.ndarray]:
    mom = lattice_moments(ev)
    n = mom["n"]
    shift = ev.summary.shift
    mean = shift + mom["s1"] / n
    m2 = np.maximum(mom["s2"] - mom["s1"] ** 2 / n, 0.0)
    constant = mom["lo"] == mom["hi"]
    mean = np.where(constant, mom["lo"], mean)
    m2 = np.where(constant, 0.0, m2)
    # Only a verifier whose capabilities say `vectorized` comes here.
    valid = np.asarray(cast(VectorizedVerifier, ev.verifier).check_many(n, mean, m2, ev.v), dtype=np.bool_)
    if progress is not None:
        progress(len(n), len(n))
    words = np.flatnonzero(valid)
    if ev.utility_name == Utility.POPULATION:
        utilities = n[words]
    elif not ev.space.ordinal:
        start_word = _free_word(ev, ev.start)
        utilities = n[words & start_word]
    else:
        utilities = n[meet_indices(ev.space, words, ev.start)]
    return words, utilities.astype(np.float64)


def _free_word(ev: LatticeOracle, mask: int) -> int:
    return sum(1 << i for i, b in enumerate(ev.space.free_bits) if (mask >> b) & 1)


def meet_indices(space: ContextSpace, indices: np.ndarray, other: int) -> np.ndarray:
    """The index of C ∩ `other` for each admissible context C given by its index (the overlap
    utility's population): per attribute, the common free values of a categorical one (its
    digits ANDed) and the common run of an ordinal one (the shorter reach on each side)."""
    indices = np.asarray(indices, dtype=np.int64)
    out = np.zeros_like(indices)
    stride = 1
    for i, radix in enumerate(space.radices):
        digit = (indices // stride) % radix
        mine = space.digit(other, i)
        if i in space.ordinal:
            width = space.anchor[i] + 1
            met = np.minimum(digit % width, mine % width) + width * np.minimum(digit // width, mine // width)
        else:
            met = digit & mine
        out += met * stride
        stride *= radix
    return out


def _one_by_one(ev: LatticeOracle, progress: Callable[[int, int], None] | None) -> tuple[np.ndarray, np.ndarray]:
    space = ev.space
    total = space.n_admissible
    step = max(1, total // _PROGRESS_STEPS)
    words, utilities = [], []
    for w in range(total):
        mask = space.from_free(w)
        if ev.is_valid(mask):
            words.append(w)
            utilities.append(ev.utility(mask))
        if progress is not None and (w + 1) % step == 0:
            progress(w + 1, total)
    if progress is not None:
        progress(total, total)
    return np.asarray(words, dtype=np.int64), np.asarray(utilities, dtype=np.float64)
