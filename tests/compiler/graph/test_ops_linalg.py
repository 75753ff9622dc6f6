"""matmul: numpy's semantics for rank >= 2 (PyTorch agrees), batch dims broadcast, one reduction
block the schedule space tiles, and refusals of what does not multiply."""

import numpy as np
import pytest
import torch

from compiler.graph import OPS, Attrs, GraphError, TensorType
from compiler.ir import Block
from compiler.visit import walk_stmt
from tests.compiler.graph.op_check import (
    assert_compiles_to_reference,
    assert_schedules,
    infer,
    prim_func,
    random_inputs,
)

MATMULS = {
    "2-D": ((5, 7), (7, 3)),
    "batched": ((2, 5, 7), (2, 7, 3)),
    "broadcast batch dims": ((2, 1, 3, 4), (5, 4, 6)),
    "2-D @ batched": ((3, 4), (2, 4, 5)),
    "size-1 batch on both sides": ((1, 3, 4), (1, 4, 2)),
}


@pytest.mark.parametrize("case", sorted(MATMULS))
def test_matmul_matches_pytorch_and_compiles(case):
    arrays = random_inputs(MATMULS[case])
    want = assert_compiles_to_reference("matmul", arrays, {})
    np.testing.assert_allclose(
        want, torch.matmul(*map(torch.from_numpy, arrays)).numpy(), rtol=1e-5, atol=1e-5
    )


def test_matmul_in_float64():
    assert (
        assert_compiles_to_reference(
            "matmul", random_inputs(MATMULS["broadcast batch dims"], dtype="float64"), {}
        ).dtype
        == np.float64
    )


def test_matmul_is_one_reduction_block_reading_size_1_batch_dims_at_0():
    func = prim_func("matmul", random_inputs(MATMULS["broadcast batch dims"]), {})
    (block,) = [s for s in walk_stmt(func.body) if isinstance(s, Block)]
    assert [iv.kind for iv in block.iter_vars] == list("SSSSR")
    assert "in0[v_n0, 0, v_i, v_k]" in func.script() and "in1[v_n1, v_k, v_j]" in func.script()


def test_matmul_flops_are_two_per_multiply_add():
    args = [TensorType(s, "float32") for s in MATMULS["broadcast batch dims"]]
    out = infer("matmul", [a.shape for a in args], {})
    assert out.shape == (2, 5, 3, 6)
    assert OPS["matmul"].flops(args, out, Attrs.of({})) == 2 * (2 * 5 * 3 * 6) * 4


REFUSED = {  # argument shapes, the reason
    "rank 1": ([(4,), (4, 3)], "rank >= 2"),
    "inner dims differ": ([(2, 5, 7), (2, 6, 3)], "inner dimensions differ"),
    "batch dims do not broadcast": ([(2, 5, 7), (3, 7, 3)], "do not broadcast"),
    "one argument": ([(5, 7)], "takes 2 argument"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_arguments_are_refused(case):
    shapes, reason = REFUSED[case]
    with pytest.raises(GraphError, match=reason) as info:
        infer("matmul", shapes, {})
    assert info.value.op == "matmul"


def test_mixed_dtypes_are_refused():
    with pytest.raises(GraphError, match="one dtype"):
        infer("matmul", [(5, 7), (7, 3)], {}, ["float32", "float64"])


def test_batched_matmul_schedules_under_the_default_space():
    shapes = MATMULS["broadcast batch dims"]
    func = prim_func("matmul", random_inputs(shapes), {})
    for sch in assert_schedules(func, np.matmul, shapes, range(3)):
        assert any(i.kind == "decompose_reduction" for i in sch.trace.instructions)  # it was tiled
