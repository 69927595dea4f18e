"""Ordinal attributes in the context space (DESIGN.md §2): a context keeps a contiguous run of
bins holding V's bin; its neighbours grow or shrink the run by one bin at either end.

Every law is checked against a brute-force definition over all t-bit masks, on random spaces
mixing categorical and ordinal attributes (hypothesis), and a space without ordinal attributes
keeps the plain bitset behaviour exactly."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.space import Attribute, ContextSpace
from pcor_sql.errors import InternalError, UserError


@st.composite
def spaces(draw, max_t=11):
    """A space of 1–3 attributes, each categorical (1–4 values) or ordinal (1–6 bins), at most
    `max_t` values in all, and a random anchor."""
    attrs, anchor, t = [], [], 0
    for i in range(draw(st.integers(1, 3))):
        ordinal = draw(st.booleans())
        size = draw(st.integers(1, min(6 if ordinal else 4, max(1, max_t - t))))
        if t + size > max_t:
            break
        if ordinal:
            attrs.append(Attribute.binned(f"o{i}", list(range(0, 10 * (size + 1), 10))))
        else:
            attrs.append(Attribute(f"c{i}", tuple(f"v{j}" for j in range(size))))
        anchor.append(draw(st.integers(0, size - 1)))
        t += size
    return ContextSpace(attrs, anchor)


def admissible_by_definition(space, mask):
    """Every attribute keeps V's value; an ordinal one keeps one run of consecutive bins."""
    for i, attr in enumerate(space.attributes):
        bits = [(mask >> (space.offsets[i] + j)) & 1 for j in range(len(attr.domain))]
        if not bits[space.anchor[i]]:
            return False
        if attr.ordinal:
            chosen = [j for j, b in enumerate(bits) if b]
            if chosen != list(range(chosen[0], chosen[-1] + 1)):
                return False
    return True


def all_admissible(space):
    return [m for m in range(space.full + 1) if admissible_by_definition(space, m)]


@settings(max_examples=150, deadline=None)
@given(spaces())
def test_admissible_contexts_and_their_index_match_the_definition(space):
    expected = all_admissible(space)
    assert [m for m in range(space.full + 2) if space.is_admissible(m)] == expected
    assert space.n_admissible == len(expected)
    masks = [space.from_free(w) for w in range(space.n_admissible)]
    assert sorted(masks) == expected  # a bijection onto the admissible contexts
    assert masks[0] == space.v_mask and masks[-1] == space.full


@settings(max_examples=150, deadline=None)
@given(spaces())
def test_moves_are_the_admissible_contexts_one_value_away(space):
    admissible = set(all_admissible(space))
    for mask in admissible:
        one_away = {mask ^ (1 << b) for b in range(space.t)} & admissible
        assert set(space.neighbours(mask)) == one_away
        assert space.neighbours(mask) == sorted(space.neighbours(mask), key=lambda nb: (nb ^ mask).bit_length())
        assert {mask | (1 << b) for b in space.grow_bits(mask)} == {nb for nb in one_away if nb > mask}
        assert {mask & ~(1 << b) for b in space.shrink_bits(mask)} == {nb for nb in one_away if nb < mask}


def test_an_ordinal_attribute_moves_only_at_the_ends_of_its_run():
    age = Attribute.binned("age", [18, 25, 35, 45, 55, 65, 81])
    space = ContextSpace([age], [2])  # V in [35, 45)
    run = space.from_values({"age": ["[25, 35)", "[35, 45)", "[45, 55)"]})  # bins 1..3
    assert space.run(run, 0) == (1, 3)
    grown = {space.run(nb, 0) for nb in space.neighbours(run)}
    assert grown == {(0, 3), (2, 3), (1, 2), (1, 4)}
    assert space.n_admissible == 3 * 4  # lo ∈ {0, 1, 2}, hi ∈ {2, …, 5}
    with pytest.raises(UserError, match="the bins selected for 'age' are not one run"):
        space.from_values({"age": ["[25, 35)", "[35, 45)", "[55, 65)"]})
    assert not space.is_admissible(space.v_mask | (1 << 4))  # bins 2 and 4: a gap


