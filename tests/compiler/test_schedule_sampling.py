"""Stochastic primitives: sample_perfect_tile always tiles exactly and respects the innermost limit,
is deterministic per seed, and repairs stale decisions into a valid tiling and a correct program;
sample_covering_tile does the same for the extent rounded up, its last tile guarded;
sample_categorical records indices and repairs those that could not have been drawn."""

import collections

import pytest
from helpers import assert_computes, chain, extents, loops_of, matmul, schedule_error
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import Schedule, ScheduleError, te

EXTENTS = st.one_of(st.integers(1, 4096), st.sampled_from([97, 127, 128, 360, 1000, 2**12, 3**7]))
LIMITS = st.one_of(st.just(-1), st.integers(1, 64))


def loop_of_extent(extent: int, seed: int = 0):
    A = te.placeholder((extent,), name="A")
    B = te.compute((extent,), lambda i: A[i] + 1.0, name="B")
    sch = Schedule(te.create_prim_func([A, B]), seed=seed)
    (i,) = sch.get_loops(sch.get_block("B"))
    return sch, i


def product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def assert_valid_tiling(tiles, extent: int, n: int, limit: int) -> None:
    assert len(tiles) == n
    assert all(isinstance(t, int) and t >= 1 for t in tiles)
    assert product(tiles) == extent
    if n > 1 and limit >= 1:
        assert tiles[-1] <= limit


# --- sample_perfect_tile --------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(extent=EXTENTS, n=st.integers(1, 5), limit=LIMITS, seed=st.integers(0, 2**32))
def test_sampled_tiles_multiply_to_the_extent_within_the_innermost_limit(extent, n, limit, seed):
    sch, i = loop_of_extent(extent, seed)
    tiles = sch.sample_perfect_tile(i, n=n, max_innermost_factor=limit)
    assert_valid_tiling([int(t) for t in tiles], extent, n, limit)
    inst = sch.trace.instructions[-1]
    assert inst.decision == [int(t) for t in tiles]
    assert inst.outputs == tuple(t.rv for t in tiles)


@pytest.mark.parametrize("extent", [97, 127])
def test_prime_extent_under_a_small_limit_puts_the_prime_outside(extent):
    for seed in range(20):
        sch, i = loop_of_extent(extent, seed)
        assert [int(t) for t in sch.sample_perfect_tile(i, n=3, max_innermost_factor=16)][-1] == 1


def test_sampling_is_deterministic_for_a_seed_and_varies_across_seeds():
    def draws(seed):
        sch, i = loop_of_extent(1024, seed)
        return [tuple(sch.sample_perfect_tile(i, n=4, max_innermost_factor=64)) for _ in range(5)]

    assert draws(7) == draws(7)
    assert len({tuple(draws(seed)) for seed in range(10)}) > 5


def test_sampled_tiles_split_into_a_correct_program():
    wl = matmul()
    for seed in range(3):
        sch = wl.schedule(seed)
        c = sch.get_block("C")
        for loop in sch.get_loops(c):
            sch.split(loop, sch.sample_perfect_tile(loop, n=3))
        assert product(extents(sch, sch.get_loops(c))) == 97 * 127 * 61
        assert_computes(wl, sch)


@settings(max_examples=200, deadline=None)
@given(
    extent=EXTENTS,
    decision=st.lists(st.integers(1, 5000), min_size=1, max_size=5),
    limit=LIMITS,
)
def test_any_well_formed_decision_is_repaired_into_a_valid_tiling(extent, decision, limit):
    sch, i = loop_of_extent(extent)
    n = len(decision)
    tiles = sch.sample_perfect_tile(i, n=n, max_innermost_factor=limit, decision=decision)
    assert_valid_tiling([int(t) for t in tiles], extent, n, limit)
    assert sch.trace.instructions[-1].decision == [int(t) for t in tiles]


