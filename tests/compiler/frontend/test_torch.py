"""The PyTorch frontend: every zoo model and every converter, imported and run with the graph's numpy
reference, must compute what PyTorch computes (odd shapes, rtol/atol 1e-3); what the graph level
cannot represent is a GraphError naming the node and the operator."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from bench import zoo
from compiler import graph
from compiler.frontend.torch import from_torch
from compiler.graph import Call, Constant, GraphBuilder, GraphError, Module, run_reference


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


class Fn(nn.Module):
    """A model computing `fns` (named) on its inputs; `parts` registers the modules they use, so that
    their weights are parameters and buffers."""

    def __init__(
        self, fns: dict[str, Callable[..., torch.Tensor]], parts: tuple[nn.Module, ...] = ()
    ) -> None:
        super().__init__()
        self.names = list(fns)
        self.fns = list(fns.values())
        self.parts = nn.ModuleList(parts)

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(fn(*args) for fn in self.fns)


def check(model: nn.Module, *args: torch.Tensor, names: list[str] | None = None, tol: float = 1e-3) -> Module:
    """Import `model`, run the reference on `args` and compare every output with PyTorch's."""
    module = from_torch(model, args)
    got = run_reference(module, [a.numpy() for a in args])
    with torch.no_grad():
        want = model(*args)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        label = names[i] if names else f"output {i}"
        w = w.numpy()
        assert g.shape == w.shape, label
        assert g.dtype == w.dtype, label
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=label)
    return module


def check_fns(
    fns: dict[str, Callable[..., torch.Tensor]], *args: torch.Tensor, parts: tuple[nn.Module, ...] = ()
) -> Module:
    return check(Fn(fns, parts), *args, names=list(fns))


def ops(module: Module) -> set[str]:
    return {n.op for n in module.nodes() if isinstance(n, Call)}


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape)


# --- The zoo ---


def assert_realistic(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
    """Neither saturated nor vanishing: what bench/zoo.py promises."""
    with torch.no_grad():
        assert 0.5 < float(model(*inputs).std()) < 5


def test_mlp():
    model = zoo.mlp()
    assert_realistic(model, zoo.mlp_inputs())
    module = check(model, *zoo.mlp_inputs())
    assert ops(module) == {"transpose", "matmul", "add", "relu"}


@pytest.fixture(scope="module")
def resnet18() -> nn.Module:
    return zoo.resnet18()


def test_resnet18(resnet18):
    """At 224x224: importing costs the same at any size, and the reference takes a second."""
    assert_realistic(resnet18, zoo.image_inputs(224))
    module = check(resnet18, *zoo.image_inputs(224))
    names = {c.name for c in module.constants()}
    assert {"layer1_0_conv1_weight", "layer4_1_bn2_running_var", "layer2_0_downsample_0_weight"} <= names
    calls = [n.op for n in module.nodes() if isinstance(n, Call)]
    assert calls.count("conv2d") == 20 and calls.count("batch_norm") == 20


def test_mobilenet_v2():
    model = zoo.mobilenet_v2()
    assert_realistic(model, zoo.image_inputs(224))
    module = check(model, *zoo.image_inputs(224))
    convs = [n for n in module.nodes() if isinstance(n, Call) and n.op == "conv2d"]
    assert len([c for c in convs if c.attrs["groups"] > 1]) == 17
    assert {"clip", "mean"} <= ops(module)


def test_transformer_encoder_layer_bert_base():
    model = zoo.transformer_encoder_layer()
    assert_realistic(model, zoo.transformer_inputs())
    module = check(model, *zoo.transformer_inputs())
    assert {"matmul", "softmax", "gelu", "layer_norm"} <= ops(module)


def test_bert_embedding_gathers_with_the_token_ids_input():
    model = zoo.bert_embedding(vocab=1000)
    assert_realistic(model, zoo.token_inputs(vocab=1000))
    module = check(model, *zoo.token_inputs(vocab=1000))
    assert module.inputs[0].type.dtype == "int64"
    take = next(n for n in module.nodes() if isinstance(n, Call) and n.op == "take")
    assert take.args[1] is module.inputs[0]


def test_zoo_weights_are_deterministic_and_batch_norm_statistics_are_not_trivial(resnet18):
    state = torch.random.get_rng_state()
    again = zoo.resnet18()
    assert torch.equal(torch.random.get_rng_state(), state), "the zoo must not draw from the global generator"
    for (name, x), y in zip(resnet18.state_dict().items(), again.state_dict().values()):
        assert torch.equal(x, y), name
    norm = resnet18.layer3[1].bn2
    assert not torch.allclose(norm.running_var, torch.ones_like(norm.running_var), atol=0.05)
    assert not torch.allclose(norm.running_mean, torch.zeros_like(norm.running_mean), atol=0.05)


def test_a_saved_exported_program_imports_without_example_inputs(tmp_path):
    model, inputs = zoo.mlp(), zoo.mlp_inputs()
    torch.export.save(torch.export.export(model, inputs), tmp_path / "mlp.pt2")
    module = from_torch(torch.export.load(tmp_path / "mlp.pt2"))
    np.testing.assert_allclose(
        run_reference(module, [inputs[0].numpy()])[0], model(*inputs).detach().numpy(), rtol=1e-5, atol=1e-5
    )
    with pytest.raises(TypeError, match="example inputs"):
        from_torch(model)


# --- Converters ---


def test_convolutions():
    plain = nn.Conv2d(3, 5, 3, stride=2, padding=1)
    grouped = nn.Conv2d(6, 9, (3, 2), stride=(2, 1), padding=(2, 0), dilation=2, groups=3, bias=False)
    depthwise = nn.Conv2d(6, 6, 3, padding=1, groups=6)
    x3, x6 = randn(2, 3, 11, 9), randn(1, 6, 10, 13)
    check_fns(
        {
            "plain": lambda x, y: plain(x),
            "grouped": lambda x, y: grouped(y),
            "depthwise": lambda x, y: depthwise(y),
            "same": lambda x, y: F.conv2d(x, plain.weight[:, :, :2, :], padding="same"),
        },
        x3,
        x6,
        parts=(plain, grouped, depthwise),
    )


def test_transposed_convolutions():
    plain = nn.ConvTranspose2d(4, 3, 3)
    strided = nn.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=1, output_padding=1)
    grouped = nn.ConvTranspose2d(
        4, 6, 4, stride=(2, 3), padding=(2, 0), dilation=(1, 2), groups=2, bias=False
    )
    cropped = nn.ConvTranspose2d(4, 2, 2, stride=3, padding=2)
    x = randn(2, 4, 5, 7)
    model = Fn(
        {"plain": plain, "strided": strided, "grouped": grouped, "cropped": cropped},
        (plain, strided, grouped, cropped),
    )
    assert_compiled_matches(check(model, x, names=list(model.names)), model, x)


