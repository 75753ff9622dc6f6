"""graph.algorithms: both forms of every conv the rules compute by Winograd, found and correct; a
conv named direct stays direct, blocked on any image."""

import numpy as np

from compiler import graph
from compiler.graph import CallTIR, GraphBuilder, Module
from compiler.graph.algorithms import alternatives, winograd_weights
from tests.compiler.graph.test_graph_passes import batch_norm, conv, random_inputs


def two_stages() -> Module:
    """A 3x3 conv of 32 channels at 30x30 with batch norm and relu (Winograd by the rules, and more
    pixels than the blocking rule blocks), a strided one (direct by the rules), a second 32-channel
    one at 15x15 with a residual add."""
    b = GraphBuilder()
    x = b.input("x", (1, 32, 30, 30), "float32")
    h = b.call("relu", [batch_norm(b, conv(b, x, 32, 32), 32)])
    h = b.call("relu", [conv(b, h, 32, 32, stride=2)])
    out = b.call("relu", [b.call("add", [conv(b, h, 32, 32), h])])
    return b.module([out])


def fused_ops(module: Module) -> list[tuple[str, ...]]:
    return [n.ops for n in module.nodes() if isinstance(n, CallTIR)]


def test_each_winograd_conv_is_paired_with_its_direct_form_and_both_compute_the_model() -> None:
    module = two_stages()
    both = alternatives(module)
    assert [a.conv for a in both.convs] == list(winograd_weights(module)) and len(both.convs) == 2
    assert [op[0] for op in fused_ops(both.by_winograd)] == [
        "conv2d_winograd",
        "conv2d_kblock",
        "conv2d_winograd",
    ]
    assert [op[0] for op in fused_ops(both.by_direct)] == ["conv2d_kblock"] * 3
    for a in both.convs:
        assert a.winograd.name.startswith("fused_conv2d_winograd")
        assert a.direct.name.startswith("fused_conv2d_kblock")
    inputs = random_inputs(module)
    expected = graph.run_reference(module, inputs)[0]
    for optimized in (both.by_winograd, both.by_direct):
        np.testing.assert_allclose(graph.build(optimized)(*inputs)[0], expected, rtol=1e-4, atol=1e-4)


def test_one_conv_named_direct_leaves_the_other_by_winograd() -> None:
    module = two_stages()
    first, _ = winograd_weights(module)
    optimized = graph.optimize(module, check=True, direct=frozenset({first}))
    assert [op[0] for op in fused_ops(optimized)] == ["conv2d_kblock", "conv2d_kblock", "conv2d_winograd"]
    inputs = random_inputs(module)
    np.testing.assert_allclose(
        graph.build(optimized)(*inputs)[0], graph.run_reference(module, inputs)[0], rtol=1e-4, atol=1e-4
    )


def test_a_model_without_winograd_convs_has_no_alternatives() -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 16, 14, 14), "float32")
    module = b.module([b.call("relu", [conv(b, x, 32, 16)])])
    both = alternatives(module)
    assert both.convs == [] and both.by_direct is both.by_winograd
