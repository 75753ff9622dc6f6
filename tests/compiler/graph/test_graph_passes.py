"""Graph passes: each keeps what the module computes (checked against the numpy reference of the
unoptimized graph) and does what it is for (folds, fuses, plans)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import graph
from compiler.graph import CallTIR, Constant, GraphBuilder, GraphError, Module
from compiler.graph.ir import CallTIR as CallTIRNode
from compiler.graph.memory_plan import plan_memory
from compiler.graph.passes import (
    block_conv_channels,
    block_matmul_columns,
    eliminate_dead_code,
    expand_powers,
    fold_batch_norm,
    fold_constants,
    fold_pad_into_conv,
    fuse,
    match_layer_norm,
    pad_matmul,
    shrink_uniform_constants,
    verify,
    winograd_convs,
)
from compiler.graph.passes.block_matmul_columns import NBLOCK
from compiler.graph.passes.winograd_convs import TILE

RNG = np.random.default_rng(0)


def weights(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.3).astype("float32")


def random_inputs(module: Module, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(i.type.shape).astype(i.type.dtype) for i in module.inputs]


def conv(
    b: GraphBuilder, x, k: int, c: int, *, bias: bool = True, stride: int = 1, pad: int = 1, groups: int = 1
):
    out = b.call(
        "conv2d",
        [x, b.constant("w", weights(k, c // groups, 3, 3))],
        strides=(stride, stride),
        padding=(pad, pad, pad, pad),
        dilation=(1, 1),
        groups=groups,
    )
    return b.call("add", [out, b.constant("b", weights(k, 1, 1))]) if bias else out


def batch_norm(b: GraphBuilder, x, c: int):
    stats = [weights(c) + 1, weights(c), weights(c), np.abs(weights(c)) + 0.5]
    return b.call("batch_norm", [x, *(b.constant("bn", s) for s in stats)], epsilon=1e-5)


def residual_block() -> Module:
    """conv+bias+bn+relu, conv+bn, + the block's input, relu: ResNet's basic block in miniature."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 9, 7), "float32")
    h = b.call("relu", [batch_norm(b, conv(b, x, 8, 8), 8)])
    h = batch_norm(b, conv(b, h, 8, 8, bias=False), 8)
    out = b.call("relu", [b.call("add", [h, x])])
    return b.module([out])


def compiled_matches_reference(module: Module, rtol: float = 1e-4) -> graph.CompiledModel:
    inputs = random_inputs(module)
    expected = graph.run_reference(module, inputs)
    model = graph.build(graph.optimize(module, check=True))
    for got, want in zip(model(*inputs), expected):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    return model


def test_residual_block_fuses_into_two_kernels_and_matches_numpy() -> None:
    module = residual_block()
    optimized = graph.optimize(module, check=True)
    calls = [n for n in optimized.nodes() if isinstance(n, CallTIRNode)]
    assert [c.ops for c in calls] == [("conv2d", "add", "relu"), ("conv2d", "add", "add", "relu")]
    compiled_matches_reference(module)


def test_batch_norm_folds_into_the_conv_weights() -> None:
    module = residual_block()
    folded = fold_constants(fold_batch_norm(module))
    verify(folded)
    assert "batch_norm" not in {c.op for c in folded.calls()}
    assert {c.op for c in folded.calls()} == {"conv2d", "add", "relu"}
    inputs = random_inputs(module)
    np.testing.assert_allclose(
        graph.run_reference(folded, inputs)[0], graph.run_reference(module, inputs)[0], rtol=1e-4, atol=1e-5
    )


