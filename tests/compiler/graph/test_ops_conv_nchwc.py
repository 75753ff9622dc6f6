"""The NCHWc convolutions: on packed weights and on input in either layout they compute PyTorch's
conv2d (dense and depthwise; strides, dilation, asymmetric padding, odd sizes), the copy back to
NCHW inverts the blocking and drops padding channels, their te computes agree with their
references, their type rules refuse what cannot be computed, and with a fused epilogue they
schedule under the default space."""

import numpy as np
import pytest

from compiler import nchwc, te, topi
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

# (x shape NCHW, unpacked weight shape [K, C, R, S], input block (None: NCHW), kb, attrs)
CONVS = {
    "3x3 pad 1, blocked, H != W": ((1, 8, 9, 7), (12, 8, 3, 3), 4, 6, conv_attrs(padding=(1, 1, 1, 1))),
    "1x1, blocked, blocks differ": ((2, 6, 5, 3), (8, 6, 1, 1), 3, 8, conv_attrs()),
    "stride 2, asymmetric pad, blocked": (
        (1, 4, 11, 8),
        (4, 4, 3, 3),
        2,
        2,
        conv_attrs((2, 2), (1, 0, 2, 1)),
    ),
    "dilation 2, NCHW input": (
        (1, 3, 10, 9),
        (4, 3, 3, 3),
        None,
        2,
        conv_attrs((1, 2), (2, 2, 2, 2), (2, 2)),
    ),
}


@pytest.mark.parametrize("case", sorted(CONVS))
def test_conv2d_nchwc_is_pytorchs_conv2d_in_blocks(case):
    x_shape, w_shape, cb, kb, a = CONVS[case]
    x, w = random_inputs([x_shape, w_shape])
    data = x if cb is None else nchwc.to_nchwc_numpy(x, cb)
    want = assert_compiles_to_reference("conv2d_nchwc", [data, topi.pack_kblock(w, kb)], a)
    np.testing.assert_allclose(nchwc.from_nchwc_numpy(want), torch_conv2d(x, w, a), rtol=1e-5, atol=1e-5)


# (x shape NCHW, kernel (R, S), block, input blocked, attrs)
DEPTHWISE = {
    "3x3 pad 1, blocked, odd sizes": ((1, 8, 9, 7), (3, 3), 4, True, conv_attrs(padding=(1, 1, 1, 1))),
    "3x3 stride 2 pad 1, blocked": ((2, 6, 11, 10), (3, 3), 3, True, conv_attrs((2, 2), (1, 1, 1, 1))),
    "3x3 stride 2, NCHW, asymmetric": ((1, 4, 8, 9), (3, 3), 4, False, conv_attrs((2, 2), (0, 1, 1, 0))),
    "5x3 dilation 2, NCHW input": ((1, 2, 12, 7), (5, 3), 2, False, conv_attrs((1, 1), (2, 1, 2, 1), (2, 2))),
}


@pytest.mark.parametrize("case", sorted(DEPTHWISE))
def test_depthwise_conv2d_nchwc_is_pytorchs_grouped_conv2d_in_blocks(case):
    x_shape, (R, S), cb, blocked, a = DEPTHWISE[case]
    C = x_shape[1]
    x, w = random_inputs([x_shape, (C, 1, R, S)])
    packed = nchwc.pack_depthwise(w, cb)
    assert packed.shape == (C // cb, R, S, cb)
    np.testing.assert_array_equal(nchwc.unpack_depthwise(packed), w)
    data = nchwc.to_nchwc_numpy(x, cb) if blocked else x
    want = assert_compiles_to_reference("depthwise_conv2d_nchwc", [data, packed], a)
    np.testing.assert_allclose(nchwc.from_nchwc_numpy(want), torch_conv2d(x, w, a, C), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels", [12, 10])
def test_from_nchwc_inverts_the_blocking_and_drops_padding_channels(channels):
    (x,) = random_inputs([(2, channels, 5, 3)])
    blocked = nchwc.to_nchwc_numpy(nchwc.zero_padded(x, 1, 12), 4)
    assert blocked[1, 2, 3, 1, 1] == x[1, 2 * 4 + 1, 3, 1]
    got = assert_compiles_to_reference("from_nchwc", [blocked], {"channels": channels})
    np.testing.assert_array_equal(got, x)


CONV, DEPTHWISE_OP = "conv2d_nchwc", "depthwise_conv2d_nchwc"
REFUSED = {
    "conv weights not packed": (CONV, ((1, 4, 8, 8), (8, 4, 3, 3)), r"w \[K/kb, C, R, S, kb\]"),
    "conv channels differ": (CONV, ((1, 2, 8, 8, 4), (2, 4, 3, 3, 4)), "w takes 4 input channels, x has 8"),
    "conv on rank 3": (CONV, ((4, 8, 8), (2, 4, 3, 3, 4)), r"NCHW \(rank 4\) or NCHWc \(rank 5\)"),
    "conv kernel too large": (CONV, ((1, 4, 2, 2), (2, 4, 3, 3, 4)), "does not fit the padded input"),
    "depthwise filters differ": (DEPTHWISE_OP, ((1, 8, 8, 8), (1, 3, 3, 4)), "filters for 4 channels"),
    "depthwise blocks differ": (DEPTHWISE_OP, ((1, 2, 8, 8, 4), (4, 3, 3, 2)), "block 4 differs"),
    "from_nchwc on NCHW": ("from_nchwc", ((1, 8, 4, 4),), r"needs x NCHWc \(rank 5\)"),
    "from_nchwc a block short": ("from_nchwc", ((1, 2, 4, 4, 8),), "channels=8 do not end in x's last"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_arguments_are_refused(case):
    op, shapes, reason = REFUSED[case]
    a = {"channels": 8} if op == "from_nchwc" else conv_attrs()
    check_refused(op, [(s, "float32") for s in shapes], a, reason)


def test_every_operator_of_the_module_is_checked():
    assert owned_ops("compiler.graph.ops.conv_nchwc") == {CONV, DEPTHWISE_OP, "from_nchwc"}


def test_a_blocked_depthwise_conv_with_relu6_and_the_copy_back_schedules_under_the_default_space():
    """What fusion hands the tuner for a depthwise conv feeding an NCHW layer: the blocked reduction
    over the taps, a clip and the copy back to NCHW; samples of the rule space compute the right
    answer, and the reduction's vectorized loop runs along the block of channels."""
    a = conv_attrs((2, 2), (1, 1, 1, 1))
    x_shape, w_shape = (1, 2, 9, 9, 8), (2, 3, 3, 8)
    x, w = te.placeholder(x_shape, "float32", "x"), te.placeholder(w_shape, "float32", "w")
    conv = OPS["depthwise_conv2d_nchwc"].compute([x, w], Attrs.of(a), "conv")
    clip = te.compute(conv.shape, lambda *i: te.min(te.max(conv[i], 0.0), 6.0), name="clip")
    out = OPS["from_nchwc"].compute([clip], Attrs.of({"channels": 16}), "out")

    def reference(x, w):
        blocked = OPS["depthwise_conv2d_nchwc"].reference([x, w], Attrs.of(a))
        return nchwc.from_nchwc_numpy(np.clip(blocked, 0, 6))

    func = te.create_prim_func([x, w, out])
    for sch in assert_schedules(func, reference, [x_shape, w_shape], range(4)):
        tiles = [i.args["n"] for i in sch.trace.instructions if i.kind == "sample_perfect_tile"]
        assert tiles[:6] == [2, 2, 4, 4, 4, 4]  # SSRSRS: (s, r), then (ci, x, y, co, n)
