"""Contexts as bitsets: admissibility, neighbours, free-bit and value round trips, guards, and
the same laws on spaces of any width (hypothesis: 1 to ~600 values, far past 64 bits)."""

import itertools

import numpy as np

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.space import Attribute, Context, ContextSpace
from pcor_sql.errors import UserError

ATTRS = (
    Attribute("dept", ("d0", "d1", "d2", "d3")),
    Attribute("role", ("r0", "r1", "r2")),
    Attribute("level", (1, 2)),
)
ANCHOR = (1, 0, 1)  # V = (d1, r0, 2)


@pytest.fixture
def space():
    return ContextSpace(ATTRS, ANCHOR)


def free_word(space, mask):
    """The index `from_free` gives `mask` on a space without ordinal attributes: its free bits,
    bit i for free_bits[i]."""
    return sum(1 << i for i, b in enumerate(space.free_bits) if (mask >> b) & 1)


def all_masks(space):
    return range(space.full + 1)


def test_layout(space):
    assert space.t == 9 and space.m == 3
    assert space.offsets == (0, 4, 7)
    assert space.v_mask == (1 << 1) | (1 << 4) | (1 << 8)
    assert space.free_bits == (0, 2, 3, 5, 6, 7)
    assert space.n_admissible == 2**6


def test_admissible_iff_every_anchor_bit_is_set(space):
    admissible = [m for m in all_masks(space) if space.is_admissible(m)]
    assert len(admissible) == space.n_admissible
    for m in all_masks(space):
        assert space.is_admissible(m) == (m & space.v_mask == space.v_mask)
    assert space.is_admissible(space.v_mask) and space.is_admissible(space.full)
    assert not space.is_admissible(space.full + 1)
    assert not space.is_admissible(-1)
    assert not space.is_admissible(space.v_mask & ~(1 << 4))


def test_neighbours_are_t_minus_m_admissible_contexts_at_hamming_distance_one(space):
    for w in range(space.n_admissible):
        mask = space.from_free(w)
        nbs = space.neighbours(mask)
        assert len(nbs) == space.t - space.m
        assert len(set(nbs)) == len(nbs)
        for nb in nbs:
            assert space.is_admissible(nb)
            assert (nb ^ mask).bit_count() == 1
        # every admissible context at distance 1 is listed (no anchor bit is ever flipped)
        expected = {mask ^ (1 << b) for b in range(space.t)} & {space.from_free(x) for x in range(space.n_admissible)}
        assert set(nbs) == expected


def test_from_free_is_a_bijection_onto_admissible_contexts(space):
    masks = [space.from_free(w) for w in range(space.n_admissible)]
    assert len(set(masks)) == space.n_admissible
    assert all(space.is_admissible(m) for m in masks)
    assert masks[0] == space.v_mask and masks[-1] == space.full
    for w, m in enumerate(masks):
        # round trip through the free bits that are set
        assert free_word(space, m) == w
        assert space.weight(m) == space.m + bin(w).count("1")


def test_values_round_trip(space):
    for w in range(space.n_admissible):
        mask = space.from_free(w)
        vals = space.values(mask)
        assert list(vals) == ["dept", "role", "level"]
        for a in ATTRS:
            # values come back in declared-domain order
            assert vals[a.name] == [v for v in a.domain if v in vals[a.name]]
        assert space.from_values(vals) == mask
        assert Context(mask, space).values() == vals


def test_from_values_omitted_attribute_means_full_domain(space):
    mask = space.from_values({"dept": ["d1"]})
    assert space.values(mask) == {"dept": ["d1"], "role": ["r0", "r1", "r2"], "level": [1, 2]}
    assert space.from_values({}) == space.full
    assert space.is_full(mask, 1) and space.is_full(mask, 2) and not space.is_full(mask, 0)


def test_from_values_can_describe_a_context_without_v(space):
    # Not an error here: resolve_start refuses it with its own message.
    mask = space.from_values({"dept": ["d0"]})
    assert not space.is_admissible(mask)


@pytest.mark.parametrize(
    "selection",
    [{"salary": ["x"]}, {"dept": ["d9"]}, {"role": ["r0", "nope"]}, {"dept": []}],
)
def test_from_values_rejects_unknown_attribute_value_or_empty_selection(space, selection):
    with pytest.raises(UserError):
        space.from_values(selection)


def test_attribute_bits_and_selected_indices(space):
    mask = space.from_values({"dept": ["d0", "d1", "d3"], "role": ["r0"], "level": [1, 2]})
    assert space.attribute_bits(mask, 0) == 0b1011
    assert space.selected_indices(mask, 0) == [0, 1, 3]
    assert space.selected_indices(mask, 1) == [0]
    assert space.selected_indices(mask, 2) == [0, 1]


def test_context_wrapper(space):
    c = Context(space.v_mask, space)
    assert c.admissible and c.weight == 3
    assert [n.mask for n in c.neighbours()] == space.neighbours(space.v_mask)
    assert not Context(0, space).admissible


