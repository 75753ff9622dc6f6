"""matmul_nblock: on weights packed by topi.pack_nblock it computes numpy's matmul (2-D and batched
inputs, odd extents), its type rule refuses what cannot be computed, and with a fused bias + gelu
it schedules under the default space."""

import numpy as np
import pytest

from compiler import te, topi
from compiler.graph import OPS, Attrs, TensorType
from tests.compiler.graph.op_check import (
    assert_compiles_to_reference,
    assert_schedules,
    check_refused,
    infer,
    owned_ops,
    random_inputs,
)

# (x shape, unpacked weight shape [K, N], nb)
MATMULS = {
    "one row, 16-column blocks": ((1, 37), (37, 48), 16),
    "odd rows and reduction": ((13, 7), (7, 12), 4),
    "batched rows": ((2, 5, 9), (9, 6), 3),
    "one block": ((4, 3), (3, 5), 5),
}


@pytest.mark.parametrize("case", sorted(MATMULS))
def test_matmul_nblock_is_numpys_matmul_on_packed_weights(case):
    x_shape, w_shape, nb = MATMULS[case]
    x, w = random_inputs([x_shape, w_shape])
    packed = topi.pack_nblock(w, nb)
    assert packed.shape == (w_shape[1] // nb, w_shape[0], nb)
    want = assert_compiles_to_reference("matmul_nblock", [x, packed], {})
    np.testing.assert_allclose(want, x @ w, rtol=1e-5, atol=1e-5)


def test_pack_nblock_puts_each_block_of_columns_innermost():
    w = np.arange(3 * 8, dtype="float32").reshape(3, 8)
    packed = topi.pack_nblock(w, 4)
    assert packed[1, 2, 3] == w[2, 1 * 4 + 3]
    assert packed.flags.c_contiguous
    np.testing.assert_array_equal(topi.unpack_nblock(packed), w)


REFUSED = {
    "weights not packed": (((4, 8), (8, 16)), r"w \[N/nb, K, nb\] \(rank 3\)"),
    "x of rank 1": (((8,), (2, 8, 4)), r"x \[..., M, K\] \(rank >= 2\)"),
    "reduction differs": (((4, 8), (2, 7, 4)), "w takes 7 inputs per column, x has 8"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_arguments_are_refused(case):
    shapes, reason = REFUSED[case]
    check_refused("matmul_nblock", [(s, "float32") for s in shapes], {}, reason)


def test_every_operator_of_the_module_is_checked():
    assert owned_ops("compiler.graph.ops.matmul_nblock") == {"matmul_nblock"}


def test_matmul_nblock_bias_gelu_schedules_under_the_default_space():
    """What fusion hands the tuner for a packed dense layer: the blocked reduction, the copy to
    [M, N] (inlined into the epilogue) and a bias + gelu; samples of the rule space compute the
    right answer."""
    (m, k), (_, n), nb = (12, 20), (20, 32), 16
    x, w = te.placeholder((m, k), "float32", "x"), te.placeholder((n // nb, k, nb), "float32", "w")
    bias = te.placeholder((n,), "float32", "bias")
    mm = OPS["matmul_nblock"].compute([x, w], Attrs.of({}), "mm")
    add = te.compute(mm.shape, lambda i, j: mm[i, j] + bias[j], name="add")
    gelu = OPS["gelu"].compute([add], Attrs.of({"approximate": "none"}), "gelu")

    def reference(x, w, bias):
        return OPS["gelu"].reference([x @ topi.unpack_nblock(w) + bias], Attrs.of({"approximate": "none"}))

    func = te.create_prim_func([x, w, bias, gelu])
    for sch in assert_schedules(func, reference, [(m, k), (n // nb, k, nb), (n,)], range(4)):
        tiles = [i.args["n"] for i in sch.trace.instructions if i.kind == "sample_perfect_tile"]
        assert tiles[:4] == [2, 4, 4, 4]  # SSRSRS: k, then (ji, jo, i)


def test_matmul_nblock_flops_are_the_plain_matmuls():
    args = [TensorType((2, 5, 9), "float32"), TensorType((2, 9, 3), "float32")]
    out = infer("matmul_nblock", [a.shape for a in args], {})
    assert out.shape == (2, 5, 6)
    assert OPS["matmul_nblock"].flops(args, out, Attrs.of({})) == 2 * (2 * 5 * 6) * 9
