"""Import a PyTorch model into the graph level: `from_torch(model, example_args)`.

Why torch.export and not FX symbolic tracing: symbolic tracing records whatever Python calls the
model makes (submodules, tensor methods, any of some 2000 torch functions, each with a Python
signature and defaults), knows no shapes, and bakes in one branch of data-dependent control flow
silently. torch.export runs the model on fake tensors, so every intermediate has a static shape and
dtype, data-dependent shapes are marked as such, and parameters and buffers are named by their
fully qualified names in the graph signature. Its decompositions then reduce the model to core ATen:
a closed set of some 180 operators with fixed schemas, documented in PyTorch's IR reference
(https://pytorch.org/docs/stable/torch.compiler_ir.html). We convert that set operator by operator,
one small function per overload (`_CONVERTERS`), and refuse anything else by name before building.

Three operators stay out of the decomposition because the catalog has each as one operator where
core ATen spells it with three to five: hardswish, hardsigmoid and silu. PyTorch-level calls that are
not core ATen (linear, matmul, flatten, reshape, transpose, t, squeeze, dropout in eval mode,
adaptive pooling to 1x1, ones/zeros, ...) arrive as their decompositions and need no converter.
"""

from __future__ import annotations

import itertools
import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:
    import torch
    from torch.export import ExportedProgram
    from torch.export.graph_signature import InputKind, InputSpec, OutputKind
    from torch.fx.operator_schemas import normalize_function
except ImportError as e:  # pragma: no cover - the models extra is installed wherever tests run
    raise ImportError("from_torch needs the torch package: pip install 'tensor-tuner[models]'") from e

from compiler.dtypes import convert
from compiler.frontend.torch_dims import DynamicShapes, has_dynamic_inputs, shape_family
from compiler.frontend.torch_static import CONSTANT_INPUTS, ConstantValues, constant_nodes, folds
from compiler.graph import normalize
from compiler.graph.builder import GraphBuilder
from compiler.graph.conv_transpose import conv_transpose2d
from compiler.graph.ir import DTYPES, Constant, GraphError, Module, Node, TensorType
from compiler.graph.resize import (
    Filter,
    interpolation_taps,
    resize_axis_linear,
    resize_axis_nearest,
    resize_axis_taps,
    source_coordinates,
)
from compiler.graph.shape_family import ShapeFamily

aten = torch.ops.aten
OpOverload = torch._ops.OpOverload

# Decomposed by default, kept: the catalog has them as single operators.
_KEEP = (aten.hardswish.default, aten.hardsigmoid.default, aten.silu.default)


def from_torch(
    model: torch.nn.Module | ExportedProgram,
    example_args: tuple[torch.Tensor, ...] | None = None,
    *,
    dynamic_shapes: DynamicShapes = None,
) -> Module | ShapeFamily:
    """The graph module computing `model` on inputs shaped like `example_args`: float tensors, or
    int64/int32 tensors used only as embedding indices. A module is exported in eval mode (it is
    switched to it); a program already exported (`torch.export.load` of a .pt2 file) is taken as it
    is, without example inputs. Parameters and buffers become constants named by their fully
    qualified names (sanitized by the builder: "layer1.0.conv1.weight" -> "layer1_0_conv1_weight");
    outputs keep the model's order, rank-0 ones included (`Module.scalar_outputs`).

    `dynamic_shapes` is torch.export's own argument (`{"ids": {1: Dim("seq", min=1, max=512)}}`):
    with it, or for a program exported with dynamic dimensions, the result is a ShapeFamily, the model
    imported at each binding of the dimensions it is asked for (`compiler.frontend.torch_dims`).

    Raises GraphError (naming the node and the operator) for a model that cannot be exported or that
    uses anything the graph level cannot represent, before building anything."""
    if dynamic_shapes is not None or (isinstance(model, ExportedProgram) and has_dynamic_inputs(model)):
        return shape_family(model, example_args, dynamic_shapes, _static)
    return _static(model, example_args)


def _static(
    model: torch.nn.Module | ExportedProgram, example_args: tuple[torch.Tensor, ...] | None = None
) -> Module:
    program = _export(model, example_args)
    try:
        return _convert(program, _check(program))
    except GraphError as e:
        raise _located(program, e) from e


def _located(program: ExportedProgram, error: GraphError) -> GraphError:
    """The error with the line of the model's source its node comes from, which torch.export records
    (the innermost frame: a Hugging Face model's own line, not the user's call of it)."""
    node = next((n for n in program.graph.nodes if n.name == error.node), None)
    trace = str(node.meta.get("stack_trace") or "") if node is not None else ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*)', trace)
    if not frames:
        return error
    path, line, code = frames[-1]
    return GraphError(error.node, error.op, f"{error.reason} (at {path}:{line}: {code.strip()})")


def _export(
    model: torch.nn.Module | ExportedProgram, example_args: tuple[torch.Tensor, ...] | None
) -> ExportedProgram:
    if isinstance(model, ExportedProgram) != (example_args is None):
        raise TypeError("pass example inputs with a torch.nn.Module, and none with an ExportedProgram")
    table = torch.export.default_decompositions()
    for op in _KEEP:
        del table[op]
    try:
        if isinstance(model, torch.nn.Module):
            model = torch.export.export(model.eval(), tuple(example_args or ()))
        return model.run_decompositions(table)
    except Exception as e:  # torch raises many types here; each means "this model cannot be captured"
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        name = type(model).__name__
        raise GraphError(name, "torch.export", f"cannot export the model: {reason}") from e


# --- Checks: everything the conversion would refuse, found before anything is built. ---

# Multi-output operators of which only the first output converts; what the others are.
_FIRST_OUTPUT_ONLY: dict[OpOverload, str] = {
    aten.max_pool2d_with_indices.default: "the indices",
    aten.native_layer_norm.default: "the mean and reciprocal standard deviation",
    aten._native_batch_norm_legit_no_training.default: "the saved statistics",
    aten._native_batch_norm_legit.no_stats: "the saved statistics",
    aten.native_group_norm.default: "the mean and reciprocal standard deviation",
}

_REFUSED: dict[OpOverload, str] = {
    aten.native_dropout.default: "dropout in training mode is random; pass training=self.training "
    "to F.dropout (or use nn.Dropout) so that eval mode removes it",
}

# Checks export made on the example inputs; nothing to compute.
_IGNORED = (aten._assert_tensor_metadata.default,)