def test_convs_on_small_images_compute_in_channel_blocks_and_match_numpy() -> None:
    """16 channels at 7x7 with batch norms and a residual add: both convs become conv2d_kblock on
    packed weights, the epilogues still fuse into them, and the results do not change."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 7, 7), "float32")
    h = b.call("relu", [batch_norm(b, conv(b, x, 16, 16), 16)])
    h = batch_norm(b, conv(b, h, 32, 16, bias=False, stride=2), 32)
    module = b.module([b.call("relu", [h])])
    optimized = graph.optimize(module, check=True)
    calls = [n for n in optimized.nodes() if isinstance(n, CallTIRNode)]
    assert [c.ops for c in calls] == [("conv2d_kblock", "add", "relu"), ("conv2d_kblock", "add", "relu")]
    constants = [a for c in calls for a in c.args if isinstance(a, Constant)]
    packed = {a.type.shape for a in constants if len(a.type.shape) == 5}
    assert packed == {(1, 16, 3, 3, 16), (2, 16, 3, 3, 16)}
    compiled_matches_reference(module)


@pytest.mark.parametrize(
    "shape, k, groups, reason",
    [
        ((1, 16, 56, 56), 16, 1, "a 56x56 image vectorizes along its width"),
        ((1, 16, 7, 7), 24, 1, "24 channels are not whole blocks of 16"),
        ((1, 16, 7, 7), 16, 16, "a depthwise conv has no reduction over channels to block"),
        ((1, 7, 7, 7), 16, 1, "7 x 3 x 3 taps are too short a reduction to pay for the copy to NCHW"),
    ],
)
def test_other_convs_stay_nchw(shape, k, groups, reason) -> None:
    b = GraphBuilder()
    x = b.input("x", shape, "float32")
    module = b.module([conv(b, x, k, shape[1], groups=groups)])
    assert [c.op for c in block_conv_channels(module).calls()] == ["conv2d", "add"], reason


def test_a_strided_conv_is_blocked_on_any_image() -> None:
    """Along the width a strided conv's input is strided: every NCHW vector would be gathered."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 64, 64), "float32")
    module = b.module([conv(b, x, 16, 8, stride=2)])
    assert [c.op for c in block_conv_channels(module).calls()] == ["conv2d_kblock", "add"]
    compiled_matches_reference(module)


def test_a_conv_with_computed_weights_stays_nchw() -> None:
    b = GraphBuilder()
    x, w = b.input("x", (1, 16, 7, 7), "float32"), b.input("w", (16, 16, 1, 1), "float32")
    attrs = {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1}
    module = b.module([b.call_attrs("conv2d", [x, w], attrs)])
    assert [c.op for c in block_conv_channels(module).calls()] == ["conv2d"]


def test_3x3_convs_with_enough_channels_compute_by_winograd_and_match_numpy() -> None:
    """Two stride-1 3x3 convs of 32 channels with batch norms and a residual add, on a 13x11 image
    (not whole tiles): both become conv2d_winograd on transformed weights, the epilogues still fuse
    into them, and the results do not change."""
    b = GraphBuilder()
    x = b.input("x", (1, 32, 13, 11), "float32")
    h = b.call("relu", [batch_norm(b, conv(b, x, 32, 32), 32)])
    h = batch_norm(b, conv(b, h, 32, 32, bias=False), 32)
    module = b.module([b.call("relu", [b.call("add", [h, x])])])
    optimized = graph.optimize(module, check=True)
    calls = [n for n in optimized.nodes() if isinstance(n, CallTIRNode)]
    assert [c.ops for c in calls] == [
        ("conv2d_winograd", "add", "relu"),
        ("conv2d_winograd", "add", "add", "relu"),
    ]
    alpha = TILE + 2
    constants = [a for c in calls for a in c.args if isinstance(a, Constant)]
    transformed = {a.type.shape for a in constants if len(a.type.shape) == 4}
    assert transformed == {(alpha, alpha, 32, 32)}
    compiled_matches_reference(module)