def test_a_space_without_ordinal_attributes_keeps_the_plain_moves():
    space = ContextSpace([Attribute("a", ("x", "y", "z")), Attribute("b", (1, 2, 3, 4))], [1, 0])
    for w in range(space.n_admissible):
        mask = space.from_free(w)
        assert space.neighbours(mask) == [mask ^ (1 << b) for b in space.free_bits]
        missing = [b for b in space.free_bits if not (mask >> b) & 1]
        assert space.grow_bits(mask) == missing
        assert space.shrink_bits(mask) == [b for b in space.free_bits if (mask >> b) & 1]


def test_random_admissible_draws_as_the_plain_coins_without_ordinal_attributes():
    space = ContextSpace([Attribute("a", ("x", "y", "z")), Attribute("b", (1, 2, 3, 4))], [1, 0])
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(50):
        coins = b.random(len(space.free_bits)) < 0.5
        assert space.random_admissible(a) == space.from_free(sum(1 << i for i in np.flatnonzero(coins).tolist()))


def test_random_admissible_is_uniform_over_the_runs():
    """Seeded: 32 admissible contexts (2 × 4 runs, 4 subsets), 32,000 draws; each count is
    Binomial(32000, 1/32) (sd ≈ 31): the 32 6-sd bands all hold but with probability < 1e-7."""
    space = ContextSpace([Attribute.binned("age", [0, 1, 2, 3, 4, 5]), Attribute("c", ("x", "y", "z"))], [1, 2])
    assert space.n_admissible == 2 * 4 * 4
    rng = np.random.default_rng(11)
    draws = 32_000
    counts = {}
    for _ in range(draws):
        mask = space.random_admissible(rng)
        assert space.is_admissible(mask)
        counts[mask] = counts.get(mask, 0) + 1
    assert len(counts) == space.n_admissible
    expected, sd = draws / space.n_admissible, (draws / space.n_admissible * (1 - 1 / space.n_admissible)) ** 0.5
    assert all(abs(c - expected) < 6 * sd for c in counts.values())


def test_a_record_value_maps_to_its_bin():
    age = Attribute.binned("age", [18, 25, 35, 81])
    assert [age.position(v) for v in (18, 24, 25, 80, 81)] == [0, 0, 1, 2, 2]
    with pytest.raises(UserError, match=r"the record has age = 90, outside its bins \[18, 81\]"):
        age.position(90)
    assert "outside its bins" in age.outside("outside the bins").problem
    plain = Attribute("dept", ("a", "b"))
    assert plain.position("b") == 1
    with pytest.raises(UserError, match="outside its declared domain"):
        plain.position("c")


def test_an_ordinal_attribute_s_domain_is_its_bin_list():
    with pytest.raises(InternalError):
        Attribute("age", ("a", "b"), (18, 25, 35))
    with pytest.raises(UserError, match="increase strictly"):
        Attribute.binned("age", [25, 18])


def test_ranges_are_one_interval_per_ordinal_attribute():
    """What people read for a run of bins: one interval, `[18, 45)` — not the bins' labels."""
    space = ContextSpace([Attribute.binned("age", [18, 30, 45, 65, 81]), Attribute("c", ("x", "y"))], [1, 0])
    o = space.offsets[1]
    assert space.ranges(0b0011 | 1 << o) == {"age": "[18, 45)"}
    assert space.ranges(0b1110 | 3 << o) == {"age": "[30, 81]"}
    assert space.ranges(space.v_mask) == {"age": "[30, 45)"}
    assert ContextSpace([Attribute.binned("t", [float("-inf"), 0, float("inf")])], [0]).ranges(0b11) == {"t": "(-inf, inf)"}
    assert ContextSpace([Attribute("c", ("x", "y"))], [0]).ranges(0b11) == {}