def test_one_dimensional_convolutions():
    """Conv1d and ConvTranspose1d run as 2-D over rows of height 1."""
    convs = {
        "plain": nn.Conv1d(4, 6, 3),
        "strided_padded": nn.Conv1d(4, 6, 5, stride=2, padding=2, bias=False),
        "dilated_grouped": nn.Conv1d(4, 8, 3, dilation=3, groups=2, padding=1),
        "depthwise_causal": nn.Conv1d(4, 4, 4, groups=4, padding=3),
        "transposed": nn.ConvTranspose1d(4, 3, 4, stride=2, padding=1, output_padding=1),
    }
    x = randn(2, 4, 13)
    model = Fn(convs, tuple(convs.values()))
    assert_compiled_matches(check(model, x, names=list(model.names)), model, x)


def assert_compiled_matches(module: Module, model: nn.Module, *args: torch.Tensor) -> None:
    got = graph.build(module)(*(a.numpy() for a in args))
    with torch.no_grad():
        want = model(*args)
    for g, w in zip(got, want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-4)


def test_interpolation():
    x = randn(2, 3, 5, 7)
    fns = {
        "nearest_x2": lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
        "nearest_size": lambda x: F.interpolate(x, size=(8, 4), mode="nearest"),
        "nearest_fraction": lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest"),
        "bilinear": lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
        "bilinear_size": lambda x: F.interpolate(x, size=(3, 11), mode="bilinear"),
        "bilinear_corners": lambda x: F.interpolate(x, size=(9, 13), mode="bilinear", align_corners=True),
        "bilinear_one_row": lambda x: F.interpolate(x, size=(1, 7), mode="bilinear", align_corners=True),
        "bicubic": lambda x: F.interpolate(x, scale_factor=1.7, mode="bicubic"),
        "bicubic_corners": lambda x: F.interpolate(x, size=(9, 4), mode="bicubic", align_corners=True),
        "bilinear_antialias": lambda x: F.interpolate(x, size=(3, 2), mode="bilinear", antialias=True),
        "bicubic_antialias": lambda x: F.interpolate(x, size=(2, 3), mode="bicubic", antialias=True),
        "bicubic_antialias_up": lambda x: F.interpolate(x, size=(8, 9), mode="bicubic", antialias=True),
        "bilinear_antialias_factor": lambda x: F.interpolate(
            x, scale_factor=0.45, mode="bilinear", antialias=True
        ),
    }
    model = Fn(fns)
    assert_compiled_matches(check(model, x, names=list(fns), tol=1e-5), model, x)


