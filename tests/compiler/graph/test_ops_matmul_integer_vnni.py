"""matmul_integer_vnni: on weights packed by pack_vnni it computes matmul_integer's exact int32
result (2-D and batched rows, odd row counts), its type rule refuses what cannot be computed, and
the pack_vnni_weights pass rewrites exactly the quantized dense layers whose constant weights fit
the packing, without changing a result."""

import numpy as np
import pytest

from compiler import graph
from compiler.graph import Constant, GraphBuilder
from compiler.graph.ir import CallTIR
from compiler.graph.ops.matmul_integer_vnni import pack_vnni, unpack_vnni
from tests.compiler.graph.op_check import assert_compiles_to_reference, check_refused, owned_ops


def eight_bit(shape, dtype: str, seed: int) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(dtype)


@pytest.mark.parametrize(("x_shape", "k", "n"), [((7, 20), 20, 48), ((2, 5, 8), 8, 16), ((1, 1, 4), 4, 32)])
def test_it_is_matmul_integer_on_packed_weights(x_shape, k, n):
    x, w = eight_bit(x_shape, "uint8", 0), eight_bit((k, n), "int8", 1)
    packed = pack_vnni(w)
    assert packed.shape == (n // 16, k // 4, 16, 4) and packed.flags.c_contiguous
    want = assert_compiles_to_reference("matmul_integer_vnni", [x, packed], {})
    np.testing.assert_array_equal(want, x.astype(np.int32) @ w.astype(np.int32))


def test_pack_vnni_puts_four_reduction_steps_of_sixteen_columns_side_by_side():
    w = np.arange(8 * 32, dtype=np.int64).reshape(8, 32)
    packed = pack_vnni(w)
    assert packed[1, 1, 3, 2] == w[1 * 4 + 2, 1 * 16 + 3]
    np.testing.assert_array_equal(unpack_vnni(packed), w)


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ([((4, 8), "uint8"), ((8, 16), "int8")], r"w \[N/16, K/4, 16, 4\]"),
        ([((4, 8), "int8"), ((1, 2, 16, 4), "int8")], "takes uint8 x and int8 w"),
        ([((4, 12), "uint8"), ((1, 2, 16, 4), "int8")], "w takes 8 inputs per column, x has 12"),
    ],
)
def test_bad_arguments_are_refused(args, reason):
    check_refused("matmul_integer_vnni", args, {}, reason)


def test_every_operator_of_the_module_is_checked():
    assert owned_ops("compiler.graph.ops.matmul_integer_vnni") == {"matmul_integer_vnni"}


def test_the_pass_packs_constant_int8_weights_that_fit_and_leaves_the_rest():
    b = GraphBuilder()
    x = b.input("x", (1, 6, 8), "uint8")
    fits = b.call("matmul_integer", [x, b.constant("w1", eight_bit((8, 32), "int8", 2))])
    odd = b.call("matmul_integer", [x, b.constant("w2", eight_bit((8, 24), "int8", 3))])
    run_time = b.call("matmul_integer", [x, b.input("w3", (8, 16), "int8")])
    module = b.module([fits, odd, run_time])
    optimized = graph.optimize(module, check=True)
    ops = sorted(c.ops[0] for c in optimized.nodes() if isinstance(c, CallTIR))
    assert ops == ["matmul_integer", "matmul_integer", "matmul_integer_vnni"]
    packed = [
        a for c in optimized.nodes() if isinstance(c, CallTIR) for a in c.args if isinstance(a, Constant)
    ]
    assert (2, 2, 16, 4) in {a.type.shape for a in packed}
    x_value = eight_bit((1, 6, 8), "uint8", 4)
    w3 = eight_bit((8, 16), "int8", 5)
    want = [x_value.astype(np.int32) @ w.astype(np.int32) for w in (b.data for b in _weights(module))]
    want.append(x_value.astype(np.int32) @ w3.astype(np.int32))
    for got, expected in zip(graph.build(module)(x_value, w3), want, strict=True):
        np.testing.assert_array_equal(got, expected)


def _weights(module: graph.Module) -> list[Constant]:
    return sorted((n for n in module.nodes() if isinstance(n, Constant)), key=lambda c: c.name)
