"""conv2d, max_pool2d and avg_pool2d: the numpy references agree with PyTorch (groups, dilation,
asymmetric padding, ceil_mode, count_include_pad), the te computes agree with the references, the
type rules refuse what cannot be computed, and conv2d + bias + relu schedules under the default space."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from compiler import te
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


def conv_attrs(strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1) -> dict:
    return {"strides": strides, "padding": padding, "dilation": dilation, "groups": groups}


CONVS = {
    "3x3 pad 1, H != W": ((2, 4, 9, 7), (6, 4, 3, 3), conv_attrs(padding=(1, 1, 1, 1))),
    "stride 2, no padding": ((1, 3, 11, 8), (5, 3, 3, 2), conv_attrs(strides=(2, 2))),
    "dilation 2, stride (1, 2)": ((1, 3, 10, 9), (4, 3, 3, 3), conv_attrs((1, 2), (2, 2, 2, 2), (2, 2))),
    "groups 2, asymmetric padding": ((1, 4, 8, 7), (6, 2, 3, 3), conv_attrs(padding=(1, 0, 2, 1), groups=2)),
    "groups 2, one output channel each": (
        (1, 4, 6, 5),
        (2, 2, 3, 3),
        conv_attrs(padding=(1, 1, 1, 1), groups=2),
    ),
    "depthwise, stride (2, 1)": ((2, 5, 7, 9), (5, 1, 3, 3), conv_attrs((2, 1), (1, 1, 1, 1), groups=5)),
    "depthwise, multiplier 2": ((1, 3, 6, 7), (6, 1, 3, 3), conv_attrs(padding=(0, 1, 0, 1), groups=3)),
    "1x1": ((1, 8, 5, 6), (3, 8, 1, 1), conv_attrs()),
}


def torch_conv2d(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    top, left, bottom, right = attrs["padding"]
    padded = F.pad(torch.from_numpy(x), (left, right, top, bottom))
    out = F.conv2d(padded, torch.from_numpy(w), None, attrs["strides"], 0, attrs["dilation"], attrs["groups"])
    return out.numpy()


@pytest.mark.parametrize("case", sorted(CONVS))
def test_conv2d_matches_pytorch_and_compiles(case):
    x_shape, w_shape, attrs = CONVS[case]
    arrays = random_inputs([x_shape, w_shape])
    want = assert_compiles_to_reference("conv2d", arrays, attrs)
    np.testing.assert_allclose(want, torch_conv2d(*arrays, attrs), rtol=1e-5, atol=1e-5)


def test_conv2d_in_float64():
    arrays = random_inputs([(1, 2, 5, 6), (4, 1, 2, 3)], dtype="float64")
    want = assert_compiles_to_reference("conv2d", arrays, conv_attrs((2, 1), (1, 0, 1, 2), (1, 2), 2))
    assert want.dtype == np.float64


def blocks(func) -> list[Block]:
    return [s for s in walk_stmt(func.body) if isinstance(s, Block)]


def test_conv2d_is_a_pad_block_then_one_reduction_over_c_r_s():
    """The structure the schedule space tiles: the pad block only when some padding is non-zero;
    depthwise reduces over (r, s) only."""
    x, w = random_inputs([(1, 4, 8, 7), (6, 2, 3, 3)])
    padded = blocks(prim_func("conv2d", [x, w], conv_attrs(padding=(0, 0, 1, 0), groups=2)))
    assert [b.name for b in padded] == ["out_pad", "out"]
    assert [iv.kind for iv in padded[1].iter_vars] == list("SSSSRRR")
    unpadded = blocks(prim_func("conv2d", [x, w], conv_attrs(groups=2)))
    assert [b.name for b in unpadded] == ["out"]
    x, w = random_inputs([(1, 4, 8, 7), (4, 1, 3, 3)])
    (depthwise,) = blocks(prim_func("conv2d", [x, w], conv_attrs(groups=4)))
    assert [iv.kind for iv in depthwise.iter_vars] == list("SSSSRR")


def test_conv2d_flops_count_two_per_multiply_add():
    attrs = conv_attrs(padding=(1, 1, 1, 1), groups=2)
    args = [TensorType((2, 4, 8, 7), "float32"), TensorType((6, 2, 3, 3), "float32")]
    out = infer("conv2d", [a.shape for a in args], attrs)
    assert OPS["conv2d"].flops(args, out, Attrs.of(attrs)) == 2 * (2 * 6 * 8 * 7) * (2 * 3 * 3)


def pool_attrs(kernel, strides, padding=(0, 0, 0, 0), ceil_mode=False, **extra) -> dict:
    return {"kernel": kernel, "strides": strides, "padding": padding, "ceil_mode": ceil_mode, **extra}


def symmetric(attrs: dict) -> tuple[int, int]:
    top, left, bottom, right = attrs["padding"]
    assert (top, left) == (bottom, right)
    return top, left


MAX_POOLS = {
    "3x3 stride 2 pad 1": ((1, 3, 9, 8), pool_attrs((3, 3), (2, 2), (1, 1, 1, 1))),
    "3x3 stride 2 pad 1, ceil": ((1, 3, 9, 8), pool_attrs((3, 3), (2, 2), (1, 1, 1, 1), True)),
    "2x3 dilation (2, 1), ceil": ((2, 2, 7, 10), pool_attrs((2, 3), (2, 3), (0, 1, 0, 1), True)),
    "ceil drops a window starting in the right padding": (
        (1, 1, 5, 5),
        pool_attrs((2, 2), (2, 2), (1, 1, 1, 1), True),
    ),
    "2x2 stride 2, no padding": ((1, 2, 6, 7), pool_attrs((2, 2), (2, 2))),
}
MAX_DILATION = {"2x3 dilation (2, 1), ceil": (2, 1)}


@pytest.mark.parametrize("case", sorted(MAX_POOLS))
def test_max_pool2d_matches_pytorch_and_compiles(case):
    shape, attrs = MAX_POOLS[case]
    attrs = {**attrs, "dilation": MAX_DILATION.get(case, (1, 1))}
    (x,) = arrays = random_inputs([shape])
    want = assert_compiles_to_reference("max_pool2d", arrays, attrs)
    torch_out = F.max_pool2d(
        torch.from_numpy(x),
        attrs["kernel"],
        attrs["strides"],
        symmetric(attrs),
        attrs["dilation"],
        attrs["ceil_mode"],
    )
    np.testing.assert_array_equal(want, torch_out.numpy())


def test_max_pool2d_with_asymmetric_padding_is_pytorch_on_minus_inf_padded_input():
    (x,) = arrays = random_inputs([(1, 2, 8, 9)])
    attrs = pool_attrs((3, 2), (2, 2), (0, 1, 2, 0), dilation=(1, 1))
    want = assert_compiles_to_reference("max_pool2d", arrays, attrs)
    padded = F.pad(torch.from_numpy(x), (1, 0, 0, 2), value=-math.inf)
    np.testing.assert_array_equal(want, F.max_pool2d(padded, (3, 2), (2, 2)).numpy())


AVG_POOLS = {
    "3x3 stride 2 pad 1, ceil": ((1, 2, 7, 8), pool_attrs((3, 3), (2, 2), (1, 1, 1, 1), True)),
    "ceil window past the padding": ((1, 2, 6, 6), pool_attrs((3, 3), (2, 2), ceil_mode=True)),
    "2x3 stride (1, 2) pad 1": ((2, 3, 8, 9), pool_attrs((2, 3), (1, 2), (1, 1, 1, 1))),
    "global": ((1, 4, 5, 3), pool_attrs((5, 3), (1, 1))),
}


@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize("case", sorted(AVG_POOLS))
def test_avg_pool2d_matches_pytorch_and_compiles(case, include_pad):
    shape, attrs = AVG_POOLS[case]
    attrs = {**attrs, "count_include_pad": include_pad}
    (x,) = arrays = random_inputs([shape])
    want = assert_compiles_to_reference("avg_pool2d", arrays, attrs)
    torch_out = F.avg_pool2d(
        torch.from_numpy(x),
        attrs["kernel"],
        attrs["strides"],
        symmetric(attrs),
        attrs["ceil_mode"],
        include_pad,
    )
    np.testing.assert_allclose(want, torch_out.numpy(), rtol=1e-6, atol=1e-6)


def test_avg_pool2d_with_asymmetric_padding_counting_pads_is_pytorch_on_zero_padded_input():
    (x,) = arrays = random_inputs([(1, 2, 7, 6)])
    attrs = pool_attrs((2, 3), (2, 1), (1, 0, 0, 2), count_include_pad=True)
    want = assert_compiles_to_reference("avg_pool2d", arrays, attrs)
    padded = F.pad(torch.from_numpy(x), (0, 2, 1, 0))
    np.testing.assert_allclose(want, F.avg_pool2d(padded, (2, 3), (2, 1)).numpy(), rtol=1e-6, atol=1e-6)


def test_pool_flops_count_the_window_per_output():
    attrs = pool_attrs((3, 2), (2, 2), dilation=(1, 1))
    out = infer("max_pool2d", [(1, 2, 7, 8)], attrs)
    assert out.shape == (1, 2, 3, 4)
    assert OPS["max_pool2d"].flops([TensorType((1, 2, 7, 8), "float32")], out, Attrs.of(attrs)) == 24 * 6


CONV = ([(1, 4, 8, 7), (6, 2, 3, 3)], conv_attrs(padding=(1, 1, 1, 1), groups=2))
MAX_POOL = ([(1, 2, 6, 6)], pool_attrs((3, 3), (2, 2), (1, 1, 1, 1), dilation=(1, 1)))
REFUSED = {  # op, argument shapes, attributes, the reason
    "conv2d x not rank 4": ("conv2d", [(4, 8, 7), (6, 2, 3, 3)], CONV[1], "rank 4"),
    "conv2d channel mismatch": (
        "conv2d",
        [(1, 4, 8, 7), (6, 4, 3, 3)],
        CONV[1],
        "takes 4 input channels per group",
    ),
    "conv2d groups do not divide C": (
        "conv2d",
        [(1, 4, 8, 7), (6, 1, 3, 3)],
        conv_attrs(groups=3),
        "must divide",
    ),
    "conv2d groups do not divide K": ("conv2d", [(1, 4, 8, 7), (5, 2, 3, 3)], CONV[1], "must divide"),
    "conv2d kernel bigger than padded input": (
        "conv2d",
        [(1, 4, 2, 7), (6, 2, 5, 3)],
        CONV[1],
        r"spans \(5, 3\), more than the padded input \(4, 9\)",
    ),
    "conv2d zero stride": ("conv2d", CONV[0], {**CONV[1], "strides": (0, 1)}, "strides must be 2 ints >= 1"),
    "conv2d padding of 2 values": (
        "conv2d",
        CONV[0],
        {**CONV[1], "padding": (1, 1)},
        "padding must be 4 ints",
    ),
    "conv2d missing groups": (
        "conv2d",
        CONV[0],
        {k: v for k, v in CONV[1].items() if k != "groups"},
        "missing attribute 'groups'",
    ),
    "max_pool2d not rank 4": ("max_pool2d", [(2, 6, 6)], MAX_POOL[1], "rank 4"),
    "max_pool2d window bigger than padded input": (
        "max_pool2d",
        [(1, 2, 6, 2)],
        {**MAX_POOL[1], "padding": (1, 0, 1, 0)},
        "spans 3 on W, more than the padded",
    ),
    "max_pool2d window entirely in padding": (
        "max_pool2d",
        MAX_POOL[0],
        {**MAX_POOL[1], "padding": (3, 0, 0, 0)},
        r"output \[0\] on H lies entirely in",
    ),
    "max_pool2d ceil_mode not a bool": (
        "max_pool2d",
        MAX_POOL[0],
        {**MAX_POOL[1], "ceil_mode": 1},
        "must be a bool",
    ),
    "avg_pool2d without count_include_pad": (
        "avg_pool2d",
        MAX_POOL[0],
        pool_attrs((2, 2), (2, 2)),
        "missing attribute 'count_include_pad'",
    ),
    "avg_pool2d kernel of 1 value": (
        "avg_pool2d",
        MAX_POOL[0],
        pool_attrs((2,), (2, 2), count_include_pad=True),
        "kernel must be 2 ints",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_arguments_are_refused(case):
    op, shapes, attrs, reason = REFUSED[case]
    with pytest.raises(GraphError, match=reason) as info:
        infer(op, shapes, attrs)
    assert info.value.op == op


def test_integer_inputs_are_refused():
    with pytest.raises(GraphError, match="float"):
        infer("conv2d", CONV[0], CONV[1], ["int32", "float32"])


def test_conv2d_bias_relu_schedules_under_the_default_space():
    """What fusion hands the tuner: the conv2d compute with a broadcast bias add and a relu; samples
    of the rule space tile the conv and compute the right answer."""
    (x_shape, w_shape), attrs = CONV
    x, w = te.placeholder(x_shape, "float32", "x"), te.placeholder(w_shape, "float32", "w")
    bias = te.placeholder((6, 1, 1), "float32", "bias")
    conv = OPS["conv2d"].compute([x, w], Attrs.of(attrs), "conv")
    add = te.compute(conv.shape, lambda n, k, y, x: conv[n, k, y, x] + bias[k, 0, 0], name="add")
    relu = te.compute(conv.shape, lambda *i: te.max(add[i], 0.0), name="relu")

    def reference(x, w, bias):
        return np.maximum(OPS["conv2d"].reference([x, w], Attrs.of(attrs)) + bias, 0)

    func = te.create_prim_func([x, w, bias, relu])
    for sch in assert_schedules(func, reference, [x_shape, w_shape, (6, 1, 1)], range(4)):
        tiles = [i.args["n"] for i in sch.trace.instructions if i.kind == "sample_perfect_tile"]
        assert tiles[:7] == [2, 2, 2, 4, 4, 4, 4]  # SSRSRS: (s, r, c) then (x, y, k, n), innermost first


def test_pools_schedule_under_the_default_space():
    for op, (shapes, attrs) in [
        ("max_pool2d", ([(1, 3, 7, 9)], pool_attrs((3, 3), (2, 2), (1, 1, 1, 1), True, dilation=(1, 1)))),
        (
            "avg_pool2d",
            ([(1, 3, 7, 9)], pool_attrs((3, 2), (2, 2), (1, 1, 1, 1), True, count_include_pad=False)),
        ),
    ]:
        arrays = random_inputs(shapes)
        reference = lambda *a, op=op, attrs=attrs: OPS[op].reference(a, Attrs.of(attrs))  # noqa: E731
        assert_schedules(prim_func(op, arrays, attrs), reference, shapes, range(2))