@pytest.mark.parametrize(
    "shape, k, stride, groups, reason",
    [
        ((1, 16, 14, 14), 32, 1, 1, "16 input channels: the transforms cost more than the matmuls save"),
        ((1, 32, 14, 14), 32, 2, 1, "a strided conv has no overlapping tiles to share"),
        ((1, 32, 14, 14), 32, 1, 32, "a depthwise conv has no matmul over channels"),
        ((1, 32, 7, 7), 32, 1, 1, "16 tiles read each transformed weight too few times"),
    ],
)
def test_other_3x3_convs_stay_direct(shape, k, stride, groups, reason) -> None:
    b = GraphBuilder()
    x = b.input("x", shape, "float32")
    module = b.module([conv(b, x, k, shape[1], stride=stride, groups=groups)])
    assert [c.op for c in winograd_convs(module).calls()] == ["conv2d", "add"], reason


def test_dense_layers_read_weights_packed_in_column_blocks_and_match_numpy() -> None:
    """A batched dense layer with bias and gelu, then one without an epilogue: both become
    matmul_nblock on packed weights, the first still fuses its epilogue, and results do not change."""
    b = GraphBuilder()
    x = b.input("x", (2, 3, 20), "float32")
    h = b.call("matmul", [x, b.constant("w1", weights(20, 32))])
    h = b.call("add", [h, b.constant("b1", weights(32))])
    h = b.call("matmul", [b.call("gelu", [h], approximate="none"), b.constant("w2", weights(32, 16))])
    module = b.module([h])
    optimized = graph.optimize(module, check=True)
    calls = [n for n in optimized.nodes() if isinstance(n, CallTIRNode)]
    assert [c.ops for c in calls] == [("matmul_nblock", "add", "gelu"), ("matmul_nblock",)]
    constants = [a for c in calls for a in c.args if isinstance(a, Constant)]
    packed = {a.type.shape for a in constants if len(a.type.shape) == 3}
    assert packed == {(2, 20, 16), (1, 32, 16)}
    compiled_matches_reference(module)


def test_other_matmuls_keep_their_weights() -> None:
    """Columns that are not whole blocks, weights computed at run time (attention's keys) and
    batched weights stay a plain matmul."""
    b = GraphBuilder()
    x, y = b.input("x", (4, 8), "float32"), b.input("y", (8, 16), "float32")
    odd = b.call("matmul", [x, b.constant("w", weights(8, 24))])
    computed = b.call("matmul", [x, y])
    batched = b.call("matmul", [b.input("z", (2, 4, 8), "float32"), b.constant("v", weights(2, 8, 16))])
    module = b.module([odd, computed, batched])
    assert [c.op for c in block_matmul_columns(module).calls()] == ["matmul"] * 3


def test_batch_norm_without_a_conv_becomes_multiply_add() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3, 5), "float32")
    module = b.module([batch_norm(b, b.call("relu", [x]), 3)])
    folded = fold_constants(fold_batch_norm(module))
    assert [c.op for c in folded.calls()] == ["relu", "multiply", "add"]
    optimized = graph.optimize(module, check=True)
    assert len([n for n in optimized.nodes() if isinstance(n, CallTIR)]) == 1
    compiled_matches_reference(module)


def test_constant_folding_computes_weight_transforms_once() -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 5), "float32")
    wt = b.call("transpose", [b.constant("w", weights(4, 5))], axes=(1, 0))
    module = b.module([b.call("matmul", [x, wt])])
    folded = fold_constants(module)
    (mm,) = folded.calls()
    assert isinstance(mm.args[1], Constant) and mm.args[1].type.shape == (5, 4)
    assert mm.args[1].data.flags.c_contiguous


def test_folding_does_not_materialize_broadcasts() -> None:
    b = GraphBuilder()
    x = b.input("x", (64, 64), "float32")
    big = b.call("broadcast_to", [b.constant("s", np.float32(2.0))], shape=(256, 256))
    module = b.module(
        [b.call("add", [b.call("slice", [big], begin=(0, 0), end=(64, 64), strides=(1, 1)), x])]
    )
    assert "broadcast_to" in {c.op for c in fold_constants(module).calls()}


