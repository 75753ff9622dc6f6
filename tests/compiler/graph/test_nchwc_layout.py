"""The NCHWc layout pass: MobileNetV2's inverted residual blocks keep their activations blocked from
the expanding conv through the depthwise conv to the projecting conv, copy back to NCHW only where
a layer cannot follow (inside the producing kernel), leave models without depthwise convs alone,
and compute what the unoptimized graph computes."""

import numpy as np
import pytest

from compiler import graph
from compiler.graph import CallTIR, Constant, GraphBuilder, Module
from compiler.graph.passes import nchwc_layout, verify
from compiler.graph.passes.nchwc_layout import CBLOCK

RNG = np.random.default_rng(0)


def weights(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.3).astype("float32")


def conv(b: GraphBuilder, x, k: int, c: int, size: int, *, stride: int = 1, depthwise: bool = False):
    """A conv (k filters over c channels, size x size, 'same' padding) + a per-channel bias."""
    pad = size // 2
    out = b.call(
        "conv2d",
        [x, b.constant("w", weights(k, 1 if depthwise else c, size, size))],
        strides=(stride, stride),
        padding=(pad, pad, pad, pad),
        dilation=(1, 1),
        groups=c if depthwise else 1,
    )
    return b.call("add", [out, b.constant("b", weights(1, k, 1, 1))])


def relu6(b: GraphBuilder, x):
    return b.call("clip", [x], min=0.0, max=6.0)


def inverted_residual(b: GraphBuilder, x, c: int, expanded: int, out: int, size: int, stride: int):
    """MobileNetV2's block: 1x1 expand + relu6, depthwise 3x3 + relu6, 1x1 project, and the
    block's input added when the shapes allow."""
    h = relu6(b, conv(b, x, expanded, c, 1))
    h = relu6(b, conv(b, h, expanded, expanded, 3, stride=stride, depthwise=True))
    h = conv(b, h, out, expanded, 1)
    return b.call("add", [h, x]) if stride == 1 and c == out else h


def compiled_matches_reference(module: Module) -> list[CallTIR]:
    """The fused calls of the optimized module, after checking that it computes the reference."""
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(i.type.shape).astype("float32") for i in module.inputs]
    optimized = graph.optimize(module, check=True)
    for got, want in zip(graph.build(optimized)(*inputs), graph.run_reference(module, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return [n for n in optimized.nodes() if isinstance(n, CallTIR)]


@pytest.mark.parametrize("out", [32, 24])
def test_two_blocks_stay_blocked_from_conv_to_conv_and_match_the_reference(out):
    """Odd image sizes, a strided depthwise conv, then a block with its residual add: every conv
    computes in blocks, the residual add and the relu6 run on blocked tensors, and only the model's
    output is copied back to NCHW, in the last kernel. 24 channels are padded to two blocks."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 11, 9), "float32")
    h = inverted_residual(b, x, 16, 32, out, 3, stride=2)
    h = inverted_residual(b, h, out, 64, out, 3, stride=1)
    calls = compiled_matches_reference(b.module([h]))
    assert [c.ops for c in calls] == [
        ("conv2d_nchwc", "add", "clip"),
        ("depthwise_conv2d_nchwc", "add", "clip"),
        ("conv2d_nchwc", "add"),
        ("conv2d_nchwc", "add", "clip"),
        ("depthwise_conv2d_nchwc", "add", "clip"),
        ("conv2d_nchwc", "add", "add", "from_nchwc"),
    ]
    assert calls[2].type.shape == (1, 2, 6, 5, CBLOCK) and calls[-1].type.shape == (1, out, 6, 5)
    blocked_constants = {a.type.shape for c in calls for a in c.args if isinstance(a, Constant)}
    assert (1, 2, 1, 1, CBLOCK) in blocked_constants  # a bias of 32 (or 24 and 8 zeros) channels
    assert (2, 3, 3, CBLOCK) in blocked_constants  # depthwise weights [C/cb, R, S, cb]
    assert (4, 32, 1, 1, CBLOCK) in blocked_constants  # the expansion reads 32 (or 24 and 8 zero) channels


def test_an_add_of_a_tensor_with_another_layout_runs_after_the_copy_back():
    """The projection's residual operand is the model's NCHW input: the add cannot run blocked, so
    it follows the copy back inside the projecting kernel."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 7, 5), "float32")
    calls = compiled_matches_reference(b.module([inverted_residual(b, x, 16, 32, 16, 3, stride=1)]))
    assert calls[-1].ops == ("conv2d_nchwc", "add", "from_nchwc", "add")


@pytest.mark.parametrize("with_depthwise", [False, True])
def test_without_a_depthwise_conv_fed_by_a_conv_or_of_whole_blocks_the_pass_changes_nothing(with_depthwise):
    """Dense convs join the layout only to feed a depthwise conv (here none, or one of 8 channels on
    the model's input, which would need a copy to pad): ResNet's convs are left to the Winograd and
    channel-blocking passes."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 14, 14), "float32")
    if with_depthwise:
        x = conv(b, x, 8, 8, 3, depthwise=True)
    h = relu6(b, conv(b, x, 16, 8, 3))
    module = b.module([relu6(b, conv(b, h, 32, 16, 1))])
    blocked = nchwc_layout(module)
    verify(blocked)
    assert [c.op for c in blocked.calls()] == [c.op for c in module.calls()]