def test_convolution_attributes_are_normalized():
    conv = nn.Conv2d(3, 4, (3, 5), stride=(1, 2), padding=(1, 2), dilation=(2, 1))
    module = from_torch(conv, (randn(1, 3, 8, 9),))
    node = next(n for n in module.nodes() if isinstance(n, Call) and n.op == "conv2d")
    assert dict(node.attrs) == {"strides": (1, 2), "padding": (1, 2, 1, 2), "dilation": (2, 1), "groups": 1}


def test_batch_norm_with_statistics_and_without_affine():
    norm, plain = nn.BatchNorm2d(3), nn.BatchNorm2d(3, affine=False, eps=1e-3)
    for bn in (norm, plain):
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-1, 1)
    module = check_fns({"affine": norm, "plain": plain}, randn(2, 3, 5, 7), parts=(norm, plain))
    assert ops(module) == {"batch_norm"}


def test_activations():
    prelu = nn.PReLU(5, 0.3)
    module = check_fns(
        {
            "relu": F.relu,
            "relu6": F.relu6,
            "hardtanh": lambda x: F.hardtanh(x, -0.5, 0.7),
            "clamp_min": lambda x: x.clamp(min=-0.3),
            "clamp_max": lambda x: x.clamp(max=0.4),
            "sigmoid": torch.sigmoid,
            "tanh": torch.tanh,
            "gelu": F.gelu,
            "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
            "hardswish": F.hardswish,
            "hardsigmoid": F.hardsigmoid,
            "silu": F.silu,
            "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
            "elu": lambda x: F.elu(x, 0.6),
            "selu": F.selu,
            "celu": lambda x: F.celu(x, 0.5),
            "prelu": prelu,
            "softplus": lambda x: F.softplus(x, beta=1.5),
            "mish": F.mish,
            "softsign": F.softsign,
        },
        randn(3, 5, 7) * 4,
        parts=(prelu,),
    )
    assert {"hardswish", "hardsigmoid", "silu", "gelu", "leaky_relu", "clip", "elu"} <= ops(module)


def test_math():
    module = check_fns(
        {
            "erf": torch.erf,
            "exp": torch.exp,
            "log": lambda x: torch.log(x.abs() + 0.1),
            "sqrt": lambda x: torch.sqrt(x.abs()),
            "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1),
            "neg": torch.neg,
            "abs": torch.abs,
            "reciprocal": lambda x: 2 / (x.abs() + 0.5),
            "pow_scalar": lambda x: x**3,
            "square": torch.square,
            "pow_tensor": lambda x: (x.abs() + 0.1) ** x,
            "pow_scalar_base": lambda x: 2.5**x,
            "floor": torch.floor,
            "ceil": torch.ceil,
            "round": lambda x: torch.round(x * 2),  # halves, to even
            "trunc": torch.trunc,
            "sign": torch.sign,
            "expm1": lambda x: torch.expm1(x * 1e-3),
            "log1p": lambda x: torch.log1p(x.abs() * 1e-3),
        },
        randn(4, 1, 9),
    )
    assert {"erf", "exp", "log", "sqrt", "negative", "abs", "power", "divide"} <= ops(module)


def test_arithmetic_broadcasts_and_takes_scalars_on_either_side():
    check_fns(
        {
            "add": lambda x, y: x + y,
            "sub": lambda x, y: x - y,
            "mul": lambda x, y: x * y,
            "div": lambda x, y: x / (y.abs() + 0.5),
            "add_alpha": lambda x, y: torch.add(x, y, alpha=2.5),
            "sub_alpha": lambda x, y: torch.sub(x, y, alpha=-3),
            "scalar_alpha": lambda x, y: torch.add(x, 2, alpha=3),
            "scalars": lambda x, y: x.mul(2).add(1).sub(3).div(4),
            "rsub": lambda x, y: 1 - x,
            "add_scalar_overload": lambda x, y: torch.ops.aten.add.Scalar(x, 2, alpha=-1),
            "sub_scalar_overload": lambda x, y: torch.ops.aten.sub.Scalar(x, 2),
            "mul_scalar_overload": lambda x, y: torch.ops.aten.mul.Scalar(x, 3),
            "div_scalar_overload": lambda x, y: torch.ops.aten.div.Scalar(x, 3),
            "maximum": lambda x, y: torch.maximum(x, y),
            "minimum": lambda x, y: torch.minimum(y, x),
            "remainder": lambda x, y: torch.remainder(x * 4, y),
            "remainder_scalar": lambda x, y: x % 0.75,
            "fmod": lambda x, y: torch.fmod(x * 4, y),
            "fmod_scalar": lambda x, y: torch.fmod(x, -0.5),
        },
        randn(2, 3, 5),
        randn(3, 1),
    )


