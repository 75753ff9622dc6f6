"""decompose_reduction at every legal loop (after reorders, guarded splits and compute_at), and the
loops where the init would run more than once per element; the blocks it leaves are named as TVM
names them (`Y_init`, `Y_update`), and what named the block `Y` before still finds the update."""

import json
import re

import numpy as np
import pytest
from helpers import (
    ProgramCase,
    assert_computes,
    conv2d,
    extents,
    loop_kinds,
    loops_of,
    matmul,
    mm_relu,
    schedule_error,
    softmax,
)

from compiler import ScheduleError, Trace, te
from compiler.schedule.tree import find_block
from compiler.script import from_source


def has_init(sch, block: str) -> bool:
    return find_block(sch.func.body, block)[1].init is not None


@pytest.mark.parametrize("level", range(3), ids=["i", "j", "k"])
def test_decompose_at_each_matmul_loop(level):
    wl = matmul()
    sch = wl.schedule()
    c = sch.get_block("C")
    loops = sch.get_loops(c)
    init = sch.decompose_reduction(c, loops[level])
    assert init.name == "C_init"
    assert not has_init(sch, "C")
    assert extents(sch, sch.get_loops(init)) == [97, 127]  # one init per output element
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", range(2), ids=["i", "k"])
def test_decompose_above_a_reduction_loop_that_encloses_spatial_loops(level):
    wl = matmul()
    sch = wl.schedule()
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.reorder(i, k, j)
    sch.decompose_reduction(c, [i, k][level])
    assert_computes(wl, sch)


def test_decompose_inside_a_reduction_loop_is_refused():
    sch = matmul().schedule()
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.reorder(i, k, j)
    with schedule_error("C", "j", "k", match="enclose"):
        sch.decompose_reduction(c, j)


def test_decompose_inside_an_outer_part_of_a_split_reduction_is_refused():
    sch = matmul().schedule()
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    k0, k1 = sch.split(k, [None, 8])
    sch.reorder(i, k0, j, k1)
    with schedule_error("C", k0.name, match="enclose"):
        sch.decompose_reduction(c, j)
    with schedule_error("C", k1.name, match="enclose"):
        sch.decompose_reduction(c, k1)


@pytest.mark.parametrize("level", range(3))
def test_decompose_after_guarded_splits(level):
    wl = matmul()
    sch = wl.schedule()
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, [None, 16])  # 127 -> 8 * 16: the init keeps the guard of j
    k0, k1 = sch.split(k, [None, 8])  # 61 -> 8 * 8: the init drops the guard of k
    sch.reorder(i, j0, k0, k1, j1)
    sch.decompose_reduction(c, [i, j0, k0][level])
    assert_computes(wl, sch)


