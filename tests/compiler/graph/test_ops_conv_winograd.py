"""conv2d_winograd: on weights transformed by winograd.pack_winograd it computes PyTorch's stride-1
3x3 conv2d for both output tiles (odd and even sizes, asymmetric padding, output extents that are
not whole tiles), its te compute agrees with its reference, its type rule refuses what cannot be
computed, and with a fused bias + relu it schedules under the default space."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from compiler import te, winograd
from compiler.graph import OPS, Attrs
from tests.compiler.graph.op_check import (
    assert_compiles_to_reference,
    assert_schedules,
    check_refused,
    owned_ops,
    random_inputs,
)

# (x shape, weight shape [K, C, 3, 3], padding)
CONVS = {
    "pad 1, H != W": ((2, 5, 9, 7), (8, 5, 3, 3), (1, 1, 1, 1)),
    "no padding, odd output": ((1, 3, 8, 11), (6, 3, 3, 3), (0, 0, 0, 0)),
    "asymmetric padding": ((1, 4, 6, 7), (16, 4, 3, 3), (1, 0, 2, 1)),
    "output smaller than a tile": ((1, 2, 3, 4), (3, 2, 3, 3), (0, 0, 0, 1)),
}


def torch_conv2d(x: np.ndarray, w: np.ndarray, padding: tuple[int, int, int, int]) -> np.ndarray:
    top, left, bottom, right = padding
    padded = F.pad(torch.from_numpy(x).double(), (left, right, top, bottom))
    return F.conv2d(padded, torch.from_numpy(w).double()).numpy()


@pytest.mark.parametrize("m", winograd.TILES)
@pytest.mark.parametrize("case", sorted(CONVS))
def test_conv2d_winograd_is_pytorchs_conv2d_on_transformed_weights(case, m):
    x_shape, w_shape, padding = CONVS[case]
    x, w = random_inputs([x_shape, w_shape])
    packed = winograd.pack_winograd(w, m)
    assert packed.shape == (m + 2, m + 2, w_shape[1], w_shape[0])
    # F(4, 3)'s transforms multiply by up to 8 and 1/24: float32 rounding of a few units in 1e-6 of
    # the outputs' magnitude (up to 12 here), in an order that depends on the host's vector width
    # (2.6e-5 off on an AVX2 Zen 3, within 2e-5 on AVX-512 hosts)
    rtol = {2: 1e-5, 4: 5e-5}[m]
    want = assert_compiles_to_reference("conv2d_winograd", [x, packed], {"padding": padding}, rtol=rtol)
    np.testing.assert_allclose(want, torch_conv2d(x, w, padding), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("m", winograd.TILES)
def test_the_transform_matrices_compute_a_3_tap_correlation(m):
    """A^T [(G g) * (B^T d)] is the m outputs of correlating d (m + 2 taps) with g (3 taps)."""
    at, g, bt = winograd.matrices(m)
    rng = np.random.default_rng(m)
    d, k = rng.standard_normal(m + 2), rng.standard_normal(3)
    np.testing.assert_allclose(at @ ((g @ k) * (bt @ d)), np.correlate(d, k, "valid"), rtol=1e-12)


def test_only_3x3_weights_and_known_tiles_are_transformed():
    with pytest.raises(ValueError, match="takes 3x3 weights, got 1x1"):
        winograd.pack_winograd(np.zeros((4, 4, 1, 1), "float32"), 2)
    with pytest.raises(ValueError, match=r"tile 3 is not one of \(2, 4\)"):
        winograd.matrices(3)


REFUSED = {
    "weights not transformed": (((1, 4, 8, 8), (8, 4, 3, 3)), "is not Winograd weights"),
    "rank 5 weights": (((1, 4, 8, 8), (2, 4, 3, 3, 4)), r"w \[alpha, alpha, C, K\] \(rank 4\)"),
    "channels differ": (((1, 4, 8, 8), (4, 4, 5, 8)), "w takes 5 input channels, x has 4"),
    "kernel larger than input": (((1, 4, 2, 2), (4, 4, 4, 8)), "does not fit the padded input"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_arguments_are_refused(case):
    shapes, reason = REFUSED[case]
    check_refused("conv2d_winograd", [(s, "float32") for s in shapes], {"padding": (0, 0, 0, 0)}, reason)


def test_every_operator_of_the_module_is_checked():
    assert owned_ops("compiler.graph.ops.conv_winograd") == {"conv2d_winograd"}


def test_conv2d_winograd_bias_relu_schedules_under_the_default_space():
    """What fusion hands the tuner: padding, the constant matrices, three reductions (input
    transform, batched matmul, output transform), the copy back to NCHW inlined into the epilogue
    and a bias + relu; samples of the rule space compute the right answer."""
    x_shape, (K, C, _, _), padding = CONVS["asymmetric padding"]
    packed_shape = (4, 4, C, K)
    x, w = te.placeholder(x_shape, "float32", "x"), te.placeholder(packed_shape, "float32", "w")
    bias = te.placeholder((K, 1, 1), "float32", "bias")
    attrs = Attrs.of({"padding": padding})
    conv = OPS["conv2d_winograd"].compute([x, w], attrs, "conv")
    add = te.compute(conv.shape, lambda n, k, y, x: conv[n, k, y, x] + bias[k, 0, 0], name="add")
    relu = te.compute(conv.shape, lambda *i: te.max(add[i], 0.0), name="relu")

    def reference(x, w, bias):
        return np.maximum(OPS["conv2d_winograd"].reference([x, w], attrs) + bias, 0)

    func = te.create_prim_func([x, w, bias, relu])
    assert assert_schedules(func, reference, [x_shape, packed_shape, (K, 1, 1)], range(4))