def test_a_decision_that_fits_is_kept_exactly():
    sch, i = loop_of_extent(128)
    assert sch.sample_perfect_tile(i, n=3, decision=[4, 4, 8]) == [4, 4, 8]


def tiled_matmul(sch: Schedule) -> Schedule:
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2))
    j0, j1, j2 = sch.split(j, sch.sample_perfect_tile(j, n=3, max_innermost_factor=16))
    k0, k1 = sch.split(k, sch.sample_perfect_tile(k, n=2))
    sch.reorder(i0, j0, k0, i1, k1, j1, j2)
    sch.vectorize(j2)
    return sch


def j_tiles_index(trace) -> int:
    return [k for k, inst in enumerate(trace.instructions) if inst.kind == "sample_perfect_tile"][1]


def test_trace_from_a_128_workload_replays_on_a_96_workload():
    recorded = tiled_matmul(matmul(128, 128, 128).schedule(seed=1)).trace
    index = j_tiles_index(recorded)
    recorded = recorded.with_decision(index, [2, 8, 8])  # j: 2 * 8 * 8 = 128
    small = matmul(96, 96, 96)
    replayed = recorded.apply(small.func)
    j_tiles = replayed.trace.instructions[index].decision
    assert product(j_tiles) == 96 and j_tiles[-1] <= 8
    assert_computes(small, replayed)


@pytest.mark.parametrize("decision", [[5, 7, 3], [1, 1, 1], [1000, 1000, 1000], [3, 3, 64]])
def test_mutated_decision_that_no_longer_divides_is_repaired(decision):
    wl = matmul()
    trace = tiled_matmul(wl.schedule()).trace
    index = j_tiles_index(trace)
    sch = trace.apply(wl.func, decisions={index: decision})
    tiles = sch.trace.instructions[index].decision
    assert_valid_tiling(tiles, 127, 3, 16)
    assert_computes(wl, sch)
    again = sch.trace.apply(wl.func)
    assert again.func == sch.func  # the repaired decision replays as recorded


@pytest.mark.parametrize("decision", [[4, 0], [4], [4, 4, 4], [2.0, 4], ["2", 4], [True, 4], 8])
def test_malformed_decision_is_refused_naming_the_loop(decision):
    sch, i = loop_of_extent(64)
    with schedule_error("i", match="decision"):
        sch.sample_perfect_tile(i, n=2, decision=decision)


@pytest.mark.parametrize(("n", "limit"), [(0, 16), (2, 0), (2, -2)])
def test_bad_tile_count_or_limit_is_refused(n, limit):
    sch, i = loop_of_extent(64)
    with schedule_error("i"):
        sch.sample_perfect_tile(i, n=n, max_innermost_factor=limit)


def test_one_tile_is_the_whole_loop_even_above_the_limit():
    sch, i = loop_of_extent(1000)
    assert sch.sample_perfect_tile(i, n=1, max_innermost_factor=16) == [1000]


def test_sampling_a_dead_loop_is_refused():
    sch, i = loop_of_extent(64)
    sch.split(i, [None, 8])
    with schedule_error("i", match="does not exist"):
        sch.sample_perfect_tile(i, n=2)


