"""Property: random stochastic schedules of matmul and mm_relu compute what numpy computes.

Each example splits every loop into a random number of parts (sampled perfect tiles or arbitrary,
often non-dividing factors), reorders all loops at random, then tries a random reverse_compute_at
of relu, decompose_reduction and loop kinds; a primitive that refuses must leave the program as it
was. The result must match numpy and replay from its JSON trace into the identical program.
"""

import json

from helpers import assert_computes, extents, matmul, mm_relu
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import Schedule, ScheduleError, Trace

SHAPES = [(16, 24, 8), (33, 40, 17), (64, 64, 64), (97, 127, 61)]


def attempt(sch: Schedule, primitive: str, *args) -> bool:
    """Apply a primitive if it is legal; a refusal must not change the program or the trace."""
    before = (sch.func, sch.trace)
    try:
        getattr(sch, primitive)(*args)
    except ScheduleError:
        assert (sch.func, sch.trace) == before, f"refused {primitive} changed the schedule"
        return False
    return True


def split_all(sch: Schedule, block: str, data: st.DataObject) -> list:
    loops = []
    for loop in sch.get_loops(sch.get_block(block)):
        parts = data.draw(st.integers(1, 4), label=f"parts of {loop.name}")
        if parts == 1:
            loops.append(loop)
        elif data.draw(st.booleans(), label="perfect tile"):
            limit = data.draw(st.sampled_from([-1, 4, 16, 64]), label="max innermost")
            loops += sch.split(loop, sch.sample_perfect_tile(loop, n=parts, max_innermost_factor=limit))
        else:
            factors = data.draw(st.lists(st.integers(1, 9), min_size=parts, max_size=parts), label="factors")
            factors[data.draw(st.integers(0, parts - 1), label="inferred")] = None
            loops += sch.split(loop, factors)
    return loops


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_schedules_compute_what_numpy_computes(data):
    fused = data.draw(st.booleans(), label="mm_relu")
    wl = (mm_relu if fused else matmul)(*data.draw(st.sampled_from(SHAPES), label="shape"))
    block = "Y" if fused else "C"
    sch = wl.schedule(seed=data.draw(st.integers(0, 2**16), label="seed"))
    loops = split_all(sch, block, data)
    sch.reorder(*data.draw(st.permutations(loops), label="order"))
    main = sch.get_block(block)

    if fused and data.draw(st.booleans(), label="move relu"):
        attempt(sch, "reverse_compute_at", sch.get_block("C"), data.draw(st.sampled_from(loops)))
    if data.draw(st.booleans(), label="decompose"):
        attempt(sch, "decompose_reduction", main, data.draw(st.sampled_from(loops)))
    for kind in data.draw(st.lists(st.sampled_from(["vectorize", "unroll", "parallel"]), max_size=3)):
        current = sch.get_loops(main)
        # Unrolling is bounded tighter: two loops of 64 unrolled inside each other were 4,096 copies of
        # the body, which LLVM's register coalescer took over 20 minutes to compile.
        longest = 16 if kind == "unroll" else 64
        choices = (
            current[:2] if kind == "parallel" else [lp for lp in current if extents(sch, [lp])[0] <= longest]
        )
        if choices:
            attempt(sch, kind, data.draw(st.sampled_from(choices), label=f"{kind} loop"))

    assert_computes(wl, sch, seed=data.draw(st.integers(0, 3), label="input seed"))
    replayed = Trace.from_json(json.loads(json.dumps(sch.trace.to_json()))).apply(wl.func)
    assert replayed.func == sch.func