def _check(program: ExportedProgram) -> set[torch.fx.Node]:
    """Refuse what cannot convert; returns the nodes folded at import (`torch_static`)."""
    _check_outputs(program)
    known = constant_nodes(program)
    nodes = [n for n in program.graph.nodes if n.op == "call_function"]
    folded = {n for n in nodes if folds(n, known, _CONVERTERS.__contains__)}
    converted = [n for n in nodes if n not in folded]
    for node in converted:
        _check_static(node)
    for node in converted:
        _check_supported(node)
    by_name = {n.name: n for n in program.graph.nodes}
    for spec in program.graph_signature.input_specs:
        _check_input(spec, by_name[spec.arg.name])
    return folded


def _check_outputs(program: ExportedProgram) -> None:
    for spec in program.graph_signature.output_specs:
        name = getattr(spec.arg, "name", str(spec.arg))
        if spec.kind != OutputKind.USER_OUTPUT:
            raise GraphError(
                name,
                "output",
                f"the model has a side effect ({spec.kind.name} of {spec.target}): "
                "an inference graph only computes its outputs",
            )
        if not isinstance(spec.arg, torch.export.graph_signature.TensorArgument):
            raise GraphError(name, "output", "the model returns a value that is not a tensor")


def _check_static(node: torch.fx.Node) -> None:
    if not _is_static(node.meta.get("val")):
        raise GraphError(
            node.name,
            _op_name(node),
            "the output's shape depends on the input data; "
            "the graph level needs every shape known from the input shapes",
        )


def _is_static(value: object) -> bool:
    if isinstance(value, torch.Tensor):
        return all(isinstance(d, int) for d in value.shape)
    if isinstance(value, (tuple, list)):
        return all(_is_static(v) for v in value)
    return not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))


def _check_supported(node: torch.fx.Node) -> None:
    if node.target is operator.getitem:
        source = node.args[0]
        assert isinstance(source, torch.fx.Node)
        if node.args[1] != 0 and source.target in _FIRST_OUTPUT_ONLY:
            what = _FIRST_OUTPUT_ONLY[source.target]
            raise GraphError(node.name, _op_name(source), f"uses {what} output, which is not supported")
    elif node.target in _REFUSED:
        raise GraphError(node.name, _op_name(node), _REFUSED[node.target])
    elif node.target not in _CONVERTERS and node.target not in _IGNORED:
        raise GraphError(
            node.name,
            _op_name(node),
            "unsupported operator on values computed at run time "
            "(it folds only when its inputs do not depend on the model's inputs)",
        )


def _check_input(spec: InputSpec, node: torch.fx.Node) -> None:
    """User inputs, weights and buffers of a dtype the graph has."""
    if spec.kind not in (InputKind.USER_INPUT, *CONSTANT_INPUTS):
        raise GraphError(node.name, "input", f"{spec.kind.name} inputs are not supported")
    dtype = _dtype_name(node.meta["val"].dtype)
    if dtype not in DTYPES and (node.users or spec.kind == InputKind.USER_INPUT):
        raise GraphError(node.name, "input", f"dtype {dtype} is not supported ({', '.join(DTYPES)})")


# --- Conversion ---


@dataclass
class _Context:
    """The builder and the graph node (or nodes, for multi-output operators) of each fx node; the
    values of the nodes folded at import become constants when a converted node first uses them."""

    constants: ConstantValues
    builder: GraphBuilder = field(default_factory=GraphBuilder)
    values: dict[torch.fx.Node, Node] = field(default_factory=dict)
    tuples: dict[torch.fx.Node, tuple[Node, ...]] = field(default_factory=dict)

    def tensor(self, arg: object) -> Node:
        assert isinstance(arg, torch.fx.Node), f"expected a tensor argument, got {arg!r}"
        if arg not in self.values:
            value = self.constants[arg]
            if not isinstance(value, torch.Tensor):
                raise GraphError(arg.name, _op_name(arg), f"computes a {type(value).__name__}, not a tensor")
            self.values[arg] = self.builder.constant(arg.name, _to_numpy(value))
        return self.values[arg]

    def call(self, node: torch.fx.Node, op: str, args: Sequence[Node], **attrs: object) -> Node:
        return self.builder.call(op, args, name=node.name, **attrs)

    def constant(self, hint: str, value: object, dtype: str) -> Constant:
        return self.builder.constant(hint, np.asarray(value, dtype=dtype))

    def operand(self, node: torch.fx.Node, value: object, dtype: str) -> Node:
        """A binary operator's operand as `dtype` (what PyTorch's type promotion computes in): a
        tensor, cast if it has another dtype (an int64 mask times a float tensor), or a Python
        number as a constant."""
        if not isinstance(value, torch.fx.Node):
            return self.constant(f"{node.name}_scalar", value, dtype)
        return _as_dtype(self, node, self.tensor(value), dtype)


Converter = Callable[[_Context, torch.fx.Node, dict[str, Any]], Node | tuple[Node, ...]]
_CONVERTERS: dict[OpOverload, Converter] = {}


def _converts(*ops: OpOverload) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for op in ops:
            _CONVERTERS[op] = fn
        return fn

    return register


def _convert(program: ExportedProgram, folded: set[torch.fx.Node]) -> Module:
    ctx = _Context(ConstantValues(program, constant_nodes(program)))
    specs = {spec.arg.name: spec for spec in program.graph_signature.input_specs}
    by_name = {n.name: n for n in program.graph.nodes}
    for node in program.graph.nodes:
        if node.op == "placeholder" and (node.users or specs[node.name].kind == InputKind.USER_INPUT):
            ctx.values[node] = _input_or_weight(ctx, program, specs[node.name], node)
        elif node in folded:
            continue  # a constant, made when a converted node uses it
        elif node.op == "call_function" and node.target is operator.getitem:
            ctx.values[node] = ctx.tuples[node.args[0]][node.args[1]]
        elif node.op == "call_function" and node.target not in _IGNORED:
            _convert_call(ctx, node)
    nodes = [by_name[spec.arg.name] for spec in program.graph_signature.output_specs]
    return ctx.builder.module(
        [ctx.values[n] for n in nodes], [k for k, n in enumerate(nodes) if _rank(n) == 0]
    )


def _convert_call(ctx: _Context, node: torch.fx.Node) -> None:
    converted = _CONVERTERS[node.target](ctx, node, _args(node))  # type: ignore[index]
    if isinstance(converted, tuple):
        ctx.tuples[node] = converted
        expected = node.meta["val"][: len(converted)]
    else:
        ctx.values[node] = converted
        converted, expected = (converted,), (node.meta["val"],)
    # A converter's output must be what PyTorch computes; catches attributes no converter handles
    # (a reduction's dtype= argument, say) instead of returning a model that computes something else.
    for graph_node, value in zip(converted, expected):
        want = TensorType(_graph_shape(value.shape), _dtype_name(value.dtype))
        if graph_node.type != want:
            raise GraphError(
                node.name, _op_name(node), f"converts to {graph_node.type}, PyTorch computes {want}"
            )