def test_diamond_after_matmul_fuses_into_one_kernel() -> None:
    """gelu as ONNX exports it before opset 20: x * 0.5 * (1 + erf(x / sqrt(2))) reads x twice."""
    b = GraphBuilder()
    x = b.input("x", (4, 16), "float32")
    h = b.call("add", [b.call("matmul", [x, b.constant("w", weights(16, 24))]), b.constant("b", weights(24))])
    erf = b.call("erf", [b.call("divide", [h, b.constant("sqrt2", np.float32(np.sqrt(2)))])])
    one_plus = b.call("add", [erf, b.constant("one", np.float32(1))])
    out = b.call("multiply", [b.call("multiply", [h, b.constant("half", np.float32(0.5))]), one_plus])
    module = b.module([out])
    optimized = graph.optimize(module, check=True)
    (call,) = [n for n in optimized.nodes() if isinstance(n, CallTIR)]
    assert call.ops[0] == "matmul" and len(call.ops) == 7
    compiled_matches_reference(module)


def test_a_value_used_outside_stays_a_group_output() -> None:
    """conv's output feeds relu and also the model's second output: it cannot be fused away."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 6, 6), "float32")
    c = conv(b, x, 4, 4)
    module = b.module([b.call("relu", [c]), c])
    optimized = graph.optimize(module, check=True)
    assert len([n for n in optimized.nodes() if isinstance(n, CallTIR)]) == 2
    compiled_matches_reference(module)


def test_reductions_stay_anchors_and_injective_chains_fuse() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 6, 4), "float32")
    t = b.call("reshape", [b.call("transpose", [b.call("relu", [x])], axes=(0, 2, 1))], shape=(8, 6))
    s = b.call("softmax", [t], axis=1)
    m = b.call(
        "max_pool2d",
        [b.call("reshape", [s], shape=(1, 1, 8, 6))],
        kernel=(2, 2),
        strides=(2, 2),
        padding=(0, 0, 0, 0),
        dilation=(1, 1),
        ceil_mode=False,
    )
    module = b.module([b.call("tanh", [m])])
    optimized = graph.optimize(module, check=True)
    ops = [n.ops for n in optimized.nodes() if isinstance(n, CallTIR)]
    assert ops == [("relu", "transpose", "reshape"), ("softmax", "reshape"), ("max_pool2d", "tanh")]
    compiled_matches_reference(module)


def test_identical_layers_are_one_task_with_weight_two() -> None:
    b = GraphBuilder()
    h = b.input("x", (1, 4, 8, 8), "float32")
    for _ in range(3):
        h = b.call("relu", [conv(b, h, 4, 4)])
    h = b.call("relu", [conv(b, h, 8, 4, stride=2)])
    tasks = graph.extract_tasks(graph.optimize(b.module([h])))
    assert [(t.weight, t.ops) for t in tasks] == [
        (3, ("conv2d", "add", "relu")),
        (1, ("conv2d", "add", "relu")),
    ]
    assert tasks[0].flops == 2 * 4 * 4 * 9 * 64 + 2 * 4 * 64
    assert tasks[0].workload_hash != tasks[1].workload_hash


def test_same_layer_in_two_models_has_one_hash() -> None:
    def model(names: str) -> Module:
        b = GraphBuilder()
        x = b.input(names + "x", (1, 4, 8, 8), "float32")
        return b.module([b.call("relu", [conv(b, b.call("sigmoid", [x], name=names), 4, 4)])])

    hashes = [
        {t.workload_hash for t in graph.extract_tasks(graph.optimize(model(n)))} for n in ("a", "other")
    ]
    assert hashes[0] == hashes[1]


def test_dead_code_drops_no_op_calls_and_unused_functions() -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 4), "float32")
    same = b.call("reshape", [b.call("transpose", [x], axes=(0, 1))], shape=(3, 4))
    b.call("exp", [x])  # nothing reads it
    module = b.module([b.call("relu", [same])])
    assert [c.op for c in eliminate_dead_code(module).calls()] == ["relu"]
    fused = fuse(module)
    (func,) = fused.funcs.values()
    pruned = eliminate_dead_code(Module(fused.inputs, fused.outputs, {**fused.funcs, "unused": func}))
    assert list(pruned.funcs) == list(fused.funcs)


def test_memory_plan_shares_storage_and_never_aliases_a_kernels_inputs() -> None:
    b = GraphBuilder()
    h = b.input("x", (1, 4, 8, 8), "float32")
    for _ in range(6):
        h = b.call("relu", [conv(b, h, 4, 4)])
    module = graph.optimize(b.module([h]))
    plan = plan_memory(module)
    assert plan.total_bytes == 5 * 4 * 64 * 4
    assert plan.peak_bytes <= 2 * 4 * 64 * 4 + 2 * 64
    steps = [n for n in module.nodes() if isinstance(n, CallTIR)]
    for step in steps:
        mine = plan.storage_of.get(step.name)
        assert all(plan.storage_of.get(a.name) != mine for a in step.args if mine is not None)


def test_executor_matches_reference_on_a_residual_network_and_reports_memory() -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 3, 16, 16), "float32")
    h = b.call("relu", [batch_norm(b, conv(b, x, 8, 3, bias=False, stride=2), 8)])
    for _ in range(2):
        inner = b.call("relu", [batch_norm(b, conv(b, h, 8, 8, bias=False), 8)])
        h = b.call("relu", [b.call("add", [batch_norm(b, conv(b, inner, 8, 8, bias=False), 8), h])])
    pooled = b.call("reshape", [b.call("mean", [h], axes=(2, 3), keepdims=True)], shape=(1, 8))
    logits = b.call(
        "add", [b.call("matmul", [pooled, b.constant("fc", weights(8, 5))]), b.constant("fcb", weights(5))]
    )
    module = b.module([b.call("softmax", [logits], axis=1)])
    model = compiled_matches_reference(module)
    assert 0 < model.peak_bytes < model.plan.total_bytes
    assert {s.origin for s in model.sources} == {"default"}
    inputs = random_inputs(module)
    for profile in (model.profile(*inputs, repeat=2, min_secs=0.001), model.profile(*inputs, in_pass=True)):
        assert [s for s, _ in profile] == model.steps and all(t > 0 for _, t in profile)


def test_executor_rejects_wrong_inputs() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3), "float32")
    model = graph.build(graph.optimize(b.module([b.call("relu", [x])])))
    with pytest.raises(ValueError, match="expected shape"):
        model(np.zeros((3, 2), "float32"))
    with pytest.raises(TypeError, match="takes 1 inputs"):
        model()


def test_executor_takes_inputs_of_any_layout_and_of_a_castable_dtype() -> None:
    """Arrays that already fit are checked natively and passed as they are; every other kind is
    refused there and converted here first: each must compute what the fitting array does."""
    b = GraphBuilder()
    x = b.input("x", (3, 5), "float32")
    module = b.module([b.call("multiply", [x, b.constant("w", weights(3, 5))])])
    model = graph.build(graph.optimize(module))
    fitting = np.random.default_rng(3).standard_normal((3, 5), dtype=np.float32)
    assert model._forward._numpy is not None  # which checks the fitting array natively
    (want,) = model(fitting)
    np.testing.assert_allclose(want, graph.run_reference(module, [fitting])[0], rtol=1e-6)
    read_only = fitting.copy()
    read_only.setflags(write=False)
    transposed = np.ascontiguousarray(fitting.T).T
    subclass = fitting.view(type("Subclass", (np.ndarray,), {}))
    others = [read_only, transposed, fitting.astype(np.float64), fitting.tolist(), subclass]
    for other in others:
        (got,) = model(other)
        assert type(got) is np.ndarray and got.flags.c_contiguous
        np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError, match="expected float32, got complex64"):
        model(fitting.astype(np.complex64))


def test_verifier_names_the_broken_node() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3), "float32")
    module = fuse(b.module([b.call("relu", [x], name="act")]))
    (call,) = module.outputs
    assert isinstance(call, CallTIR)
    wrong = CallTIR(call.name, call.args, call.type, func="missing")
    with pytest.raises(GraphError, match=r"act.*missing"):
        verify(Module(module.inputs, (wrong,), module.funcs))


UNARY = ["relu", "sigmoid", "tanh", "exp", "negative", "abs"]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum"]


@st.composite
def fused_graphs(draw: st.DrawFn) -> Module:
    """A conv2d or matmul (its columns blocked or not) followed by a random chain of elementwise and
    broadcast ops, some reading earlier values of the chain (diamonds) or constants of broadcastable
    shapes."""
    b = GraphBuilder()
    if draw(st.booleans()):
        c, k = draw(st.integers(1, 4)), draw(st.integers(1, 5))
        x = b.input("x", (1, c, draw(st.integers(3, 6)), draw(st.integers(3, 6))), "float32")
        h = conv(b, x, k, c, bias=draw(st.booleans()))
    else:
        m, kk = (draw(st.integers(1, 7)) for _ in range(2))
        n = draw(st.sampled_from([*range(1, 8), NBLOCK, 2 * NBLOCK]))  # whole blocks: matmul_nblock
        x = b.input("x", (m, kk), "float32")
        h = b.call("matmul", [x, b.constant("w", weights(kk, n))])
    values = [h]
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            h = b.call(draw(st.sampled_from(UNARY)), [h])
        else:
            shape = draw(st.sampled_from([h.type.shape, h.type.shape[-1:], (1,)]))
            other = draw(st.sampled_from([*values, None]))
            operand = b.constant("c", weights(*shape)) if other is None else other
            h = b.call(draw(st.sampled_from(BINARY)), [h, operand])
        values.append(h)
    return b.module([h])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fused_graphs())
def test_fusion_never_changes_results(module: Module) -> None:
    optimized = graph.optimize(module, check=True)
    assert len([n for n in optimized.nodes() if isinstance(n, CallTIR)]) == 1
    compiled_matches_reference(module)


def test_a_lone_reshape_is_a_view_not_a_kernel() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4), "float32")
    h = b.call("reshape", [b.call("exp", [b.call("softmax", [x], axis=2)])], shape=(6, 4))
    w = b.call("matmul", [b.call("reshape", [h], shape=(24, 1)), b.constant("w", weights(1, 5))])
    module = b.module([b.call("add", [w, b.constant("bias", weights(5))])])
    model = compiled_matches_reference(module)
    assert [s.func.split("_")[1] for s in model.steps] == ["softmax", "matmul"]
    plan = plan_memory(model.module)
    assert len(plan.storage_of) == 1  # the softmax+exp output, which both reshapes view


def written_out_layer_norm(square: str, affine: bool, variance_axes: tuple[int, ...] = (2,)) -> Module:
    b = GraphBuilder()
    x = b.input("x", (2, 3, 10), "float32")
    centered = b.call("subtract", [x, b.call("mean", [x], axes=(2,), keepdims=True)])
    if square == "power":
        squared = b.call("power", [centered, b.constant("two", np.float32(2))])
    else:
        squared = b.call("multiply", [centered, centered])
    variance = b.call("mean", [squared], axes=variance_axes, keepdims=True)
    std = b.call("sqrt", [b.call("add", [variance, b.constant("eps", np.float32(1e-5))])])
    out = b.call("divide", [centered, std])
    if affine:
        out = b.call(
            "add", [b.call("multiply", [out, b.constant("g", weights(10))]), b.constant("b", weights(10))]
        )
    return b.module([out])


@pytest.mark.parametrize("square", ["power", "multiply"])
@pytest.mark.parametrize("affine", [True, False])
def test_written_out_layer_norm_becomes_one_operator(square: str, affine: bool) -> None:
    module = written_out_layer_norm(square, affine)
    matched = match_layer_norm(fold_constants(module))
    verify(matched)
    assert [c.op for c in matched.calls()] == ["layer_norm"]
    assert len(graph.extract_tasks(graph.optimize(module))) == 1
    compiled_matches_reference(module)


def test_a_near_miss_is_left_written_out() -> None:
    module = written_out_layer_norm("power", True, variance_axes=(1, 2))
    assert "layer_norm" not in {c.op for c in match_layer_norm(fold_constants(module)).calls()}
    compiled_matches_reference(module)


@pytest.mark.parametrize(
    ("exponent", "ops"),
    [
        (2.0, ["multiply"]),
        (3.0, ["multiply", "multiply"]),
        (0.5, ["sqrt"]),
        (-0.5, ["sqrt", "reciprocal"]),
        (-1.0, ["reciprocal"]),
        (-2.0, ["multiply", "reciprocal"]),
        (1.5, ["power"]),
    ],
)
def test_powers_by_small_constants_become_multiplications(exponent: float, ops: list[str]) -> None:
    """As PyTorch computes them; any other exponent stays a power, and the result keeps its name."""
    b = GraphBuilder()
    x = b.input("x", (3, 7), "float32")
    module = b.module([b.call("power", [x, b.constant("e", np.float32(exponent))], name="y")])
    expanded = expand_powers(module)
    verify(expanded)
    assert [c.op for c in expanded.calls()] == ops
    assert expanded.outputs[0].name == "y"
    compiled_matches_reference(module)
    x_value = np.abs(random_inputs(module)[0]) + 0.1
    np.testing.assert_allclose(
        graph.run_reference(expanded, [x_value])[0], x_value.astype(np.float64) ** exponent, rtol=1e-6
    )


def test_a_power_that_broadcasts_its_base_is_kept() -> None:
    b = GraphBuilder()
    x = b.input("x", (1,), "float32")
    module = b.module([b.call("power", [x, b.constant("e", np.full((1, 1), 2.0, np.float32))])])
    assert [c.op for c in expand_powers(module).calls()] == ["power"]


def padded_conv(pads: tuple[int, ...], value: float = 0.0, also_used: bool = False) -> Module:
    """A pad (TensorFlow-style "same" padding: 0 before, 1 after) then a stride-2 conv."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 9, 8), "float32")
    padded = b.call("pad", [x], pads=pads, value=value)
    out = conv(b, padded, 6, padded.type.shape[1], stride=2, pad=0)
    return b.module([out, b.call("relu", [padded])] if also_used else [out])