def test_spaces_past_64_free_bits_work_like_small_ones():
    # The cap of 64 free bits is gone: 65, 70 (50 + 6 + 4 + 10 values) and 500 values.
    for sizes, anchor in [((66,), (0,)), ((50, 6, 4, 10), (3, 1, 0, 9)), ((480, 12, 8), (479, 0, 7))]:
        attrs = [Attribute(f"a{i}", tuple(range(n))) for i, n in enumerate(sizes)]
        space = ContextSpace(attrs, anchor)
        assert len(space.free_bits) == sum(sizes) - len(sizes) and space.n_admissible == 2 ** len(space.free_bits)
        top = (1 << len(space.free_bits)) - 1
        assert space.from_free(top) == space.full and free_word(space, space.full) == top
        assert space.values(space.full) == {a.name: list(a.domain) for a in attrs}
        assert len(space.neighbours(space.full)) == len(space.free_bits)


def test_attribute_and_space_guards():
    with pytest.raises(UserError):
        Attribute("a", ())
    with pytest.raises(UserError):
        Attribute("a", ("x", "x"))
    with pytest.raises(UserError):
        ContextSpace([], [])


def test_one_value_domains_leave_a_single_context():
    space = ContextSpace([Attribute("a", ("x",)), Attribute("b", ("y",))], [0, 0])
    assert space.free_bits == () and space.n_admissible == 1
    assert space.v_mask == space.full
    assert space.neighbours(space.full) == []


def test_every_pair_of_admissible_contexts_is_connected_by_a_monotone_path(space):
    # The lattice of admissible contexts is the hypercube over the free bits: any two are
    # joined by a path of len(symmetric difference) single-bit moves.
    masks = [space.from_free(w) for w in range(space.n_admissible)]
    for a, b in itertools.islice(itertools.combinations(masks, 2), 200):
        cur, steps = a, 0
        while cur != b:
            diff = cur ^ b
            nxt = next(n for n in space.neighbours(cur) if (n ^ b).bit_count() < diff.bit_count())
            cur, steps = nxt, steps + 1
        assert steps == (a ^ b).bit_count()


# ---- any width: the same laws, checked against a plain list-of-booleans model -------------

@st.composite
def wide_spaces(draw):
    sizes = draw(st.lists(st.integers(1, 200), min_size=1, max_size=5).filter(lambda z: sum(z) <= 600))
    anchor = [draw(st.integers(0, n - 1)) for n in sizes]
    attrs = [Attribute(f"a{i}", tuple(f"v{j}" for j in range(n))) for i, n in enumerate(sizes)]
    return ContextSpace(attrs, anchor)


@st.composite
def space_and_word(draw):
    space = draw(wide_spaces())
    nfree = len(space.free_bits)
    word = draw(st.integers(0, (1 << nfree) - 1)) if nfree else 0
    return space, word


def model_selection(space, word):
    """Per attribute, a list of booleans: V's value always, free value i when bit i of word."""
    chosen = [[False] * len(a.domain) for a in space.attributes]
    for i, a in enumerate(space.anchor):
        chosen[i][a] = True
    starts = list(space.offsets) + [space.t]
    for i, b in enumerate(space.free_bits):
        if (word >> i) & 1:
            attr = max(j for j in range(space.m) if starts[j] <= b)
            chosen[attr][b - space.offsets[attr]] = True
    return chosen


@settings(max_examples=200, deadline=None)
@given(space_and_word())
def test_property_wide_free_words_round_trip_and_match_the_model(case):
    space, word = case
    mask = space.from_free(word)
    assert space.is_admissible(mask) and free_word(space, mask) == word
    assert mask.bit_length() <= space.t and space.weight(mask) == space.m + word.bit_count()
    chosen = model_selection(space, word)
    for i, a in enumerate(space.attributes):
        assert space.selected_indices(mask, i) == [j for j, on in enumerate(chosen[i]) if on]
        assert space.attribute_bits(mask, i) == sum(1 << j for j, on in enumerate(chosen[i]) if on)
        assert space.is_full(mask, i) == all(chosen[i])
    vals = space.values(mask)
    assert space.from_values(vals) == mask
    assert vals == {a.name: [a.domain[j] for j, on in enumerate(chosen[i]) if on] for i, a in enumerate(space.attributes)}


@settings(max_examples=150, deadline=None)
@given(space_and_word())
def test_property_wide_neighbours_flip_exactly_one_free_bit(case):
    space, word = case
    mask = space.from_free(word)
    nbs = space.neighbours(mask)
    assert len(nbs) == len(set(nbs)) == len(space.free_bits)
    assert sorted(free_word(space, nb) ^ word for nb in nbs) == [1 << i for i in range(len(space.free_bits))]
    assert all(space.is_admissible(nb) and (nb ^ mask).bit_count() == 1 for nb in nbs)
    assert not space.is_admissible(mask & ~space.v_mask) or space.v_mask == 0


@pytest.mark.parametrize("sizes", [(51, 20, 12, 7), (300, 4), (3, 2)])
def test_a_uniform_draw_is_the_context_of_its_coins_word(sizes):
    """The packed draw (many free bits) and the per-bit one (few) read the same coins and give
    `from_free` of their word: seeded draws are the ones they always were."""
    from pcor_sql.core.randomness import uniform_open

    space = ContextSpace([Attribute(f"a{i}", tuple(range(k))) for i, k in enumerate(sizes)], [1] * len(sizes))
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(200):
        coins = uniform_open(b, len(space.free_bits)) < 0.5
        expected = space.from_free(sum(1 << int(i) for i in np.flatnonzero(coins)))
        assert space.random_admissible(a) == expected