def test_integer_remainders():
    ints = torch.tensor([[7, -7, 0, 9, -5]])
    check_fns(
        {
            "remainder": lambda x: torch.remainder(x, torch.tensor([2, -3, 4, 5, 3])),
            "fmod_scalar": lambda x: torch.fmod(x, 4),
            "floor_mod_scalar": lambda x: x % -3,
        },
        ints,
    )


def test_pooling():
    module = check_fns(
        {
            "max": lambda x: F.max_pool2d(x, 2),
            "max_padded_dilated_ceil": lambda x: F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True),
            "avg": lambda x: F.avg_pool2d(x, (3, 2), (1, 2)),
            "avg_padded_ceil": lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
            "avg_counting_pad": lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=True),
            "adaptive_global": lambda x: F.adaptive_avg_pool2d(x, 1),
            "adaptive_divisible": lambda x: F.adaptive_avg_pool2d(x, (5, 4)),
            "unbatched_max": lambda x: F.max_pool2d(x[0], 3, 2, ceil_mode=True),
            "unbatched_avg": lambda x: F.avg_pool2d(x[1], 2),
            "unbatched_adaptive": lambda x: F.adaptive_avg_pool2d(x[0], (2, 3)),
        },
        randn(2, 3, 10, 12),
    )
    assert {"max_pool2d", "avg_pool2d", "mean"} <= ops(module)


def test_reductions_and_softmax():
    module = check_fns(
        {
            "mean": lambda x: x.mean(-1, keepdim=True),
            "mean_dims": lambda x: x.mean((0, 2)),
            "sum": lambda x: x.sum(-2),
            "sum_all": lambda x: x.sum(),
            "amax": lambda x: x.amax(dim=(0, -1)),
            "amin": lambda x: x.amin(dim=1, keepdim=True),
            "max_values": lambda x: x.max(-1).values,
            "min_values": lambda x: x.min(0, keepdim=True).values,
            "max_of_vector": lambda x: x[0, 0].max(0).values,
            "max_indices": lambda x: x.max(1).indices,
            "min_both": lambda x: x.min(-1, keepdim=True).values * x.min(-1, keepdim=True).indices,
            "argmax": lambda x: x.argmax(1),
            "argmin_keepdim": lambda x: x.argmin(-1, keepdim=True),
            "argmax_all": lambda x: x.argmax(),
            "argmin_all_keepdim": lambda x: x.argmin(keepdim=True),
            "softmax": lambda x: x.softmax(1),
            "log_softmax": lambda x: F.log_softmax(x, -1),
        },
        randn(3, 5, 7),
    )
    assert {"mean", "sum", "max", "min", "softmax", "log_softmax", "argmax", "argmin"} <= ops(module)


def test_group_and_instance_norms():
    group, plain_group = nn.GroupNorm(3, 6), nn.GroupNorm(2, 6, affine=False, eps=1e-3)
    instance, instance_1d = nn.InstanceNorm2d(6, affine=True), nn.InstanceNorm1d(6)
    with torch.no_grad():
        for norm in (group, instance):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-1, 1)
    fns = {
        "group": group,
        "group_plain": plain_group,
        "instance": instance,
        "instance_1d": lambda x: instance_1d(x.flatten(2)),
    }
    model, x = Fn(fns, (group, plain_group, instance, instance_1d)), randn(2, 6, 5, 7) * 3 + 1
    module = check(model, x, names=list(fns))
    assert {"mean", "sqrt", "divide"} <= ops(module)
    assert_compiled_matches(module, model, x)


def test_norms_and_variances():
    check_fns(
        {
            "norm": lambda x: x.norm(dim=1, keepdim=True),
            "norm_all": lambda x: x.norm(),
            "l1": lambda x: torch.linalg.vector_norm(x, 1, dim=(0, 2)),
            "max_abs": lambda x: torch.linalg.vector_norm(x, float("inf"), dim=-1),
            "min_abs": lambda x: torch.linalg.vector_norm(x, float("-inf")),
            "var": lambda x: x.var(1, keepdim=True),
            "var_biased": lambda x: torch.var(x, (0, 2), correction=0),
            "std_all": lambda x: x.std(),
        },
        randn(3, 5, 7),
    )


def test_layer_norm():
    two, plain = nn.LayerNorm((5, 7)), nn.LayerNorm(7, elementwise_affine=False)
    with torch.no_grad():
        two.weight.uniform_(0.5, 1.5)
        two.bias.uniform_(-1, 1)
    module = check_fns({"two_axes": two, "plain": plain}, randn(2, 5, 7) * 3 + 1, parts=(two, plain))
    norms = [n for n in module.nodes() if isinstance(n, Call) and n.op == "layer_norm"]
    assert [n.attrs["axes"] for n in norms] == [(1, 2), (2,)]