def test_decompose_the_mlc_schedule_with_a_vectorized_inner_loop():
    wl = mm_relu()
    sch = wl.schedule()
    y = sch.get_block("Y")
    _, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(j0, k, j1)
    sch.vectorize(j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    init = sch.decompose_reduction(y, k)
    assert loop_kinds(sch, sch.get_loops(init))[-1] == "vectorized"
    assert_computes(wl, sch)


def test_decompose_a_reduction_computed_at_its_consumer():
    wl = mm_relu()
    sch = wl.schedule()
    y = sch.get_block("Y")
    ci, _ = loops_of(sch, "C")
    sch.compute_at(y, ci)
    loops = sch.get_loops(y)
    sch.decompose_reduction(y, loops[-1])
    assert_computes(wl, sch)


@pytest.mark.parametrize("block", ["M", "S"])
def test_decompose_max_and_sum_of_softmax(block):
    wl = softmax()
    sch = wl.schedule()
    b = sch.get_block(block)
    _, k = sch.get_loops(b)
    sch.decompose_reduction(b, k)
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", range(5), ids=["b", "f", "y", "x", "rc"])
def test_decompose_conv_at_loops_outside_its_reduction(level):
    wl = conv2d()
    sch = wl.schedule()
    conv = sch.get_block("conv")
    sch.decompose_reduction(conv, sch.get_loops(conv)[level])
    assert_computes(wl, sch)


@pytest.mark.parametrize("level", [5, 6], ids=["ry", "rx"])
def test_decompose_conv_inside_its_reduction_is_refused(level):
    sch = conv2d().schedule()
    conv = sch.get_block("conv")
    loop = sch.get_loops(conv)[level]
    with schedule_error("conv", loop.name, "rc", match="enclose"):
        sch.decompose_reduction(conv, loop)


def test_decompose_a_loop_that_mixes_spatial_and_reduction_is_refused():
    sch = matmul().schedule()
    c = sch.get_block("C")
    _, j, k = sch.get_loops(c)
    fused = sch.fuse(j, k)
    with schedule_error("C", fused.name, match="mix"):
        sch.decompose_reduction(c, fused)


def test_decompose_a_block_without_init_is_refused():
    sch = mm_relu().schedule()
    c = sch.get_block("C")
    with schedule_error("C", match="no init"):
        sch.decompose_reduction(c, sch.get_loops(c)[0])
    y = sch.get_block("Y")
    i, _, _ = sch.get_loops(y)
    sch.decompose_reduction(y, i)
    with schedule_error("Y_update", match="no init"):
        sch.decompose_reduction(y, i)


def test_decompose_at_a_loop_that_does_not_enclose_the_block_is_refused():
    sch = mm_relu().schedule()
    ci, _ = loops_of(sch, "C")
    with schedule_error("Y", ci.name, match="does not enclose"):
        sch.decompose_reduction(sch.get_block("Y"), ci)


def printed_blocks(func) -> list[str]:
    return re.findall(r'T\.block\("(\w+)"\)', func.script())


def test_the_course_mm_relu_prints_init_and_update_blocks_and_reads_back():
    """The MLC course's TensorIR chapter prints this program with `Y_init` and `Y_update`."""
    sch = mm_relu(128, 128, 128).schedule()
    block_y = sch.get_block("Y")
    _, j, k = sch.get_loops(block_y)
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(block_y, k)
    assert printed_blocks(sch.func) == ["Y_init", "Y_update", "C"]
    again = from_source(sch.func.script())
    assert again == sch.func
    assert again.structural_hash() == sch.func.structural_hash()
    with pytest.raises(ScheduleError, match="no block named 'Y'"):
        find_block(again.body, "Y")  # the former name is the schedule's, not the program's


def test_the_old_handle_still_schedules_the_renamed_update_block():
    wl = conv2d()
    sch = wl.schedule()
    conv = sch.get_block("conv")
    sch.decompose_reduction(conv, sch.get_loops(conv)[2])
    assert sch.get(conv).name == "conv_update"
    _, _, y, x, rc, ry, rx = sch.get_loops(conv)
    x0, x1 = sch.split(x, [None, 4])
    sch.reorder(x0, rc, ry, rx, x1)
    sch.vectorize(x1)
    sch.compute_at(sch.get_block("pad"), y)
    copied = sch.copy()
    copied.annotate(conv, "tag", 1)
    assert ("tag", 1) in find_block(copied.func.body, "conv_update")[1].annotations
    # Every handle names the update block as the handles made before the rename do: rules compare them.
    assert [b.name for b in sch.get_child_blocks(sch.get_block("root"))] == ["conv_init", "pad", "conv"]
    assert loop_kinds(sch, [sch.get_innermost_loop(sch.get_block("conv_update"))]) == ["vectorized"]
    assert_computes(wl, sch)


# A trace stored before the update block was renamed (as `Trace.to_json` writes it): it looks the block
# up again by its old name after decompose_reduction, and annotates it.
STORED_TRACE = """{"version": 1, "instructions": [
{"kind": "get_block", "args": {"name": "Y"}, "outputs": ["b0"], "decision": null},
{"kind": "get_loops", "args": {"block": {"rv": "b0"}}, "outputs": ["l1", "l2", "l3"], "decision": null},
{"kind": "decompose_reduction", "args": {"block": {"rv": "b0"}, "loop": {"rv": "l2"}}, "outputs": ["b4"],
 "decision": null},
{"kind": "get_block", "args": {"name": "Y"}, "outputs": ["b5"], "decision": null},
{"kind": "get_loops", "args": {"block": {"rv": "b5"}}, "outputs": ["l6", "l7", "l8"], "decision": null},
{"kind": "split", "args": {"loop": {"rv": "l7"}, "factors": [null, 8]}, "outputs": ["l9", "l10"],
 "decision": null},
{"kind": "reorder", "args": {"loops": [{"rv": "l9"}, {"rv": "l8"}, {"rv": "l10"}]}, "outputs": [],
 "decision": null},
{"kind": "vectorize", "args": {"loop": {"rv": "l10"}}, "outputs": [], "decision": null},
{"kind": "annotate", "args": {"target": {"rv": "b5"}, "key": "tag", "value": 1}, "outputs": [],
 "decision": null}]}"""


def test_a_stored_trace_that_names_the_update_block_by_its_old_name_replays():
    wl = mm_relu()
    sch = Trace.from_json(STORED_TRACE).apply(wl.func)
    assert sch.trace.to_json() == json.loads(STORED_TRACE)
    _, update = find_block(sch.func.body, "Y_update")
    assert update.init is None and update.annotations == (("tag", 1),)
    assert loop_kinds(sch, [sch.get_innermost_loop(sch.get_block("Y_update"))]) == ["vectorized"]
    assert_computes(wl, sch)


def test_an_update_name_taken_by_another_block_gets_a_unique_name():
    A = te.placeholder((31, 13), name="A")
    B = te.placeholder((13, 37), name="B")
    r = te.reduce_axis((0, 13), name="k")
    Y = te.compute((31, 37), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="Y")
    taken = te.compute((31, 37), lambda i, j: te.max(Y[i, j], 0.0), name="Y_update")
    wl = ProgramCase(te.create_prim_func([A, B, taken]), lambda a, b: (np.maximum(a @ b, 0),), 2)
    sch = wl.schedule()
    y = sch.get_block("Y")
    sch.decompose_reduction(y, sch.get_loops(y)[0])
    assert printed_blocks(sch.func) == ["Y_init", "Y_update_1", "Y_update"]
    assert sch.get(y).name == "Y_update_1"
    assert sch.get(sch.get_block("Y_update")).body.buffer.name == "Y_update"  # still te's block
    assert_computes(wl, sch)


def test_a_new_block_never_takes_the_former_name_of_the_update():
    """A cache of buffer Y in "local" is based on the name `Y_local`, which the reduction had before
    it was renamed: it takes the next name, so `Y_local` still finds the update, and the cache is
    named as it was before updates were renamed."""
    wl = mm_relu()
    text = wl.func.script().replace('T.block("Y")', 'T.block("Y_local")')
    sch = ProgramCase(from_source(text), wl.reference, wl.n_inputs).schedule()
    y = sch.get_block("Y_local")
    sch.decompose_reduction(y, sch.get_loops(y)[0])
    cache = sch.cache_read(sch.get_block("C"), 0, "local")
    assert cache.name == "Y_local_1"
    assert sch.get(sch.get_block("Y_local")).name == "Y_local_update"
    assert_computes(wl, sch)