def test_a_zero_pad_of_height_and_width_folds_into_the_conv() -> None:
    module = padded_conv((0, 0, 0, 0, 0, 0, 1, 1))
    folded = eliminate_dead_code(fold_pad_into_conv(module))
    assert [n.op for n in folded.calls()] == ["conv2d", "add"]
    (conv_call,) = [n for n in folded.calls() if n.op == "conv2d"]
    assert tuple(conv_call.attrs["padding"]) == (0, 0, 1, 1)
    compiled_matches_reference(module)


def test_a_pad_another_call_reads_stays_for_it() -> None:
    module = padded_conv((0, 0, 1, 2, 0, 0, 3, 0), also_used=True)
    folded = eliminate_dead_code(fold_pad_into_conv(module))
    assert [n.op for n in folded.calls()].count("pad") == 1
    assert tuple(next(n for n in folded.calls() if n.op == "conv2d").attrs["padding"]) == (1, 2, 3, 0)
    compiled_matches_reference(module)


@pytest.mark.parametrize(
    ("pads", "value"),
    [((0, 0, 0, 0, 0, 0, 1, 1), -1.0), ((0, 1, 0, 0, 0, 1, 0, 0), 0.0), ((1, 0, 0, 0, 0, 0, 0, 0), 0.0)],
)
def test_other_pads_stay(pads, value) -> None:
    """A pad with another value, of the channels, or of the batch is no conv padding."""
    module = padded_conv(pads, value)
    assert "pad" in [n.op for n in fold_pad_into_conv(module).calls()]