def test_shapes():
    module = check_fns(
        {
            "view": lambda x: x.view(6, -1),
            "flatten": lambda x: x.flatten(1),
            "permute": lambda x: x.permute(2, 0, -1, 1),
            "transpose": lambda x: x.transpose(1, 3),
            "t": lambda x: x[0, 0].t(),
            "expand": lambda x: x[:, :1].expand(2, 3, 5, 7),
            "unsqueeze_expand": lambda x: x[..., None].expand(2, 3, 5, 7, 2),
            "squeeze": lambda x: x[:, :1].squeeze(),
            "unsqueeze": lambda x: x.unsqueeze(-1),
            "cat": lambda x: torch.cat([x, x * 2, x[:, :1]], -3),
            "clone": lambda x: x.clone().contiguous(),
            "detach": lambda x: x.detach(),
        },
        randn(2, 3, 5, 7),
    )
    assert {"reshape", "transpose", "broadcast_to", "concat"} <= ops(module)


def test_slicing():
    module = check_fns(
        {
            "slice": lambda x: x[:, 1:-1, ::2],
            "clamped": lambda x: x[:, 1:100, -3:],
            "steps": lambda x: x[1:, :, 1:6:3],
            "select": lambda x: x[:, -1],
            "split": lambda x: x.split(2, 1)[2],
            "split_sizes": lambda x: x.split([1, 4], 1)[1],
            "chunk": lambda x: x.chunk(3, -1)[1],
            "unbind": lambda x: x.unbind(0)[1],
        },
        randn(2, 5, 7),
    )
    assert ops(module) <= {"slice", "reshape"}


def test_constant_pad():
    module = check_fns({"pad": lambda x: F.pad(x, (1, 2, 0, 3), value=0.5)}, randn(2, 3, 4, 5))
    pad = next(n for n in module.nodes() if isinstance(n, Call) and n.op == "pad")
    assert pad.attrs["pads"] == (0, 0, 0, 1, 0, 0, 3, 2)


def test_matrix_products():
    linear, no_bias = nn.Linear(7, 4), nn.Linear(7, 3, bias=False)
    module = check_fns(
        {
            "linear": lambda x, y, z: linear(x),
            "linear_3d": lambda x, y, z: linear(y),
            "no_bias": lambda x, y, z: no_bias(x),
            "mm": lambda x, y, z: x @ x.t(),
            "bmm": lambda x, y, z: torch.bmm(y, y.transpose(1, 2)),
            "matmul_broadcast": lambda x, y, z: torch.matmul(z, y.transpose(1, 2)),
            "vector": lambda x, y, z: torch.matmul(x[0], y.transpose(1, 2)),
            "addmm": lambda x, y, z: torch.addmm(x[:, :3], x, no_bias.weight.t(), beta=0.5, alpha=2),
            "addmm_no_input": lambda x, y, z: torch.addmm(x[:, :3], x, no_bias.weight.t(), beta=0),
        },
        randn(5, 7),
        randn(2, 3, 7),
        randn(4, 1, 6, 7),
        parts=(linear, no_bias),
    )
    assert {"matmul", "add", "multiply"} <= ops(module)


