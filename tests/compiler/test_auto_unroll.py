"""pragma_auto_unroll_max_step: loops whose subtree runs at most that many statements are unrolled,
innermost first; parallel regions are never inside an unrolled loop; results are unchanged."""

import json
import pickle

import pytest
from helpers import assert_computes, loops_of, matmul

from compiler import Trace
from compiler.auto_unroll import AUTO_UNROLL_MAX_STEP
from compiler.ir import For
from compiler.lower import lower
from compiler.visit import walk_stmt


def lowered_kinds(sch) -> dict[str, str]:
    return {s.var.name: s.kind for s in walk_stmt(lower(sch.func).body) if isinstance(s, For)}


def tiled_matmul(max_step: int | None, on_loop: str | None = None):
    """matmul 97x127x7 tiled i: 13 x 8 (guarded), j: 32 x 4 (guarded), k: 7."""
    wl = matmul(97, 127, 7)
    sch = wl.schedule()
    c = sch.get_block("C")
    i, j, k = loops_of(sch, "C")
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i0, j0, k, i1, j1)
    if max_step is not None:
        target = sch.get_block("root") if on_loop is None else {"i_0": i0, "k": k}[on_loop]
        sch.annotate(target, AUTO_UNROLL_MAX_STEP, max_step)
    sch.decompose_reduction(c, k)
    return wl, sch


@pytest.mark.parametrize(
    ("max_step", "unrolled"),
    [
        (None, set()),
        (0, set()),
        (4, {"j_1", "j_1_init"}),
        (32, {"j_1", "j_1_init", "i_1", "i_1_init"}),
        (224, {"j_1", "j_1_init", "i_1", "i_1_init", "k"}),
    ],
)
def test_root_budget_unrolls_innermost_loops_first(max_step, unrolled):
    wl, sch = tiled_matmul(max_step)
    kinds = lowered_kinds(sch)
    assert {name for name, kind in kinds.items() if kind == "unrolled"} == unrolled
    assert_computes(wl, sch)


def test_a_loop_annotation_applies_only_below_that_loop():
    wl, sch = tiled_matmul(64, on_loop="k")
    kinds = lowered_kinds(sch)
    assert {name for name, kind in kinds.items() if kind == "unrolled"} == {"i_1", "j_1"}
    assert_computes(wl, sch)


def test_no_loop_around_a_parallel_region_is_unrolled():
    wl = matmul(8, 16, 4)
    sch = wl.schedule()
    _, j, _ = loops_of(sch, "C")
    sch.parallel(j)
    sch.annotate(sch.get_block("root"), AUTO_UNROLL_MAX_STEP, 10**6)
    kinds = lowered_kinds(sch)
    assert kinds["i"] == "serial"
    assert (kinds["j"], kinds["k"]) == ("parallel", "unrolled")
    assert_computes(wl, sch)


def test_a_sampled_budget_replays_with_a_new_decision():
    wl = matmul(8, 16, 4)
    sch = wl.schedule(seed=3)
    budget = sch.sample_categorical([0, 16, 64], [0.2, 0.4, 0.4])
    sch.annotate(sch.get_block("root"), AUTO_UNROLL_MAX_STEP, budget)
    trace = Trace.from_json(json.loads(json.dumps(sch.trace.to_json())))
    index = next(iter(trace.decisions))
    for decision, value in enumerate([0, 16, 64]):
        func = trace.apply(wl.func, decisions={index: decision}).func
        assert func.attrs == ((AUTO_UNROLL_MAX_STEP, value),)
        assert pickle.loads(pickle.dumps(func)) == func  # sampled values are plain ints in the program
