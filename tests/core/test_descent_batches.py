"""`core.descent_batches`: a descent whose path is asked in batches is the step-by-step
`exploration.descend` — the same context, the same coins used (the generator's state after it
is the loop's), validity only."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from scipy import stats

from pcor_sql.core import descent_batches
from pcor_sql.core.descent_batches import batchable, descend_in_batches
from pcor_sql.core.exploration import descend, random_descents
from pcor_sql.core.randomness import SecureRandom
from pcor_sql.core.space import Attribute, ContextSpace

WIDE = ContextSpace([Attribute("item", tuple(range(300))), Attribute("kind", tuple(range(4)))], [7, 2])
NARROW = ContextSpace([Attribute("a", ("a0", "a1", "a2")), Attribute("b", ("b0", "b1", "b2", "b3"))], [0, 1])


class ManyOracle:
    """Valid iff the context holds at most `most` values and a hash of it falls under `p` (a
    fixed, data-like verdict per context); counts the questions, one by one and in batches."""

    def __init__(self, space, most, p=1.0):
        self.space, self.most, self.p = space, most, p
        self.single, self.batched, self.batches = [], [], 0

    def verdict(self, mask):
        assert self.space.is_admissible(mask)
        h = int.from_bytes(hashlib.blake2b(mask.to_bytes(64, "little"), digest_size=8).digest(), "little")
        return mask.bit_count() <= self.most and h < self.p * 2**64

    def is_valid(self, mask):
        self.single.append(mask)
        return self.verdict(mask)

    def valid_many(self, masks):
        self.batches += 1
        self.batched.extend(masks)
        return [self.verdict(m) for m in masks]


def _pair(space, most, p, seed):
    one, many = ManyOracle(space, most, p), ManyOracle(space, most, p)
    g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
    a = descend(space, one.is_valid, g1)
    b = descend_in_batches(space, many.is_valid, many.valid_many, g2)
    return one, many, a, b, g1, g2


@pytest.mark.parametrize("space", [WIDE, NARROW])
def test_the_same_context_and_the_same_coins_as_the_loop(space):
    for seed in range(60):
        most = seed * 5 % (space.t + 1)
        one, many, a, b, g1, g2 = _pair(space, most, 0.3 + 0.7 * (seed % 2), seed)
        assert a == b
        assert g1.bit_generator.state == g2.bit_generator.state  # no coin more or less than the loop's
        asked = one.single
        # every context the loop asked is asked, in the same order, and past it at most one batch
        got = many.single + many.batched
        assert got[: len(asked)] == asked
        assert len(got) - len(asked) < descent_batches.MOST_BATCH
        assert a is None or a == asked[-1]


def test_a_descent_that_reaches_vs_cell_invalid_gives_none_and_spends_every_coin():
    one, many, a, b, g1, g2 = _pair(WIDE, -1, 1.0, 4)
    assert a is None and b is None
    assert g1.bit_generator.state == g2.bit_generator.state
    assert many.batches > 1 and many.batched[-1] == WIDE.v_mask


def test_batches_double_from_the_first_to_the_most():
    many = ManyOracle(WIDE, WIDE.m)  # only V's cell valid: the whole path is asked
    sizes = []
    real = many.valid_many
    many.valid_many = lambda masks: sizes.append(len(masks)) or real(masks)
    assert descend_in_batches(WIDE, many.is_valid, many.valid_many, np.random.default_rng(0)) == WIDE.v_mask
    assert sizes[0] == descent_batches.FIRST_BATCH and max(sizes) <= descent_batches.MOST_BATCH
    assert sum(sizes) == len(WIDE.free_bits)


def test_random_descents_ask_in_batches_where_the_oracle_can():
    """The change this module makes: BFS's descents ask `valid_many`, and return what the
    step-by-step descents return with the same coins."""
    for seed in range(10):
        many = ManyOracle(WIDE, 40 + seed, 0.5)
        got = random_descents(many, np.random.default_rng(seed), 6)
        assert many.batches >= 6 and len(many.single) == 6  # one is_valid (the full context) a descent
        plain = ManyOracle(WIDE, 40 + seed, 0.5)
        plain.valid_many = None  # no batches: the loop
        assert not batchable(WIDE, plain, np.random.default_rng(0))
        assert got == random_descents(plain, np.random.default_rng(seed), 6)


def test_batchable_only_without_ordinal_attributes_and_with_a_source_that_can_give_coins_back():
    oracle = ManyOracle(WIDE, 3)
    assert batchable(WIDE, oracle, np.random.default_rng(0)) and batchable(WIDE, oracle, SecureRandom())

    class Opaque:  # a source whose state cannot be restored: its coins would be spent
        def integers(self, low, high=None):
            return 0

    assert not batchable(WIDE, oracle, Opaque())
    ordinal = ContextSpace([Attribute.binned("x", (-np.inf, 0, 1, 2, np.inf)), Attribute("k", (0, 1))], [1, 0])
    assert not batchable(ordinal, ManyOracle(ordinal, 3), np.random.default_rng(0))


def test_with_the_secure_source_the_first_removal_is_uniform():
    """Unseeded, the descent's law is the loop's: with V's cell alone valid on NARROW (5 free
    values), the first value removed is uniform over the five. 2,000 descents, chi-square
    p > 1e-3 (seeded by nothing: the secure source; fails with probability 1e-3)."""
    first = []
    for _ in range(2000):
        many = ManyOracle(NARROW, NARROW.m)
        assert descend_in_batches(NARROW, many.is_valid, many.valid_many, SecureRandom()) == NARROW.v_mask
        first.append((NARROW.full ^ many.batched[0]).bit_length() - 1)
    counts = np.bincount(first, minlength=NARROW.t)[list(NARROW.free_bits)]
    assert counts.sum() == 2000 and stats.chisquare(counts).pvalue > 1e-3


def test_with_valid_keyed_the_path_comes_as_its_keys_and_rows():
    from pcor_sql.core.verifiers.walk_batches import context_matrix

    class KeyedOracle(ManyOracle):
        def valid_keyed(self, masks, keys, rows):
            assert keys == [self.space.key(m) for m in masks]
            assert np.array_equal(rows, context_matrix(masks, (self.space.t + 63) // 64))
            return self.valid_many(masks)

    for seed in range(20):
        most = seed * 15 % (WIDE.t + 1)
        one, keyed = ManyOracle(WIDE, most, 0.5), KeyedOracle(WIDE, most, 0.5)
        g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
        assert descend_in_batches(WIDE, one.is_valid, one.valid_many, g1) == \
            descend_in_batches(WIDE, keyed.is_valid, keyed.valid_many, g2, keyed.valid_keyed)
        assert g1.bit_generator.state == g2.bit_generator.state and one.batched == keyed.batched