def test_embedding_and_index_select_take_integer_inputs():
    table = nn.Embedding(11, 6)

    class Lookup(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = table
            self.register_buffer("rows", torch.tensor([2, 0, 2]))

        def forward(self, ids: torch.Tensor, x: torch.Tensor, cols: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return self.table(ids), x.index_select(1, cols), x.index_select(-1, self.rows)

    ids = torch.tensor([[1, 10, 3], [0, 0, 7]])
    module = check(Lookup(), ids, randn(2, 5, 3), torch.tensor([4, 1], dtype=torch.int32))
    assert [n.type.dtype for n in module.inputs] == ["int64", "float32", "int32"]
    assert [n.attrs["axis"] for n in module.nodes() if isinstance(n, Call)] == [0, 1, 2]


def test_constants_made_in_forward():
    class Scalars(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return (
                x + torch.ones(7),
                x * (torch.zeros(3, 1) + 2),
                x - torch.full((7,), 0.5),
                x / torch.tensor(4.0),
                x + torch.scalar_tensor(2.0),
                x + torch.tensor([[1.0], [2.0], [3.0]]),
            )

    check(Scalars(), randn(2, 3, 7))


def test_weights_are_named_by_their_qualified_names_and_cast_when_constant():
    class Double(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = nn.Sequential(nn.Linear(3, 3))
            self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale.double() + self.block[0].weight.double().sum(0)

    module = check(Double(), randn(2, 3).double())
    assert {c.name for c in module.constants()} == {"scale_float64", "block_0_weight_float64"}
    assert {c.type.dtype for c in module.constants()} == {"float64"}


def test_dropout_in_eval_mode_is_removed():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.ReLU())
    module = check(model, randn(3, 4))
    assert ops(module) == {"transpose", "matmul", "add", "relu"}


def test_an_output_may_be_an_input():
    module = check_fns({"same": lambda x: x.contiguous(), "twice": lambda x: x * 2}, randn(2, 3))
    assert module.outputs[0] is module.inputs[0]


def test_float64_model():
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.GELU()).double().eval()
    module = check(model, randn(1, 2, 6, 5).double(), tol=1e-9)
    assert module.outputs[0].type.dtype == "float64"


# --- What the graph level cannot represent ---


def refuses(model: nn.Module, args: tuple[torch.Tensor, ...], node: str, op: str, reason: str) -> None:
    with pytest.raises(GraphError) as error:
        from_torch(model, args)
    assert (error.value.node, error.value.op) == (node, op), str(error.value)
    assert reason in error.value.reason


def test_unsupported_operator_is_refused_before_anything_is_built(monkeypatch):
    def build(*args: object, **kwargs: object) -> None:
        raise AssertionError("built a node before refusing the model")

    monkeypatch.setattr(GraphBuilder, "call", build)
    monkeypatch.setattr(GraphBuilder, "input", build)
    model = Fn({"sort": lambda x: torch.sort(torch.relu(x)).values})
    refuses(model, (randn(5),), "sort", "aten.sort.default", "unsupported operator")


def test_custom_operator_is_refused():
    @torch.library.custom_op("tensor_tuner_test::double", mutates_args=())
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    double.register_fake(lambda x: torch.empty_like(x))
    refuses(
        Fn({"custom": lambda x: double(x) + 1}),
        (randn(3),),
        "double",
        "tensor_tuner_test.double.default",
        "unsupported",
    )


def test_integer_and_boolean_tensors_compute_like_any_other():
    """Token ids and a mask as data: comparisons, logic, casts, where and masked_fill, integer sums
    (PyTorch sums bools and int32 as int64), and the promotions between them."""
    model = Fn(
        {
            "shifted": lambda ids, mask, x: (ids > 3).long() + ids * 2 - 1,
            "keep": lambda ids, mask, x: (ids != 0) & mask.bool() | ~(ids < 5),
            "count": lambda ids, mask, x: mask.sum(-1) + (ids == 2).sum(),
            "masked": lambda ids, mask, x: x.masked_fill(~mask.bool().unsqueeze(-1), -1e9),
            "where": lambda ids, mask, x: torch.where(mask.bool().unsqueeze(-1), x, 0.5),
            "promoted": lambda ids, mask, x: x * mask.unsqueeze(-1) + ids.unsqueeze(-1) / 4,
            "cast": lambda ids, mask, x: (x * 10).int().double(),
            "int32_sum": lambda ids, mask, x: mask.int().sum(0, dtype=torch.int32),
            "mean_dtype": lambda ids, mask, x: x.mean(-1, dtype=torch.float64),
            "compare_float_scalar": lambda ids, mask, x: ids.ge(2.5),
            "positions": lambda ids, mask, x: torch.cumsum(ids.ne(2).int(), dim=1) * mask + 1,
            "running": lambda ids, mask, x: x.cumsum(-2),
        }
    )
    ids = torch.tensor([[0, 3, 7, 2, 9], [4, 2, 2, 8, 1]])
    mask = torch.tensor([[1, 1, 0, 1, 0], [1, 0, 1, 1, 1]])
    args = (ids, mask, randn(2, 5, 3))
    module = check(model, *args, names=list(model.names))
    got = graph.build(module)(*(a.numpy() for a in args))
    for name, g, w in zip(model.names, got, model(*args)):
        assert (g.dtype, g.shape) == (w.numpy().dtype, w.numpy().shape), name
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, atol=1e-6, err_msg=name)


def test_narrow_and_unsigned_integers_and_rounded_division():
    """An image as uint8 and int8 values, as data: normalized to floats, compared, divided with
    Python's `//` and torch's rounding modes (ints and floats), widened and narrowed, bits masked
    and shifted (arithmetic right shifts on a signed type)."""
    model = Fn(
        {
            "normalized": lambda img, q: img.float().mean(1) / 255.0,
            "bright": lambda img, q: img > 128,
            "floor_uint8": lambda img, q: img // 3,
            "floor_int8": lambda img, q: q // -3,
            "trunc_int16": lambda img, q: torch.div(q.to(torch.int16) * 3 - 7, 4, rounding_mode="trunc"),
            "floor_float": lambda img, q: torch.div(q.float(), 3.5, rounding_mode="floor"),
            "wrapped": lambda img, q: (img + 100) * 3,
            "narrowed": lambda img, q: (q.to(torch.int32) * 1000).to(torch.int8),
            "bits": lambda img, q: (img & 0xF0) | (img >> 4) ^ ~img,
            "shifts": lambda img, q: (
                (q << 1) + (q >> torch.tensor([0, 1, 3, 7, 2, 5, 6, 1, 4], dtype=torch.int8))
            ),
        }
    )
    img = torch.randint(0, 256, (2, 3, 5, 7), dtype=torch.uint8)
    q = torch.randint(-128, 128, (4, 9), dtype=torch.int8)
    module = check(model, img, q, names=list(model.names))
    got = graph.build(module)(img.numpy(), q.numpy())
    for name, g, w in zip(model.names, got, model(img, q)):
        assert (g.dtype, g.shape) == (w.numpy().dtype, w.numpy().shape), name
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_models_compute_in_float32_and_round_each_result(dtype: torch.dtype):
    """A float16 or bfloat16 model: weights, input and output in its type, every operator computed in
    float32 and its result rounded back. It agrees with PyTorch's own half-precision result within two
    units in the last place of the type, and with the float32 model no worse than PyTorch does."""
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 8)).to(dtype).eval()
    x = torch.randn(4, 16).to(dtype)
    module = from_torch(model, (x,))
    assert {c.type.dtype for c in module.constants()} == {str(dtype).removeprefix("torch.")}
    as_numpy = x.view(torch.int16).numpy().view("bfloat16") if dtype == torch.bfloat16 else x.numpy()
    (got,) = graph.build(module)(as_numpy)
    assert str(got.dtype) == str(dtype).removeprefix("torch.")
    got = got.astype(np.float32)
    with torch.no_grad():
        theirs = model(x).float().numpy()
        exact = model.float()(x.float()).numpy()
    ulp = float(torch.finfo(dtype).eps)
    np.testing.assert_allclose(got, theirs, rtol=2 * ulp, atol=2 * ulp)
    assert np.abs(got - exact).max() <= 1.5 * np.abs(theirs - exact).max() + ulp