# --- sample_covering_tile -------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(
    extent=EXTENTS, n=st.integers(1, 4), limit=LIMITS, multiple=st.integers(1, 8), seed=st.integers(0, 2**32)
)
def test_covering_tiles_multiply_to_the_extent_rounded_up(extent, n, limit, multiple, seed):
    sch, i = loop_of_extent(extent, seed)
    tiles = [int(t) for t in sch.sample_covering_tile(i, n, limit, multiple)]
    assert_valid_tiling(tiles, -(-extent // multiple) * multiple, n, limit)
    assert sch.trace.instructions[-1].decision == tiles


@pytest.mark.parametrize("decision", [None, [25, 8], [7, 13], [1, 1]])
def test_covering_tiles_split_into_a_correct_program_the_last_tile_guarded(decision):
    """197 rows of a matmul in tiles that need not divide them (sampled, decided, repaired): the
    rows past 197 are never written or read."""
    wl = matmul(197, 40, 24)
    sch = wl.schedule(seed=1)
    c = sch.get_block("C")
    i = sch.get_loops(c)[0]
    tiles = sch.sample_covering_tile(i, 2, 16, 8, decision=decision)
    assert product(int(t) for t in tiles) == 200
    sch.split(i, tiles)
    assert_computes(wl, sch)
    assert sch.trace.apply(wl.func).func == sch.func


def test_covering_a_symbolic_extent_is_refused_naming_the_loop():
    n = te.var("n", range=(1, 64))
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    sch = Schedule(te.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    with schedule_error("i", match="not static"):
        sch.sample_covering_tile(i, 2, 16, 8)


# --- sample_categorical ---------------------------------------------------------------------------
def test_categorical_decision_is_the_index_of_the_value():
    sch, _ = loop_of_extent(8)
    value = sch.sample_categorical([0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25], decision=2)
    assert value == 64
    inst = sch.trace.instructions[-1]
    assert inst.decision == 2 and inst.outputs == (value.rv,)


def test_categorical_draws_follow_the_probabilities():
    counts = collections.Counter()
    for seed in range(300):
        sch, _ = loop_of_extent(8, seed)
        sch.sample_categorical([10, 20, 30], [0.8, 0.0, 0.2])
        counts[sch.trace.instructions[-1].decision] += 1
    assert counts[1] == 0
    assert 200 < counts[0] < 280


def test_categorical_is_deterministic_for_a_seed():
    def draws(seed):
        sch, _ = loop_of_extent(8, seed)
        return [int(sch.sample_categorical([1, 2, 3, 4], [1, 1, 1, 1])) for _ in range(8)]

    assert draws(3) == draws(3)


@pytest.mark.parametrize(
    ("decision", "probs", "expected"),
    [
        (5, [0.5, 0.5, 0.5], 2),  # past the end: the last index
        (-3, [0.5, 0.5, 0.5], 0),  # before the start: the first
        (2, [0.5, 0.5, 0.0], 1),  # an index that could not be drawn: its nearest neighbour
        (7, [0.5, 0.5, 0.0], 1),
        (1, [0.5, 0.0, 0.5], 0),  # equally near on both sides: the lower
    ],
)
def test_stale_categorical_decision_becomes_the_nearest_possible_draw(decision, probs, expected):
    sch, _ = loop_of_extent(8)
    value = sch.sample_categorical([10, 20, 30], probs, decision=decision)
    assert value == [10, 20, 30][expected]
    assert sch.trace.instructions[-1].decision == expected


@pytest.mark.parametrize("decision", [1.0, "1", True, [1]])
def test_categorical_decision_that_is_not_an_index_is_refused(decision):
    sch, _ = loop_of_extent(8)
    with pytest.raises(ScheduleError, match="not an index"):
        sch.sample_categorical([10, 20, 30], [1, 1, 1], decision=decision)


@pytest.mark.parametrize(
    ("candidates", "probs"), [([1, 2], [1.0]), ([], []), ([1, 2], [0, 0]), ([1, 2], [-1, 2])]
)
def test_categorical_refuses_bad_distributions(candidates, probs):
    sch, _ = loop_of_extent(8)
    with pytest.raises(ScheduleError, match="sample_categorical"):
        sch.sample_categorical(candidates, probs)


def test_categorical_value_drives_a_schedule():
    wl = chain((1000,))
    for decision in range(3):
        sch = wl.schedule()
        (i,) = loops_of(sch, "B")
        factor = sch.sample_categorical([4, 16, 64], [1, 1, 1], decision=decision)
        _, inner = sch.split(i, [None, factor])
        sch.vectorize(inner)
        assert extents(sch, [inner]) == [[4, 16, 64][decision]]
        assert sch.trace.instructions[-2].args["factors"] == [None, {"rv": factor.rv}]
        assert_computes(wl, sch)
