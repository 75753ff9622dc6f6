"""A PyTorch model with dynamic dimensions (torch.export's `dynamic_shapes`, or a program exported
with them) as a shape family: its inputs' ranged dimensions, and the static module at any sizes in
range.

torch.export checks the model once for every size in the declared ranges (a model whose code needs a
size it cannot take fails here, with torch's reason) and records each range. A binding of sizes is
then imported by exporting the program again at those sizes, from its own module (fake inputs: no
values are computed), which takes tens of milliseconds and gives what the static frontend takes.
A dimension is named by its `torch.export.Dim`, else as "input:axis" where it first occurs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind
from torch.utils._sympy.numbers import int_oo

from compiler.graph.ir import GraphError, Module
from compiler.graph.shape_family import DimRange, InputSignature, ShapeFamily, Size

# torch.export's `dynamic_shapes` argument: per input, None, {axis: Dim} or a Dim (or None) per axis.
DynamicShapes = dict[str, Any] | tuple[Any, ...] | list[Any] | None


def has_dynamic_inputs(program: ExportedProgram) -> bool:
    return any(not isinstance(d, int) for _, value in _user_inputs(program) for d in value.shape)


def shape_family(
    model: torch.nn.Module | ExportedProgram,
    example_args: tuple[torch.Tensor, ...] | None,
    dynamic_shapes: DynamicShapes,
    convert: Callable[[ExportedProgram], Module],
) -> ShapeFamily:
    """The family of `model` exported with `dynamic_shapes` (or of a program exported so);
    `convert` imports a static program."""
    names: dict[object, str] = {}
    if isinstance(model, ExportedProgram):
        if dynamic_shapes is not None:
            raise TypeError("dynamic_shapes goes with a torch.nn.Module: a program has its own")
        program = model
    else:
        args = tuple(example_args or ())
        program = _export(model.eval(), args, dynamic_shapes)
        specs = _tensor_specs(model, args, dynamic_shapes)
        names = _dim_names(program, specs)
    inputs: list[InputSignature] = []
    dims: dict[str, DimRange] = {}
    for node, value in _user_inputs(program):
        shape: list[Size] = []
        for axis, size in enumerate(value.shape):
            if isinstance(size, int):
                shape.append(size)
                continue
            symbol = _symbol(node.name, axis, size)
            name = names.get(symbol, f"{node.name}:{axis}")
            names.setdefault(symbol, name)
            dims.setdefault(name, _range(program, symbol, name))
            shape.append(name)
        inputs.append(InputSignature(node.name, tuple(shape), _dtype(value)))

    module = program.module()
    dtypes = [value.dtype for _, value in _user_inputs(program)]

    def at(values: Mapping[str, int]) -> Module:
        args = [
            torch.zeros([values[d] if isinstance(d, str) else d for d in sig.shape], dtype=dtype)
            for sig, dtype in zip(inputs, dtypes)
        ]
        return convert(_export(module, tuple(args), None))

    return ShapeFamily(tuple(inputs), tuple(dims.values()), at)


def _export(
    model: torch.nn.Module, args: tuple[torch.Tensor, ...], dynamic_shapes: DynamicShapes
) -> ExportedProgram:
    """The program of `model` (in eval mode already: an exported program's module cannot switch)."""
    try:
        return torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    except Exception as e:  # torch raises many types here; each means "this model cannot be captured"
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise GraphError(type(model).__name__, "torch.export", f"cannot export the model: {reason}") from e


def _user_inputs(program: ExportedProgram) -> list[tuple[torch.fx.Node, torch.Tensor]]:
    users = {s.arg.name for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
    out = []
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in users:
            value = node.meta.get("val")
            if not isinstance(value, torch.Tensor):
                raise GraphError(node.name, "input", "a model input must be a tensor")
            out.append((node, value))
    return out


def _symbol(input_name: str, axis: int, size: object) -> object:
    """The sympy symbol a dynamic dimension is; a size derived from others (2 * seq) is refused."""
    expr = size.node.expr if isinstance(size, torch.SymInt) else None
    if expr is None or not expr.is_Symbol:
        raise GraphError(
            input_name,
            "input",
            f"dimension {axis} is {size}, derived from other dimensions: "
            "give each input dimension its own Dim (or a static size)",
        )
    return expr


def _range(program: ExportedProgram, symbol: object, name: str) -> DimRange:
    bounds = program.range_constraints.get(symbol)
    if bounds is None or bounds.upper is int_oo or not bounds.upper.is_integer:
        raise GraphError(
            name,
            "input",
            f"dimension {name!r} has no largest size: give it one, as torch.export.Dim({name!r}, min=1, "
            "max=512) (a model's sizes are checked against a declared range)",
        )
    return DimRange(name, max(1, int(bounds.lower)), int(bounds.upper))


def _tensor_specs(
    model: torch.nn.Module, args: tuple[object, ...], dynamic_shapes: DynamicShapes
) -> list[Any]:
    """Each input tensor's entry of `dynamic_shapes`, in the order torch flattens the inputs: the
    entries follow forward's parameters (by position, or by name in a dict), then the structure of
    each argument (a tuple for *args, a list or a dict of tensors)."""
    params = list(inspect.signature(model.forward).bind(*args).arguments.items())
    if isinstance(dynamic_shapes, Mapping):
        tops = [dynamic_shapes.get(name) for name, _ in params]
    else:
        tops = list(dynamic_shapes or ())
    out: list[Any] = []
    for (_, value), spec in zip(params, tops):
        _walk(value, spec, out)
    return out


def _walk(value: object, spec: object, out: list[Any]) -> None:
    if isinstance(value, torch.Tensor):
        out.append(spec)
    elif isinstance(value, (tuple, list)):
        entries = list(spec) if isinstance(spec, (tuple, list)) else [None] * len(value)
        for item, entry in zip(value, entries):
            _walk(item, entry, out)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, spec.get(key) if isinstance(spec, Mapping) else None, out)


def _dim_names(program: ExportedProgram, specs: Sequence[Any]) -> dict[object, str]:
    """Each dynamic dimension's symbol -> the name of the torch.export.Dim the user gave it."""
    names: dict[object, str] = {}
    for (node, value), spec in zip(_user_inputs(program), specs):
        axes = spec.items() if isinstance(spec, Mapping) else enumerate(spec or ())
        for axis, dim in axes:
            size = value.shape[axis]
            name = getattr(dim, "__name__", None)
            if isinstance(size, torch.SymInt) and isinstance(name, str):
                names.setdefault(_symbol(node.name, axis, size), name)
    return names


def _dtype(value: torch.Tensor) -> str:
    return str(value.dtype).removeprefix("torch.")


__all__ = ["has_dynamic_inputs", "shape_family"]