def test_indexing_with_run_time_indices_and_masks_of_real_exports():
    """What transformers' exports compute at run time: torch.gather (RoBERTa's position ids),
    advanced indexing x[i, j] and x[:, i] (the mask functions), isnan and any/all (fully masked
    rows), triu/tril of a run-time tensor, full_like (folded: it reads only a shape), and a cat onto
    an empty cache."""
    model = Fn(
        {
            "gather": lambda ids, x: torch.gather(x, 1, ids.abs().clamp(max=4).unsqueeze(-1).expand(2, 5, 3)),
            "index": lambda ids, x: x[ids.abs().clamp(max=1), torch.arange(5)],
            "index_middle": lambda ids, x: x[:, ids.abs().clamp(max=4)],
            "nan": lambda ids, x: torch.isnan(x.log()),
            "any": lambda ids, x: torch.isnan(x.log()).any(dim=-1),
            "all": lambda ids, x: (x > -1).all(),
            "triu": lambda ids, x: torch.triu(x.sum(-1, keepdim=True) * x[0, 0], diagonal=1),
            "tril": lambda ids, x: torch.tril(ids, -1),
            "full_like": lambda ids, x: torch.full_like(x, 2.0) * x,
            "cat_empty": lambda ids, x: torch.cat([torch.empty(0), x.flatten()]),
        }
    )
    args = (torch.tensor([[0, 3, -2, 1, 4], [4, -1, 2, 0, 1]]), randn(2, 5, 3))
    module = check(model, *args, names=list(model.names))
    got = graph.build(module)(*(a.numpy() for a in args))
    for name, g, w in zip(model.names, got, model(*args)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, atol=1e-6, err_msg=name)
    assert "full" not in str(ops(module))


def test_index_tensors_on_axes_apart_are_refused():
    ids = torch.tensor([0, 1])
    refuses(
        Fn({"apart": lambda i, x: x[i, :, i]}),
        (ids, randn(2, 3, 4)),
        "index",
        "aten.index.Tensor",
        "not consecutive",
    )


def test_boolean_mask_indexing_is_refused():
    """Its result's shape depends on the mask's values."""
    with pytest.raises(GraphError, match="shape depends on the input data"):
        from_torch(Fn({"masked": lambda m, x: x[:, m]}), (torch.tensor([True, False, True]), randn(2, 3)))


