"""split: divisible factors, guarded non-divisible ones, an inferred factor, 3- and 4-way splits, and
the factor lists it refuses; every accepted split still computes what numpy computes."""

import pytest
from helpers import assert_computes, chain, extents, is_guarded, loops_of, matmul, mm_relu, schedule_error
from hypothesis import given, settings
from hypothesis import strategies as st


def test_divisible_split_needs_no_guard():
    wl = chain((1000,))
    sch = wl.schedule()
    (i,) = loops_of(sch, "B")
    outer, inner = sch.split(i, [None, 8])
    assert extents(sch, [outer, inner]) == [125, 8]
    assert not is_guarded(sch, "B")
    assert_computes(wl, sch)


@pytest.mark.parametrize(
    ("n", "factors", "expected"),
    [
        (1000, [None, 7], [143, 7]),
        (1000, [7, None], [7, 143]),
        (97, [10, 10], [10, 10]),
        (97, [None, 96], [2, 96]),
        (1000, [None, 2000], [1, 2000]),
    ],
)
def test_non_divisible_split_is_guarded_and_correct(n, factors, expected):
    wl = chain((n,))
    sch = wl.schedule()
    (i,) = loops_of(sch, "B")
    loops = sch.split(i, factors)
    assert extents(sch, loops) == expected
    assert is_guarded(sch, "B")
    assert_computes(wl, sch)


@pytest.mark.parametrize(
    ("factors", "expected"),
    [
        ([None, 8], [125, 8]),
        ([8, None], [8, 125]),
        ([3, None, 7], [3, 48, 7]),
        ([None, 5, 5, 5], [8, 5, 5, 5]),
        ([1, None], [1, 1000]),
        ([None, 1], [1000, 1]),
        ([1000, 1], [1000, 1]),
    ],
)
def test_none_factor_is_inferred_as_the_smallest_that_covers(factors, expected):
    wl = chain((1000,))
    sch = wl.schedule()
    (i,) = loops_of(sch, "B")
    assert extents(sch, sch.split(i, factors)) == expected
    assert_computes(wl, sch)


@pytest.mark.parametrize(
    ("axis", "factors"),
    [
        (0, [None, 4, 4]),  # 97 -> 7 * 4 * 4 = 112
        (1, [2, 2, None, 4]),  # 127 -> 2 * 2 * 8 * 4 = 128
        (2, [None, 3, 2]),  # the reduction 61 -> 11 * 3 * 2 = 66: the init must still run once
        (1, [None, 127, 1]),
    ],
)
def test_three_and_four_way_splits_of_matmul(axis, factors):
    wl = matmul()
    sch = wl.schedule()
    loops = sch.split(loops_of(sch, "C")[axis], factors)
    assert len(loops) == len(factors)
    assert_computes(wl, sch)


def test_every_matmul_loop_split_at_once():
    wl = matmul()
    sch = wl.schedule()
    i, j, k = loops_of(sch, "C")
    sch.split(i, [None, 2, 8])
    sch.split(j, [4, None, 4, 2])
    sch.split(k, [None, 8])
    assert len(loops_of(sch, "C")) == 9
    assert_computes(wl, sch)


def test_nested_non_divisible_splits_combine_their_guards():
    wl = chain((97,))
    sch = wl.schedule()
    (i,) = loops_of(sch, "B")
    outer, inner = sch.split(i, [None, 10])  # 10 * 10 >= 97
    sch.split(inner, [None, 4])  # 3 * 4 >= 10
    sch.split(outer, [3, None])  # 3 * 4 >= 10
    assert extents(sch, loops_of(sch, "B")) == [3, 4, 3, 4]
    assert_computes(wl, sch)


def test_split_of_a_loop_over_two_blocks_guards_both():
    wl = mm_relu()
    sch = wl.schedule()
    i = loops_of(sch, "Y")[0]
    sch.reverse_compute_at(sch.get_block("C"), i)
    sch.split(i, [None, 8])  # 97 = 12 * 8 + 1
    assert is_guarded(sch, "Y") and is_guarded(sch, "C")
    assert_computes(wl, sch)


@pytest.mark.parametrize("factors", [[3, 4], [2, 2, 2], [1, 96], [96, 1]])
def test_factors_that_cover_less_than_the_extent_are_refused(factors):
    sch = chain((97,)).schedule()
    (i,) = loops_of(sch, "B")
    with schedule_error("i", match="cover"):
        sch.split(i, factors)


@pytest.mark.parametrize(
    "factors", [[None, None], [0, None], [-1, 4], [2.5, None], ["4", None], [97], [], [True, None]]
)
def test_malformed_factors_are_refused(factors):
    sch = chain((97,)).schedule()
    (i,) = loops_of(sch, "B")
    before = sch.func
    with schedule_error("i"):
        sch.split(i, factors)
    assert sch.func == before
    assert len(sch.trace.instructions) == 2  # get_block, get_loops: the failed split is not recorded


def test_a_loop_handle_is_dead_after_its_loop_is_split():
    sch = chain((97,)).schedule()
    (i,) = loops_of(sch, "B")
    sch.split(i, [None, 8])
    with schedule_error("i", match="does not exist"):
        sch.split(i, [None, 4])


def test_split_loops_get_fresh_names_never_reused():
    sch = chain((1000,)).schedule()
    (i,) = loops_of(sch, "B")
    names = [lp.name for lp in sch.split(i, [None, 10, 10])]
    again = [lp.name for lp in sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 5])]
    assert len(set(names + again + ["i"])) == 6


@settings(max_examples=25, deadline=None)
@given(
    extent=st.integers(1, 300),
    factors=st.lists(st.integers(1, 12), min_size=1, max_size=3),
    none_at=st.one_of(st.none(), st.integers(0, 3)),
)
def test_random_splits_compute_the_same_or_are_refused(extent, factors, none_at):
    wl = chain((extent,))
    sch = wl.schedule()
    (i,) = loops_of(sch, "B")
    if none_at is not None:
        factors = factors[:none_at] + [None] + factors[none_at:]
    if len(factors) < 2:
        factors = [*factors, None] if None not in factors else [2, *factors]
    covered = 1
    for f in factors:
        covered *= f or 1
    if None not in factors and covered < extent:
        with schedule_error("i", match="cover"):
            sch.split(i, factors)
        return
    loops = sch.split(i, factors)
    product = 1
    for e in extents(sch, loops):
        product *= e
    assert product >= extent
    assert_computes(wl, sch)
