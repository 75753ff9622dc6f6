"""matmul: numpy's semantics for rank >= 2 (PyTorch agrees), batch dims broadcast, one reduction
block the schedule space tiles, and refusals of what does not multiply."""

import numpy as np
import pytest
import torch

from compiler.graph import OPS, Attrs, TensorType
from compiler.ir import Block
from compiler.visit import walk_stmt
from tests.compiler.graph.op_check import (
    assert_compiles_to_reference,
    assert_schedules,
    check_refused,
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
    check_refused("matmul", [(s, "float32") for s in shapes], {}, reason)


def test_mixed_dtypes_are_refused():
    args = [((5, 7), "float32"), ((7, 3), "float64")]
    check_refused("matmul", args, {}, r"arguments mix dtypes \['float32', 'float64'\]")


def test_batched_matmul_schedules_under_the_default_space():
    shapes = MATMULS["broadcast batch dims"]
    func = prim_func("matmul", random_inputs(shapes), {})
    for sch in assert_schedules(func, np.matmul, shapes, range(3)):
        assert any(i.kind == "decompose_reduction" for i in sch.trace.instructions)  # it was tiled


def eight_bit(shapes, dtypes, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(np.iinfo(d).min, np.iinfo(d).max + 1, s).astype(d) for s, d in zip(shapes, dtypes)]


@pytest.mark.parametrize("case", sorted(MATMULS))
@pytest.mark.parametrize("dtypes", [("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8")])
def test_matmul_integer_sums_8_bit_products_exactly_in_int32(case, dtypes):
    arrays = eight_bit(MATMULS[case], dtypes)
    want = assert_compiles_to_reference("matmul_integer", arrays, {})
    assert want.dtype == np.int32
    np.testing.assert_array_equal(want, np.matmul(*(a.astype(np.int64) for a in arrays)))


def test_matmul_integer_takes_8_bit_operands_only():
    check_refused("matmul_integer", [((2, 3), "int32"), ((3, 4), "int8")], {}, "argument 0 has dtype int32")
    check_refused("matmul_integer", [((2, 3), "uint8"), ((4, 4), "int8")], {}, "inner dimensions differ")