def test_what_depends_on_no_input_folds_at_import():
    """Position ids and a causal mask from the static length, a slice of a buffer: computed by
    PyTorch at import, so the graph holds constants and only the run-time work."""

    class Positions(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.arange(32).reshape(1, 32))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            n = x.shape[-1]
            causal = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
            positions = torch.arange(n) + self.table[:, :n]
            return x.masked_fill(causal, float("-inf")) + positions

    module = check(Positions(), randn(2, 7, 7))
    assert sorted({c.op for c in module.calls() if isinstance(c, Call)}) == ["add", "where"]


def test_rank_0_inputs_and_outputs_keep_their_rank_through_the_compiled_model():
    model = Fn({"sum": lambda s, x: (x * s).sum(), "scaled": lambda s, x: x + s})
    args = (torch.tensor(2.5), randn(3, 5))
    module = check(model, *args)
    assert module.scalar_inputs == {0} and module.scalar_outputs == {0}
    got = graph.build(module)(*(a.numpy() for a in args))
    want = model(*args)
    assert [g.shape for g in got] == [(), (3, 5)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


def test_inputs_of_dtypes_the_graph_lacks_are_refused():
    fp8 = torch.ones(2).to(torch.float8_e4m3fn)
    refuses(Fn({"fp8": lambda h, x: x * 2}), (fp8, randn(2)), "args_0", "input", "dtype float8_e4m3fn")


def test_data_dependent_shape_is_refused():
    refuses(
        Fn({"mask": lambda x: x[x > 0]}),
        (randn(5),),
        "index",
        "aten.index.Tensor",
        "depends on the input data",
    )


def test_model_that_does_not_export_is_refused():
    refuses(
        Fn({"slice": lambda x, n: x[: int(n.sum())]}),
        (randn(5), torch.ones(2)),
        "Fn",
        "torch.export",
        "cannot export",
    )


def test_training_mode_dropout_is_refused():
    refuses(
        Fn({"drop": lambda x: F.dropout(x, 0.3)}),
        (randn(4),),
        "native_dropout",
        "aten.native_dropout.default",
        "training",
    )


def test_pooling_indices_are_refused():
    def pool(x: torch.Tensor) -> torch.Tensor:
        values, indices = F.max_pool2d(x, 2, return_indices=True)
        return values + indices

    refuses(
        Fn({"pool": pool}),
        (randn(1, 1, 4, 4),),
        "getitem_1",
        "aten.max_pool2d_with_indices.default",
        "the indices",
    )


@pytest.mark.parametrize(
    ("fn", "args", "reason"),
    [
        (lambda x: F.conv3d(x, torch.ones(4, 2, 1, 2, 2)), (randn(1, 2, 3, 4, 5),), "only 1-D and 2-D"),
        (lambda x: F.adaptive_avg_pool2d(x, (3, 2)), (randn(1, 1, 7, 4),), "unequal sizes"),
        (lambda x: F.avg_pool2d(x, 2, divisor_override=3), (randn(1, 1, 4, 4),), "divisor_override"),
        (lambda x: F.pad(x, (-1, 1)), (randn(2, 3),), "negative padding"),
        (lambda x: x[:, 3:3] + 1, (randn(2, 5),), "empty"),
    ],
    ids=[
        "conv3d",
        "adaptive_uneven",
        "divisor_override",
        "crop",
        "empty_slice",
    ],
)
def test_unrepresentable_attributes_are_refused(fn, args, reason):
    with pytest.raises(GraphError, match=reason):
        from_torch(Fn({"f": fn}), args)


def test_side_effects_and_non_tensor_outputs_are_refused():
    class Counter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("count", torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.count.add_(1)
            return x + self.count

    with pytest.raises(GraphError, match="side effect"):
        from_torch(Counter(), (randn(2),))
    with pytest.raises(GraphError, match="side effect"):
        from_torch(Fn({"print": lambda x: torch.ops.aten._print("hello") or x}), (randn(2),))
    with pytest.raises(GraphError, match="not a tensor"):
        from_torch(Fn({"x": lambda x: x, "three": lambda x: 3}), (randn(2),))  # type: ignore[dict-item]


def test_constants_are_only_the_weights_the_outputs_use():
    bn = nn.BatchNorm2d(2)
    module = from_torch(bn, (randn(1, 2, 3, 3),))
    assert all(isinstance(c, Constant) for c in module.constants())
    assert "num_batches_tracked" not in {c.name for c in module.constants()}


class Cumprod(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x + 1, 1)


def test_a_refusal_names_the_line_of_the_model_it_comes_from():
    """torch.export records each node's source: the error points at the user's line, not only at an
    ATen node name the user never wrote."""
    with pytest.raises(GraphError, match=r"\(at .*test_torch\.py:\d+: return torch\.cumprod\(x \+ 1, 1\)\)"):
        from_torch(Cumprod(), (randn(2, 3),))
