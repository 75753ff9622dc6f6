"""Buffer compaction: intermediates used under one loop are allocated there, shrunk to one
iteration's region, and stay correct (including when that makes them private to parallel threads)."""

import numpy as np

from compiler import Schedule, build
from compiler.ir import Allocate
from compiler.lower import lower
from compiler.visit import walk_stmt
from compiler.workloads import workload_from_spec


def _allocations(func):
    return {s.buffer.name: s.buffer.shape for s in walk_stmt(lower(func).body) if isinstance(s, Allocate)}


def _check(workload, func, seed=0):
    inputs = workload.random_inputs(np.random.default_rng(seed))
    outputs = workload.empty_outputs()
    build(func, listings=False)(*inputs, *outputs)
    for got, want in zip(outputs, workload.reference(*inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_packed_operand_panel_and_local_accumulators():
    workload = workload_from_spec({"op": "matmul", "params": {"M": 48, "N": 64, "K": 40}})
    sch = Schedule(workload.func)
    c = sch.get_child_blocks(sch.get_block("root"))[0]
    b_panel = sch.cache_read(c, 1)
    acc = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(j0, i0, k, i1, j1)
    sch.compute_at(b_panel, j0)
    sch.reverse_compute_at(acc, i0)
    sch.decompose_reduction(c, k)
    sch.vectorize(j1)
    sch.parallel(j0)
    shapes = _allocations(sch.func)
    assert shapes[b_panel.name] == (40, 16)  # all of K, one 16-column stripe: contiguous rows
    assert shapes["C_local"] == (8, 16)  # one register tile
    _check(workload, sch.func)


def test_padding_computed_under_a_parallel_loop_it_does_not_depend_on_is_private():
    workload = workload_from_spec(
        {
            "op": "conv2d_nchw",
            "params": {"N": 1, "C": 3, "H": 12, "W": 10, "K": 8, "R": 3, "S": 3, "padding": 1},
        }
    )
    sch = Schedule(workload.func)
    conv = sch.get_block("conv2d_nchw")
    _, f, y, *_ = sch.get_loops(conv)
    sch.compute_at(sch.get_block("pad_temp"), y)
    sch.parallel(f)  # every output channel recomputes the same padded rows, each into its own copy
    assert _allocations(sch.func)["pad_temp"] == (1, 3, 3, 12)
    _check(workload, sch.func)