def _input_or_weight(ctx: _Context, program: ExportedProgram, spec: InputSpec, node: torch.fx.Node) -> Node:
    value = node.meta["val"]
    if spec.kind == InputKind.USER_INPUT:
        return ctx.builder.input(node.name, tuple(value.shape), _dtype_name(value.dtype))
    assert spec.target is not None
    tensor = program.state_dict.get(spec.target, program.constants.get(spec.target))
    assert isinstance(tensor, torch.Tensor), f"no tensor for {spec.target}"
    return ctx.builder.constant(spec.target, _to_numpy(tensor))


# --- Helpers shared by the converters ---


def _args(node: torch.fx.Node) -> dict[str, Any]:
    """All of the call's arguments by schema name, defaults filled in ("self" is "input")."""
    bound = normalize_function(
        node.target,  # type: ignore[arg-type]
        tuple(node.args),
        dict(node.kwargs),
        normalize_to_only_use_kwargs=True,
    )
    assert bound is not None, f"{node.target}'s arguments do not match its schema"
    return dict(bound.kwargs)


def _op_name(node: torch.fx.Node) -> str:
    return "getitem" if node.target is operator.getitem else str(node.target)


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A weight as numpy holds it; numpy's bfloat16 is ml_dtypes' (PyTorch's .numpy() refuses it)."""
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view("bfloat16")
    return tensor.numpy()


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _graph_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """The graph has no rank-0 tensors: a PyTorch scalar tensor is shape (1,), as a scalar constant."""
    return tuple(int(d) for d in shape) or (1,)


def _shape(node: torch.fx.Node) -> tuple[int, ...]:
    return _graph_shape(node.meta["val"].shape)


def _rank(node: object) -> int:
    assert isinstance(node, torch.fx.Node)
    return int(node.meta["val"].dim())


def _dtype(node: torch.fx.Node) -> str:
    return _dtype_name(node.meta["val"].dtype)


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _axes(dims: Sequence[int] | None, rank: int) -> tuple[int, ...]:
    """Sorted, unique, non-negative axes; none (or an empty list) means all of them, as in ATen."""
    return tuple(sorted({_axis(d, rank) for d in dims})) if dims else tuple(range(rank))


def _pair(values: Sequence[int]) -> tuple[int, int]:
    """ATen's int[2] arguments may hold one value for both spatial dimensions."""
    return (values[0], values[0]) if len(values) == 1 else (values[0], values[1])


def _reshape(ctx: _Context, node: torch.fx.Node, x: Node) -> Node:
    """`x` reshaped to `node`'s shape (itself when it has it already)."""
    shape = _shape(node)
    return x if x.type.shape == shape else ctx.call(node, "reshape", [x], shape=shape)


def _slice(ctx: _Context, node: torch.fx.Node, x: Node, axis: int, begin: int, end: int, step: int) -> Node:
    """`x[begin:end:step]` along `axis`, with the other axes whole; bounds already normalized."""
    shape = x.type.shape
    if begin >= end:
        raise GraphError(node.name, _op_name(node), "the slice is empty")
    if (begin, end, step) == (0, shape[axis], 1):
        return x
    begins, ends, strides = [0] * len(shape), list(shape), [1] * len(shape)
    begins[axis], ends[axis], strides[axis] = begin, end, step
    return ctx.call(node, "slice", [x], begin=tuple(begins), end=tuple(ends), strides=tuple(strides))


def _affine(ctx: _Context, node: torch.fx.Node, a: dict[str, Any], key: str, shape: Sequence[int]) -> Node:
    """A norm's optional weight or bias: the tensor, or ones or zeros of the input's dtype."""
    if a[key] is not None:
        return ctx.tensor(a[key])
    fill = 1.0 if key == "weight" else 0.0
    return ctx.constant(f"{node.name}_{key}", np.full(shape, fill), _dtype(a["input"]))


# --- Elementwise ---

_UNARY = {
    aten.relu.default: "relu",
    aten.sigmoid.default: "sigmoid",
    aten.tanh.default: "tanh",
    aten.erf.default: "erf",
    aten.exp.default: "exp",
    aten.log.default: "log",
    aten.sqrt.default: "sqrt",
    aten.neg.default: "negative",
    aten.abs.default: "abs",
    aten.hardswish.default: "hardswish",
    aten.silu.default: "silu",
    aten.floor.default: "floor",
    aten.ceil.default: "ceil",
    aten.round.default: "round",
    aten.trunc.default: "trunc",
    aten.sign.default: "sign",
    aten.expm1.default: "expm1",
    aten.log1p.default: "log1p",
}


def _unary(op: str) -> Converter:
    return lambda ctx, node, a: ctx.call(node, op, [ctx.tensor(a["input"])])


for _aten_op, _graph_op in _UNARY.items():
    _CONVERTERS[_aten_op] = _unary(_graph_op)


@_converts(aten.hardsigmoid.default)
def _hardsigmoid(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    return ctx.call(node, "hardsigmoid", [ctx.tensor(a["input"])], alpha=1.0 / 6.0, beta=0.5)


@_converts(aten.gelu.default)
def _gelu(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    return ctx.call(node, "gelu", [ctx.tensor(a["input"])], approximate=a["approximate"])


@_converts(aten.elu.default)
def _elu(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """ELU, and SELU and CELU, which PyTorch decomposes into it."""
    scales = {k: float(a[k]) for k in ("alpha", "scale", "input_scale")}
    return ctx.call(node, "elu", [ctx.tensor(a["input"])], **scales)


@_converts(aten.leaky_relu.default)
def _leaky_relu(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    return ctx.call(node, "leaky_relu", [ctx.tensor(a["input"])], alpha=float(a["negative_slope"]))


def _clip(ctx: _Context, node: torch.fx.Node, x: Node, low: float | None, high: float | None) -> Node:
    return ctx.call(
        node, "clip", [x], min=None if low is None else float(low), max=None if high is None else float(high)
    )


@_converts(aten.clamp.default)
def _clamp(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    return _clip(ctx, node, ctx.tensor(a["input"]), a["min"], a["max"])


@_converts(aten.hardtanh.default)
def _hardtanh(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """ReLU6 is hardtanh(0, 6)."""
    return _clip(ctx, node, ctx.tensor(a["input"]), a["min_val"], a["max_val"])


@_converts(aten.reciprocal.default)
def _reciprocal(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    return ctx.call(
        node, "divide", [ctx.constant(f"{node.name}_one", 1, _dtype(node)), ctx.tensor(a["input"])]
    )


@_converts(aten.rsqrt.default)
def _rsqrt(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    root = ctx.call(node, "sqrt", [ctx.tensor(a["input"])])
    return ctx.call(node, "divide", [ctx.constant(f"{node.name}_one", 1, _dtype(node)), root])


_BINARY = {
    aten.add.Tensor: "add",
    aten.add.Scalar: "add",
    aten.sub.Tensor: "subtract",
    aten.sub.Scalar: "subtract",
    aten.mul.Tensor: "multiply",
    aten.mul.Scalar: "multiply",
    aten.div.Tensor: "divide",
    aten.div.Scalar: "divide",
    aten.pow.Tensor_Tensor: "power",
    aten.pow.Tensor_Scalar: "power",
    aten.pow.Scalar: "power",
    aten.maximum.default: "maximum",
    aten.minimum.default: "minimum",
}


def _binary(op: str) -> Converter:
    def convert(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
        """`input op alpha * other`: either side may be a Python number (ATen's `1 - x` is
        sub.Tensor(1, x), `2 ** x` pow.Scalar(2, x)); add and sub carry alpha."""
        dtype = _dtype(node)
        other, alpha = a.get("other", a.get("exponent")), a.get("alpha", 1)
        if alpha != 1 and isinstance(other, torch.fx.Node):
            scale = ctx.constant(f"{node.name}_alpha", alpha, dtype)
            rhs = ctx.call(node, "multiply", [ctx.operand(node, other, dtype), scale])
        else:
            rhs = ctx.operand(node, other if alpha == 1 else other * alpha, dtype)
        return ctx.call(node, op, [ctx.operand(node, a["input"], dtype), rhs])

    return convert


for _aten_op, _graph_op in _BINARY.items():
    _CONVERTERS[_aten_op] = _binary(_graph_op)


@_converts(aten.remainder.Tensor, aten.remainder.Scalar, aten.fmod.Tensor, aten.fmod.Scalar)
def _mod(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """remainder takes the divisor's sign, fmod the dividend's; both in the result's dtype."""
    dtype = _dtype(node)
    operands = [ctx.operand(node, a["input"], dtype), ctx.operand(node, a["other"], dtype)]
    truncated = node.target in (aten.fmod.Tensor, aten.fmod.Scalar)
    return ctx.call(node, "mod", operands, fmod=truncated)


@_converts(aten.div.Tensor_mode, aten.div.Scalar_mode, aten.floor_divide.default)
def _div_rounded(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """Division rounded toward zero ("trunc") or down ("floor", Python's `//`). The graph's integer
    divide rounds toward zero; for floor the remainder with the divisor's sign is taken off first, so
    that the division is exact. PyTorch raises on an integer division by zero, where the graph gives 0."""
    dtype = _dtype(node)
    x, y = ctx.operand(node, a["input"], dtype), ctx.operand(node, a["other"], dtype)
    mode = "floor" if node.target == aten.floor_divide.default else a.get("rounding_mode")
    if mode is None:
        return ctx.call(node, "divide", [x, y])
    if dtype.startswith("float"):
        return ctx.call(node, mode, [ctx.call(node, "divide", [x, y])])
    if mode == "trunc":
        return ctx.call(node, "divide", [x, y])
    remainder = ctx.call(node, "mod", [x, y], fmod=False)
    return ctx.call(node, "divide", [ctx.call(node, "subtract", [x, remainder]), y])


_COMPARISONS = {
    aten.eq.Tensor: "equal",
    aten.eq.Scalar: "equal",
    aten.ne.Tensor: "not_equal",
    aten.ne.Scalar: "not_equal",
    aten.lt.Tensor: "less",
    aten.lt.Scalar: "less",
    aten.le.Tensor: "less_equal",
    aten.le.Scalar: "less_equal",
    aten.gt.Tensor: "greater",
    aten.gt.Scalar: "greater",
    aten.ge.Tensor: "greater_equal",
    aten.ge.Scalar: "greater_equal",
}


def _compare(op: str) -> Converter:
    def convert(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
        """Both sides in the dtype PyTorch compares them in (int64 with a float scalar: float)."""
        dtype = _promoted(a["input"], a["other"])
        return ctx.call(
            node, op, [ctx.operand(node, a["input"], dtype), ctx.operand(node, a["other"], dtype)]
        )

    return convert


def _promoted(tensor: torch.fx.Node, other: Any) -> str:
    """The dtype PyTorch's type promotion gives a tensor and a tensor or Python number."""
    value = other.meta["val"] if isinstance(other, torch.fx.Node) else other
    return _dtype_name(torch.result_type(tensor.meta["val"], value))


for _aten_op, _graph_op in _COMPARISONS.items():
    _CONVERTERS[_aten_op] = _compare(_graph_op)

_LOGIC = {
    aten.logical_and.default: "logical_and",
    aten.logical_or.default: "logical_or",
    aten.logical_xor.default: "logical_xor",
}
_BITWISE = {
    aten.bitwise_and.Tensor: "and",
    aten.bitwise_and.Scalar: "and",
    aten.bitwise_or.Tensor: "or",
    aten.bitwise_or.Scalar: "or",
    aten.bitwise_xor.Tensor: "xor",
    aten.bitwise_xor.Scalar: "xor",
}


def _logic(op: str) -> Converter:
    def convert(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
        """logical_* of any dtypes compares each with 0."""
        x, y = (_as_dtype(ctx, node, ctx.tensor(a[k]), "bool") for k in ("input", "other"))
        return ctx.call(node, op, [x, y])

    return convert


def _bitwise(name: str) -> Converter:
    def convert(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
        """On bools the logical op; on integers the bitwise one, in the result's dtype."""
        dtype = _dtype(node)
        x, y = (ctx.operand(node, a[k], dtype) for k in ("input", "other"))
        return ctx.call(node, f"logical_{name}" if dtype == "bool" else f"bitwise_{name}", [x, y])

    return convert


for _aten_op, _graph_op in _LOGIC.items():
    _CONVERTERS[_aten_op] = _logic(_graph_op)
for _aten_op, _name in _BITWISE.items():
    _CONVERTERS[_aten_op] = _bitwise(_name)


_LEFT_SHIFTS = (
    aten.bitwise_left_shift.Tensor,
    aten.bitwise_left_shift.Tensor_Scalar,
    aten.__lshift__.Tensor,
    aten.__lshift__.Scalar,
)


@_converts(
    *_LEFT_SHIFTS,
    aten.bitwise_right_shift.Tensor,
    aten.bitwise_right_shift.Tensor_Scalar,
    aten.__rshift__.Tensor,
    aten.__rshift__.Scalar,
)
def _shift(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """`<<` and `>>` on integers (arithmetic right shifts on signed types, as PyTorch's)."""
    dtype = _dtype(node)
    left = node.target in _LEFT_SHIFTS
    x, y = (ctx.operand(node, a[k], dtype) for k in ("input", "other"))
    return ctx.call(node, "shift_left" if left else "shift_right", [x, y])


@_converts(aten.logical_not.default, aten.bitwise_not.default)
def _logical_not(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    x = ctx.tensor(a["input"])
    if node.target is aten.bitwise_not.default and x.type.dtype != "bool":
        return ctx.call(node, "bitwise_not", [x])
    return ctx.call(node, "logical_not", [_as_dtype(ctx, node, x, "bool")])


@_converts(aten.isnan.default)
def _isnan(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    return ctx.call(node, "isnan", [ctx.tensor(a["input"])])


@_converts(aten.triu.default, aten.tril.default)
def _triangle(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """A select under a constant mask of the last two axes (their sizes are static)."""
    rows, cols = _shape(node)[-2:]
    keep = (np.triu if node.target is aten.triu.default else np.tril)(
        np.ones((rows, cols), bool), a["diagonal"]
    )
    x = ctx.tensor(a["input"])
    zero = ctx.constant(f"{node.name}_zero", 0, x.type.dtype)
    return ctx.call(node, "where", [ctx.constant(f"{node.name}_mask", keep, "bool"), x, zero])


@_converts(aten.where.self)
def _where(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    dtype = _dtype(node)
    x, y = (ctx.operand(node, a[k], dtype) for k in ("input", "other"))
    return ctx.call(node, "where", [ctx.tensor(a["condition"]), x, y])


@_converts(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    dtype = _dtype(node)
    fill = ctx.operand(node, a["value"], dtype)
    return ctx.call(node, "where", [ctx.tensor(a["mask"]), fill, ctx.tensor(a["input"])])


# --- Convolution, normalization, pooling ---


@_converts(aten.convolution.default)
def _convolution(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """nn.Conv2d and nn.ConvTranspose2d; nn.Conv1d and nn.ConvTranspose1d as 2-D over rows of
    height 1."""
    rank = _rank(a["input"])
    if rank not in (3, 4):
        raise GraphError(node.name, _op_name(node), "only 1-D and 2-D convolutions are supported")
    x, w = ctx.tensor(a["input"]), ctx.tensor(a["weight"])
    stride, dilation = _window_pair(a["stride"], rank, 1), _window_pair(a["dilation"], rank, 1)
    pad_h, pad_w = _window_pair(a["padding"], rank, 0)
    if rank == 3:
        x = ctx.builder.call(
            "reshape", [x], name=f"{node.name}_rows", shape=(*x.type.shape[:2], 1, x.type.shape[2])
        )
        w = ctx.builder.call(
            "reshape", [w], name=f"{node.name}_rows", shape=(*w.type.shape[:2], 1, w.type.shape[2])
        )
    if a["transposed"]:
        out = conv_transpose2d(
            ctx.builder,
            node.name,
            x,
            w,
            strides=stride,
            padding=(pad_h, pad_w, pad_h, pad_w),
            output_padding=_window_pair(a["output_padding"], rank, 0),
            dilation=dilation,
            groups=int(a["groups"]),
        )
    else:
        out = ctx.call(
            node,
            "conv2d",
            [x, w],
            strides=stride,
            padding=(pad_h, pad_w, pad_h, pad_w),
            dilation=dilation,
            groups=int(a["groups"]),
        )
    if rank == 3:
        out = ctx.call(node, "reshape", [out], shape=_shape(node))
    if a["bias"] is None:
        return out
    bias = ctx.tensor(a["bias"])
    shape = (bias.type.shape[0],) + (1,) * (rank - 2)
    bias = ctx.builder.call("reshape", [bias], name=f"{node.name}_bias", shape=shape)
    return ctx.call(node, "add", [out, bias])


def _window_pair(values: Sequence[int], rank: int, neutral: int) -> tuple[int, int]:
    """A conv argument for both spatial dimensions of the 2-D form: a 1-D conv's rows have height
    1, so its height takes the `neutral` value (stride 1, padding 0)."""
    return _pair(values) if rank == 4 else (neutral, int(values[0]))


@_converts(aten.upsample_nearest2d.vec, aten.upsample_bilinear2d.vec)
def _upsample(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """F.interpolate's nearest and bilinear modes, their source coordinates in float32 as PyTorch's
    CPU kernels compute them: nearest takes floor(out * in / out) (or out / scale_factor, when one is
    given), bilinear samples at (out + 0.5) * in / out - 0.5, or out * (in - 1) / (out - 1) with
    align_corners (compiler.graph.resize)."""
    x = ctx.tensor(a["input"])
    factors = a.get("scale_factors")
    out = x
    for axis, (in_len, out_len) in enumerate(zip(x.type.shape[2:], _shape(node)[2:]), start=2):
        if in_len == out_len and not factors:
            continue
        ratio = np.float32(1 / factors[axis - 2] if factors else in_len / out_len)
        index = np.arange(out_len, dtype=np.float32)
        name = f"{node.name}_axis{axis}"
        if node.target is aten.upsample_nearest2d.vec:
            rows = np.minimum(np.floor(index * ratio), in_len - 1).astype(np.int64)
            out = resize_axis_nearest(ctx.builder, name, out, axis, rows)
        elif a["align_corners"]:
            step = np.float32((in_len - 1) / (out_len - 1)) if out_len > 1 else np.float32(0)
            out = resize_axis_linear(ctx.builder, name, out, axis, index * step)
        else:
            out = resize_axis_linear(
                ctx.builder, name, out, axis, ratio * (index + np.float32(0.5)) - np.float32(0.5)
            )
    return out if out is not x else ctx.call(node, "reshape", [x], shape=x.type.shape)


@_converts(aten._upsample_bilinear2d_aa.default, aten._upsample_bicubic2d_aa.default)
def _upsample_antialiased(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """F.interpolate(..., antialias=True) as PyTorch (and PIL) compute it: the filter widened by the
    downsampling factor, taps outside the input dropped and the rest renormalized, bicubic with
    a = -0.5 (compiler.graph.resize)."""
    if a["align_corners"]:
        reason = "antialiased interpolation with align_corners=True is not supported"
        raise GraphError(node.name, _op_name(node), reason)
    cubic = node.target is aten._upsample_bicubic2d_aa.default
    f = Filter("cubic" if cubic else "linear", antialias=True, cubic_a=-0.5, exclude_outside=True)
    x = ctx.tensor(a["input"])
    out = x
    factors = (a.get("scales_h"), a.get("scales_w"))
    for axis, (in_len, out_len, factor) in enumerate(
        zip(x.type.shape[2:], _shape(node)[2:], factors), start=2
    ):
        scale = float(factor) if factor else out_len / in_len
        if in_len == out_len and scale == 1:
            continue
        coords = source_coordinates(in_len, out_len, scale, "half_pixel")
        rows, weights = interpolation_taps(coords, in_len, scale, f)
        out = resize_axis_taps(ctx.builder, f"{node.name}_axis{axis}", out, axis, rows, weights)
    return out if out is not x else ctx.call(node, "reshape", [x], shape=x.type.shape)


@_converts(aten._native_batch_norm_legit_no_training.default)
def _batch_norm(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> tuple[Node, ...]:
    channels = _shape(a["input"])[1:2]
    out = ctx.call(
        node,
        "batch_norm",
        [
            ctx.tensor(a["input"]),
            _affine(ctx, node, a, "weight", channels),
            _affine(ctx, node, a, "bias", channels),
            ctx.tensor(a["running_mean"]),
            ctx.tensor(a["running_var"]),
        ],
        epsilon=float(a["eps"]),
    )
    return (out,)


@_converts(aten.native_layer_norm.default)
def _layer_norm(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> tuple[Node, ...]:
    normalized = tuple(a["normalized_shape"])
    rank = _rank(a["input"])
    out = ctx.call(
        node,
        "layer_norm",
        [
            ctx.tensor(a["input"]),
            _affine(ctx, node, a, "weight", normalized),
            _affine(ctx, node, a, "bias", normalized),
        ],
        axes=tuple(range(rank - len(normalized), rank)),
        epsilon=float(a["eps"]),
    )
    return (out,)


def _window(a: dict[str, Any]) -> dict[str, object]:
    """max_pool2d's and avg_pool2d's window attributes from ATen's: an empty stride means the kernel
    size, and padding is symmetric."""
    kernel = _pair(a["kernel_size"])
    pad_h, pad_w = _pair(a["padding"])
    return {
        "kernel": kernel,
        "strides": _pair(a["stride"]) if a["stride"] else kernel,
        "padding": (pad_h, pad_w, pad_h, pad_w),
        "ceil_mode": bool(a["ceil_mode"]),
    }


def _pool(ctx: _Context, node: torch.fx.Node, a: dict[str, Any], op: str, **attrs: object) -> Node:
    """NCHW pooling; an unbatched (C, H, W) input, which ATen pools too, is pooled as a batch of one."""
    x = ctx.tensor(a["input"])
    if len(x.type.shape) == 4:
        return ctx.call(node, op, [x], **attrs)
    batch = ctx.call(node, "reshape", [x], shape=(1, *x.type.shape))
    out = ctx.call(node, op, [batch], **attrs)
    return ctx.call(node, "reshape", [out], shape=out.type.shape[1:])


@_converts(aten.max_pool2d_with_indices.default)
def _max_pool2d(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> tuple[Node, ...]:
    out = _pool(ctx, node, a, "max_pool2d", dilation=_pair(a["dilation"]), **_window(a))
    return (out,)


@_converts(aten.avg_pool2d.default)
def _avg_pool2d(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    if a["divisor_override"] is not None:
        raise GraphError(node.name, _op_name(node), "divisor_override is not supported")
    return _pool(ctx, node, a, "avg_pool2d", count_include_pad=bool(a["count_include_pad"]), **_window(a))


@_converts(aten._adaptive_avg_pool2d.default)
def _adaptive_avg_pool2d(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """Windows of equal size exactly when the output size divides the input's: then it is an average
    pool. (Pooling to 1x1 never gets here: PyTorch exports it as a mean.)"""
    (height, width), (out_h, out_w) = _shape(a["input"])[-2:], _pair(a["output_size"])
    if height % out_h or width % out_w:
        raise GraphError(
            node.name,
            _op_name(node),
            f"adaptive pooling {height}x{width} -> {out_h}x{out_w} has windows "
            "of unequal sizes; only output sizes that divide the input's are supported",
        )
    kernel = (height // out_h, width // out_w)
    return _pool(
        ctx,
        node,
        a,
        "avg_pool2d",
        kernel=kernel,
        strides=kernel,
        padding=(0, 0, 0, 0),
        ceil_mode=False,
        count_include_pad=True,
    )


# --- Reductions and softmax ---


def _reduce(
    ctx: _Context, node: torch.fx.Node, op: str, x: torch.fx.Node, dims: Sequence[int] | None, keepdim: bool
) -> Node:
    """The input is cast to the result's dtype first: PyTorch sums bools and int32 as int64, and a
    `dtype=` argument names another."""
    result = node.meta["val"]
    dtype = _dtype_name((result[0] if isinstance(result, tuple | list) else result).dtype)
    source = _as_dtype(ctx, node, ctx.tensor(x), dtype)
    return _reduce_node(ctx, node, op, source, _rank(x), dims, keepdim)


def _reduce_node(
    ctx: _Context, node: torch.fx.Node, op: str, x: Node, rank: int, dims: Sequence[int] | None, keepdim: bool
) -> Node:
    """Reducing every axis without keepdim gives a PyTorch scalar: keep the dims, then reshape to
    (1,), the graph's scalar shape."""
    axes = _axes(dims, rank)
    scalar = not keepdim and len(axes) == rank
    out = ctx.call(node, op, [x], axes=axes, keepdims=bool(keepdim) or scalar)
    return ctx.call(node, "reshape", [out], shape=(1,)) if scalar and rank > 1 else out


def _reduction(op: str) -> Converter:
    return lambda ctx, node, a: _reduce(ctx, node, op, a["input"], a["dim"], a["keepdim"])


_REDUCTIONS = {
    aten.sum.dim_IntList: "sum",
    aten.mean.dim: "mean",
    aten.amax.default: "max",
    aten.amin.default: "min",
}
for _aten_op, _graph_op in _REDUCTIONS.items():
    _CONVERTERS[_aten_op] = _reduction(_graph_op)


@_converts(aten.any.default, aten.any.dim, aten.any.dims, aten.all.default, aten.all.dim, aten.all.dims)
def _any_all(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """The max (any) or min (all) of the input as bools."""
    op = "max" if node.target in (aten.any.default, aten.any.dim, aten.any.dims) else "min"
    dims = a.get("dim")
    dims = [dims] if isinstance(dims, int) else dims
    return _reduce(ctx, node, op, a["input"], dims, bool(a.get("keepdim", False)))


@_converts(aten.max.dim, aten.min.dim)
def _max_min_dim(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> tuple[Node, ...]:
    """`x.max(dim)`: the values and the position of each (the first, as PyTorch's CPU kernel)."""
    is_max = node.target is aten.max.dim
    values = _reduce(ctx, node, "max" if is_max else "min", a["input"], [a["dim"]], a["keepdim"])
    return values, _arg(ctx, node, "argmax" if is_max else "argmin", a["input"], a["dim"], a["keepdim"])


@_converts(aten.argmax.default, aten.argmin.default)
def _argmax_argmin(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    op = "argmax" if node.target is aten.argmax.default else "argmin"
    return _arg(ctx, node, op, a["input"], a.get("dim"), bool(a.get("keepdim", False)))


def _arg(
    ctx: _Context, node: torch.fx.Node, op: str, x: torch.fx.Node, dim: int | None, keepdim: bool
) -> Node:
    """The first position of the extreme along `dim`, or in the flattened tensor when `dim` is None."""
    source = ctx.tensor(x)
    if dim is not None:
        axis = _axis(dim, _rank(x))
        return ctx.call(node, op, [source], axis=axis, keepdims=bool(keepdim), select_last_index=False)
    flat = ctx.call(node, "reshape", [source], shape=(source.type.size,))
    out = ctx.call(node, op, [flat], axis=0, keepdims=False, select_last_index=False)
    shape = (1,) * _rank(x) if keepdim else (1,)
    return out if shape == (1,) else ctx.call(node, "reshape", [out], shape=shape)


@_converts(aten.linalg_vector_norm.default)
def _vector_norm(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """The 1-, 2- and max-norms (and the min of |x| for -inf), as sums and maxima of |x| or x^2."""
    order, x = float(a["ord"]), a["input"]
    dims, keepdim = a.get("dim"), bool(a.get("keepdim", False))
    if a.get("dtype") is not None:
        raise GraphError(node.name, _op_name(node), "a dtype= argument is not supported")
    source = ctx.tensor(x)
    if order == 2:
        squares = ctx.call(node, "multiply", [source, source])
        return ctx.call(node, "sqrt", [_reduce_node(ctx, node, "sum", squares, _rank(x), dims, keepdim)])
    if order not in (1, math.inf, -math.inf):
        raise GraphError(node.name, _op_name(node), f"ord={order} is not supported (1, 2, inf, -inf are)")
    op = "sum" if order == 1 else "max" if order > 0 else "min"
    return _reduce_node(ctx, node, op, ctx.call(node, "abs", [source]), _rank(x), dims, keepdim)


@_converts(aten.var.correction, aten.std.correction)
def _variance(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """sum((x - mean)^2) / (n - correction) over the dims (all of them when none); std is its root.
    With n <= correction the division gives inf or NaN, as in PyTorch."""
    x, rank = a["input"], _rank(a["input"])
    axes = _axes(a.get("dim"), rank)
    _, deviations = normalize.centered(ctx.builder, node.name, ctx.tensor(x), axes)
    squares = normalize.squares(ctx.builder, node.name, deviations)
    total = _reduce_node(ctx, node, "sum", squares, rank, axes, bool(a.get("keepdim", False)))
    correction = 1 if a.get("correction") is None else a["correction"]
    count = math.prod(_shape(x)[d] for d in axes) - correction
    out = ctx.call(node, "divide", [total, ctx.constant(f"{node.name}_count", max(count, 0), _dtype(node))])
    return ctx.call(node, "sqrt", [out]) if node.target is aten.std.correction else out


def _per_channel(ctx: _Context, node: torch.fx.Node, x: Node, a: dict[str, Any]) -> Node:
    """x * weight + bias, each (C,) along the channel axis 1 (either may be None)."""
    weight, bias = (None if a[k] is None else ctx.tensor(a[k]) for k in ("weight", "bias"))
    return normalize.affine(ctx.builder, node.name, x, weight, bias, 1)


@_converts(aten.native_group_norm.default)
def _group_norm(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> tuple[Node, ...]:
    """Each sample's channels in `group` groups, normalized over the group's channels and positions."""
    x = ctx.tensor(a["input"])
    shape, groups = x.type.shape, int(a["group"])
    grouped = ctx.call(node, "reshape", [x], shape=(shape[0], groups, math.prod(shape[1:]) // groups))
    flat = normalize.normalized(ctx.builder, node.name, grouped, (2,), float(a["eps"]))
    return (_per_channel(ctx, node, ctx.call(node, "reshape", [flat], shape=shape), a),)


@_converts(aten._native_batch_norm_legit.no_stats)
def _batch_statistics_norm(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> tuple[Node, ...]:
    """Batch norm over the batch's own statistics, which is how PyTorch decomposes instance norm (its
    input reshaped so that each sample's channel is a channel): every axis but 1 is normalized."""
    x = ctx.tensor(a["input"])
    axes = tuple(d for d in range(len(x.type.shape)) if d != 1)
    return (
        _per_channel(ctx, node, normalize.normalized(ctx.builder, node.name, x, axes, float(a["eps"])), a),
    )


@_converts(aten.cumsum.default)
def _cumsum(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """In the result's dtype: PyTorch sums bools and int32 as int64, or as `dtype=` says."""
    x = _as_dtype(ctx, node, ctx.tensor(a["input"]), _dtype(node))
    axis = _axis(a["dim"], max(_rank(a["input"]), 1))
    return ctx.call(node, "cumsum", [x], axis=axis, exclusive=False, reverse=False)


@_converts(aten._softmax.default)
def _softmax(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    axis = _axis(a["dim"], _rank(a["input"]))
    return ctx.call(node, "softmax", [ctx.tensor(a["input"])], axis=axis)


@_converts(aten._log_softmax.default)
def _log_softmax(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    axis = _axis(a["dim"], _rank(a["input"]))
    return ctx.call(node, "log_softmax", [ctx.tensor(a["input"])], axis=axis)


# --- Shapes and data movement ---


@_converts(aten.view.default, aten.squeeze.dims, aten.unsqueeze.default)
def _view(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """The output shape is static and fully known: no -1 to resolve, no axes to interpret."""
    return _reshape(ctx, node, ctx.tensor(a["input"]))


@_converts(aten.permute.default)
def _permute(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    rank = _rank(a["input"])
    return ctx.call(
        node, "transpose", [ctx.tensor(a["input"])], axes=tuple(_axis(d, rank) for d in a["dims"])
    )


@_converts(aten.expand.default)
def _expand(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    x = ctx.tensor(a["input"])
    return x if x.type.shape == _shape(node) else ctx.call(node, "broadcast_to", [x], shape=_shape(node))


@_converts(aten.cat.default)
def _cat(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """Empty operands add nothing (a key/value cache's first step concatenates onto one, often of
    shape (0,), which ATen accepts beside any shape)."""
    axis = _axis(a["dim"], _rank(node))
    tensors = [ctx.tensor(t) for t in a["tensors"] if math.prod(_shape(t)) > 0]
    if len(tensors) == 1:
        return tensors[0]
    return ctx.call(node, "concat", tensors, axis=axis)


@_converts(aten.slice.Tensor)
def _slice_tensor(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    x = ctx.tensor(a["input"])
    axis = _axis(a["dim"], _rank(a["input"]))
    # Python's slice rules are ATen's: None ends, negative indices, ends clamped to the size.
    begin, end, step = slice(a["start"], a["end"], a["step"]).indices(x.type.shape[axis])
    return _slice(ctx, node, x, axis, begin, end, step)


@_converts(aten.select.int)
def _select(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    x = ctx.tensor(a["input"])
    axis = _axis(a["dim"], _rank(a["input"]))
    index = a["index"] % x.type.shape[axis]
    return _reshape(ctx, node, _slice(ctx, node, x, axis, index, index + 1, 1))


@_converts(aten.split_with_sizes.default)
def _split(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> tuple[Node, ...]:
    x = ctx.tensor(a["input"])
    axis = _axis(a["dim"], _rank(a["input"]))
    bounds = np.cumsum([0, *a["split_sizes"]]).tolist()
    return tuple(_slice(ctx, node, x, axis, b, e, 1) for b, e in itertools.pairwise(bounds))


@_converts(aten.constant_pad_nd.default)
def _constant_pad(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """ATen lists (before, after) pairs from the last axis backwards; the catalog wants all befores,
    then all afters, for every axis."""
    rank = _rank(a["input"])
    befores, afters = [0] * rank, [0] * rank
    for i, (before, after) in enumerate(zip(a["pad"][::2], a["pad"][1::2])):
        befores[rank - 1 - i], afters[rank - 1 - i] = before, after
    if min(befores + afters) < 0:
        raise GraphError(node.name, _op_name(node), "negative padding (cropping) is not supported")
    return ctx.call(
        node, "pad", [ctx.tensor(a["input"])], pads=tuple(befores + afters), value=float(a["value"])
    )


@_converts(aten.clone.default, aten.alias.default)
def _identity(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """Copies and aliases are the same value in a graph that never writes its tensors."""
    return ctx.tensor(a["input"])


@_converts(aten._to_copy.default)
def _to_copy(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """A copy, maybe to another device or layout (no matter here) or dtype (a cast)."""
    return _as_dtype(ctx, node, ctx.tensor(a["input"]), _dtype(node))


def _as_dtype(ctx: _Context, node: torch.fx.Node, x: Node, dtype: str) -> Node:
    """`x` as `dtype`: itself, a converted constant, or a cast (`compiler.dtypes.convert`)."""
    if x.type.dtype == dtype:
        return x
    if isinstance(x, Constant):
        return ctx.builder.constant(f"{x.name}_{dtype}", convert(x.data, dtype))
    return ctx.call(node, "cast", [x], dtype=dtype)


@_converts(aten.embedding.default)
def _embedding(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """padding_idx only changes the gradient."""
    return ctx.call(node, "take", [ctx.tensor(a["weight"]), ctx.tensor(a["indices"])], axis=0)


@_converts(aten.index_select.default)
def _index_select(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    axis = _axis(a["dim"], _rank(a["input"]))
    return ctx.call(node, "take", [ctx.tensor(a["input"]), ctx.tensor(a["index"])], axis=axis)


@_converts(aten.gather.default)
def _gather(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    axis = _axis(a["dim"], _rank(a["input"]))
    return ctx.call(node, "gather_elements", [ctx.tensor(a["input"]), ctx.tensor(a["index"])], axis=axis)


@_converts(aten.index.Tensor)
def _index(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """`x[i, j]` and `x[:, i]`: integer index tensors on consecutive axes, broadcast together (a
    bool mask's result has a data-dependent shape, refused by the checks). Index tensors apart
    (numpy moves their axes first) are refused."""
    indices = list(a["indices"])
    axis = next(k for k, i in enumerate(indices) if i is not None)
    taken = indices[axis:]
    while taken and taken[-1] is None:
        taken.pop()
    if any(i is None for i in taken):
        raise GraphError(node.name, _op_name(node), "index tensors on axes that are not consecutive")
    args = [ctx.tensor(a["input"]), *(ctx.tensor(i) for i in taken)]
    return ctx.call(node, "gather_nd", args, axis=axis)


# --- Matrix products ---


@_converts(aten.mm.default, aten.bmm.default)
def _matmul(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    return ctx.call(node, "matmul", [ctx.tensor(a["input"]), ctx.tensor(a["mat2"])])


@_converts(aten.addmm.default)
def _addmm(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    """`beta * input + alpha * (mat1 @ mat2)`: Linear's bias add after its matmul."""
    dtype = _dtype(node)
    product = ctx.call(node, "matmul", [ctx.tensor(a["mat1"]), ctx.tensor(a["mat2"])])
    if a["alpha"] != 1:
        product = ctx.call(node, "multiply", [product, ctx.constant(f"{node.name}_alpha", a["alpha"], dtype)])
    if a["beta"] == 0:
        return product
    bias = ctx.tensor(a["input"])
    if a["beta"] != 1:
        bias = ctx.call(node, "multiply", [bias, ctx.constant(f"{node.name}_beta", a["beta"], dtype)])
    return ctx.call(node, "add", [product, bias])


# --- Constants created in forward ---


@_converts(aten.full.default)
def _full(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    return ctx.constant(node.name, np.full(_shape(node), a["fill_value"]), _dtype(node))


@_converts(aten.scalar_tensor.default)
def _scalar_tensor(ctx: _Context, node: torch.fx.Node, a: dict[str, Any]) -> Node:
    return ctx.constant(node.name, a["s"], _dtype(node))