@pytest.mark.parametrize("rows", [197, 37])
def test_a_dense_layer_over_awkward_rows_keeps_them_and_its_epilogue(rows: int) -> None:
    """No padding: the tiling rule covers the rows with a guarded last tile, so the bias and gelu
    stay in the matmul's kernel (a slice after a padded matmul split them off)."""
    b = GraphBuilder()
    x = b.input("x", (rows, 24), "float32")
    y = b.call("matmul", [x, b.constant("w", weights(24, 48))])
    y = b.call("gelu", [b.call("add", [y, b.constant("b", weights(48))])], approximate="none")
    module = b.module([y])
    assert [n.op for n in pad_matmul(module).calls()] == ["matmul", "add", "gelu"]
    optimized = graph.optimize(module, check=True)
    calls = [n for n in optimized.nodes() if isinstance(n, CallTIRNode)]
    assert [c.ops for c in calls] == [("matmul_nblock", "add", "gelu")]
    compiled_matches_reference(module)


def test_attention_s_batched_products_are_padded_in_long_columns_only() -> None:
    b = GraphBuilder()
    q = b.input("q", (3, 197, 8), "float32")
    k = b.input("k", (3, 8, 197), "float32")
    scores = b.call("matmul", [q, k])
    module = b.module([scores])
    padded = pad_matmul(module)
    assert [n.op for n in padded.calls()] == ["pad", "matmul", "slice"]
    assert next(n for n in padded.calls() if n.op == "matmul").type.shape == (3, 197, 208)
    compiled_matches_reference(module)


