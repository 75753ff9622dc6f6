"""conv2d_kblock: on weights packed by topi.pack_kblock it computes PyTorch's conv2d (strides,
dilation, asymmetric padding, 1x1), its te compute agrees with its reference, its type rule refuses
what cannot be computed, and with a fused bias + relu it schedules under the default space."""

import numpy as np
import pytest

from compiler import te, topi
from compiler.graph import OPS, Attrs
from tests.compiler.graph.op_check import (
    assert_compiles_to_reference,
    assert_schedules,
    check_refused,
    conv_attrs,
    owned_ops,
    random_inputs,
    torch_conv2d,
)

# (x shape, unpacked weight shape [K, C, R, S], kb, attrs)
CONVS = {
    "3x3 pad 1, H != W, two blocks": ((2, 5, 9, 7), (8, 5, 3, 3), 4, conv_attrs(padding=(1, 1, 1, 1))),
    "stride 2, no padding": ((1, 3, 11, 8), (6, 3, 3, 2), 3, conv_attrs(strides=(2, 2))),
    "dilation 2, stride (1, 2)": ((1, 3, 10, 9), (4, 3, 3, 3), 2, conv_attrs((1, 2), (2, 2, 2, 2), (2, 2))),
    "asymmetric padding": ((1, 4, 8, 7), (6, 4, 3, 3), 6, conv_attrs(padding=(1, 0, 2, 1))),
    "1x1, 16-channel blocks": ((1, 7, 5, 6), (32, 7, 1, 1), 16, conv_attrs()),
}


@pytest.mark.parametrize("case", sorted(CONVS))
def test_conv2d_kblock_is_pytorchs_conv2d_on_packed_weights(case):
    x_shape, w_shape, kb, a = CONVS[case]
    x, w = random_inputs([x_shape, w_shape])
    packed = topi.pack_kblock(w, kb)
    assert packed.shape == (w_shape[0] // kb, *w_shape[1:], kb)
    want = assert_compiles_to_reference("conv2d_kblock", [x, packed], a)
    np.testing.assert_allclose(want, torch_conv2d(x, w, a), rtol=1e-5, atol=1e-5)


def test_pack_kblock_puts_each_block_of_output_channels_innermost():
    w = np.arange(8 * 3 * 1 * 2, dtype="float32").reshape(8, 3, 1, 2)
    packed = topi.pack_kblock(w, 4)
    assert packed[1, 2, 0, 1, 3] == w[1 * 4 + 3, 2, 0, 1]
    np.testing.assert_array_equal(topi.unpack_kblock(packed), w)


NO_PAD = conv_attrs()
REFUSED = {
    "weights not packed": (((1, 4, 8, 8), (8, 4, 3, 3)), NO_PAD, r"w \[K/kb, C, R, S, kb\] \(rank 5\)"),
    "channels differ": (((1, 4, 8, 8), (2, 5, 3, 3, 4)), NO_PAD, "w takes 5 input channels, x has 4"),
    "kernel larger than input": (((1, 4, 2, 2), (2, 4, 3, 3, 4)), NO_PAD, "does not fit the padded input"),
    "stride 0": (((1, 4, 8, 8), (2, 4, 3, 3, 4)), conv_attrs((0, 1)), r"strides=\(0, 1\) must be 2 ints"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_arguments_are_refused(case):
    shapes, a, reason = REFUSED[case]
    check_refused("conv2d_kblock", [(s, "float32") for s in shapes], a, reason)


def test_every_operator_of_the_module_is_checked():
    assert owned_ops("compiler.graph.ops.conv_kblock") == {"conv2d_kblock"}


def test_conv2d_kblock_bias_relu_schedules_under_the_default_space():
    """What fusion hands the tuner for a blocked conv: the blocked reduction, the copy back to NCHW
    (inlined into the epilogue) and a bias + relu; samples of the rule space compute the right
    answer, and the reduction's vectorized loop runs along the block of output channels."""
    x_shape, w_shape, kb, a = CONVS["3x3 pad 1, H != W, two blocks"]
    packed_shape = (w_shape[0] // kb, *w_shape[1:], kb)
    x, w = te.placeholder(x_shape, "float32", "x"), te.placeholder(packed_shape, "float32", "w")
    bias = te.placeholder((w_shape[0], 1, 1), "float32", "bias")
    conv = OPS["conv2d_kblock"].compute([x, w], Attrs.of(a), "conv")
    add = te.compute(conv.shape, lambda n, k, y, x: conv[n, k, y, x] + bias[k, 0, 0], name="add")
    relu = te.compute(conv.shape, lambda *i: te.max(add[i], 0.0), name="relu")

    def reference(x, w, bias):
        return np.maximum(OPS["conv2d_kblock"].reference([x, w], Attrs.of(a)) + bias, 0)

    func = te.create_prim_func([x, w, bias, relu])
    for sch in assert_schedules(func, reference, [x_shape, packed_shape, (w_shape[0], 1, 1)], range(4)):
        tiles = [i.args["n"] for i in sch.trace.instructions if i.kind == "sample_perfect_tile"]
        assert tiles[:8] == [2, 2, 2, 4, 4, 4, 4, 4]  # SSRSRS: (s, r, c), then (fi, x, y, fo, n)
