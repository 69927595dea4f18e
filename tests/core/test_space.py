"""Contexts as bitsets: admissibility, neighbours, free-bit and value round trips, guards."""

import itertools

import pytest

from pcor_sql.core.space import MAX_FREE_BITS, Attribute, Context, ContextSpace
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
        back = sum(1 << space.free_bits.index(b) for b in space.free_bits_set(m))
        assert back == w
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


def test_exactly_64_free_bits_is_allowed_and_65_is_a_user_error():
    ok = ContextSpace([Attribute("a", tuple(range(MAX_FREE_BITS + 1)))], [0])
    assert len(ok.free_bits) == 64
    assert ok.n_admissible == 2**64
    with pytest.raises(UserError):
        ContextSpace([Attribute("a", tuple(range(MAX_FREE_BITS + 2)))], [0])
    with pytest.raises(UserError):
        ContextSpace([Attribute("a", tuple(range(40))), Attribute("b", tuple(range(28)))], [3, 5])


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