def test_a_safe_softmax_s_zeros_of_the_scores_shape_become_one_broadcast_element() -> None:
    """torch.export's `where(row all -inf, full_like(scores, 0), softmax(scores))`: the zeros are
    one element after the pass, and the result does not change."""
    b = GraphBuilder()
    scores = b.input("scores", (2, 3, 7, 7), "float32")
    masked = b.input("masked", (2, 3, 7, 1), "bool")
    zeros = b.constant("full_like", np.zeros((2, 3, 7, 7), "float32"))
    module = b.module([b.call("where", [masked, zeros, b.call("softmax", [scores], axis=3)])])
    shrunk = shrink_uniform_constants(module)
    (where,) = [n for n in shrunk.calls() if n.op == "where"]
    assert where.args[1].type.shape == (1, 1, 1, 1)
    assert where.type == module.outputs[0].type
    compiled_matches_reference(module)


@pytest.mark.parametrize(
    "data",
    [
        np.ones((3, 5), "float32"),  # it alone gives the sum its rows
        np.arange(15, dtype="float32").reshape(3, 5),  # not one value
        np.full((3, 5), np.nan, "float32"),  # NaN equals nothing
    ],
)
def test_a_constant_that_shapes_the_output_or_holds_several_values_stays(data) -> None:
    b = GraphBuilder()
    x = b.input("x", (5,), "float32")
    module = b.module([b.call("add", [x, b.constant("c", data)])])
    (add,) = shrink_uniform_constants(module).calls()
    assert add.args[1].type.shape == (3, 5)


def test_a_constant_weight_with_long_awkward_columns_is_padded_as_a_constant() -> None:
    b = GraphBuilder()
    x = b.input("x", (8, 24), "float32")
    module = b.module([b.call("matmul", [x, b.constant("w", weights(24, 131))])])
    padded = pad_matmul(module)
    assert [n.op for n in padded.calls()] == ["matmul", "slice"]
    assert next(n for n in padded.calls() if n.op == "matmul").args[1].type.shape == (24, 144)
    compiled_matches_reference(module)


@pytest.mark.parametrize(("rows", "cols"), [(200, 40), (196, 127), (13, 1000), (1, 208), (8, 232)])
def test_extents_a_tile_divides_few_rows_and_short_columns_stay(rows: int, cols: int) -> None:
    b = GraphBuilder()
    x = b.input("x", (rows, 24), "float32")
    module = b.module([b.call("matmul", [x, b.constant("w", weights(24, cols))])])
    assert [n.op for n in pad_matmul(module).calls()] == ["matmul"]
