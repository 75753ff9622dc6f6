"""Model import: an ONNX file or a PyTorch module becomes a graph module (`compiler.graph.Module`);
`load` reads a model file (or its bytes) in any format we take, for the `tuner` command and the
coordinator alike.

The frontends need optional packages (onnx, torch: the `models` extra), so each is imported only when
called: `import compiler.frontend` works without them, and a call without its package says which one
to install.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    import onnx
    import torch
    from torch.export import ExportedProgram

    from compiler.frontend.torch_dims import DynamicShapes
    from compiler.graph import Module, ShapeFamily, ValueFamily
    from compiler.graph.shape_family import DimSpec

# Refuse a model before reading it into memory, whoever supplied it (the service accepts uploads).
DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_MAX_NODES = 100_000


class FrontendError(ValueError):
    """A model that cannot be read at all: not a model, malformed, too big, an unsupported opset.
    What the graph level cannot represent (an operator, a dynamic shape) is a GraphError instead."""


def from_onnx(
    model: str | os.PathLike[str] | bytes | onnx.ModelProto,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_nodes: int = DEFAULT_MAX_NODES,
    dims: Mapping[str, DimSpec] | None = None,
) -> Module | ShapeFamily | ValueFamily:
    """The graph module of an ONNX model (a path, its bytes, or a ModelProto), or its shape family
    when `dims` gives a dimension a range, or its value family when inputs set shapes by their
    values; see `compiler.frontend.onnx.from_onnx`."""
    from compiler.frontend.onnx import from_onnx as convert

    return convert(model, max_bytes=max_bytes, max_nodes=max_nodes, dims=dims)


def from_torch(
    model: torch.nn.Module | ExportedProgram,
    example_args: tuple[torch.Tensor, ...] | None = None,
    *,
    dynamic_shapes: DynamicShapes = None,
) -> Module | ShapeFamily:
    """The graph module of a PyTorch module (with example inputs) or of an exported program, or its
    shape family when a dimension is dynamic (torch.export's `dynamic_shapes`, or an exported program
    with dynamic dimensions); see `compiler.frontend.torch.from_torch`."""
    from compiler.frontend.torch import from_torch as convert

    return convert(model, example_args, dynamic_shapes=dynamic_shapes)


# How a model comes: an ONNX model, the graph's JSON form (compiler/graph/serialize.py), or a program
# saved by torch.export.save.
SOURCE_FORMATS = ("onnx", "graph", "pt2")
_SUFFIXES = {".json": "graph", ".pt2": "pt2"}


def load(
    source: str | os.PathLike[str] | bytes,
    source_format: str | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_nodes: int = DEFAULT_MAX_NODES,
    dims: Mapping[str, DimSpec] | None = None,
) -> Module | ShapeFamily | ValueFamily:
    """The graph module of a model file (a path) or its bytes, in `source_format` (one of
    SOURCE_FORMATS; by default the path's suffix says: .json a graph, .pt2 an exported program, else
    ONNX). A .pt2 program is read from a path only, without unpickling anything (`pt2.py`).

    `dims` sizes or ranges the dimensions the model leaves open (ONNX's named or unknown input
    dimensions; a program's dynamic ones, which it fixes or narrows); with a range left, the result is
    the model's ShapeFamily. An ONNX model whose inputs set shapes by their values is a ValueFamily."""
    if source_format is None:
        if isinstance(source, bytes):
            raise FrontendError(
                "the bytes of a model need their format named: one of " + ", ".join(SOURCE_FORMATS)
            )
        source_format = _SUFFIXES.get(Path(source).suffix, "onnx")
    if source_format == "onnx":
        return from_onnx(source, max_bytes=max_bytes, max_nodes=max_nodes, dims=dims)
    if source_format == "graph":
        if dims:
            raise FrontendError("a graph's shapes are static: dims apply to ONNX and .pt2 models")
        return _from_graph_json(source, max_bytes, max_nodes)
    if source_format == "pt2" and not isinstance(source, bytes):
        from compiler.frontend.pt2 import load_exported_program

        model = from_torch(load_exported_program(source))
        return _narrowed(model, dims) if dims else model
    raise FrontendError(
        f"cannot read a model as {source_format!r}: the formats are {', '.join(SOURCE_FORMATS)}"
    )


def require_static(model: Module | ShapeFamily | ValueFamily, user: str) -> Module:
    """The module of a model with static shapes; a FrontendError naming the ranged dimensions of a
    shape family, or the inputs of a value family whose values set shapes, which `user` (what takes
    the model) cannot take."""
    from compiler.graph import ShapeFamily, ValueFamily

    if isinstance(model, ShapeFamily):
        raise FrontendError(
            f"{user} takes a model of static shapes; this one has dimensions given a range "
            f"({', '.join(map(str, model.dims))}): give each a size"
        )
    if isinstance(model, ValueFamily):
        names = ", ".join(map(repr, model.value_inputs))
        raise FrontendError(
            f"{user} takes a model of static shapes; in this one the values of inputs {names} set "
            "shapes (as Resize's scales or a Reduce's axes): make them constants of the model, or "
            "import it in Python and take ValueFamily.specialize({...}) at their values"
        )
    return model


def _narrowed(model: Module | ShapeFamily, dims: Mapping[str, DimSpec]) -> Module | ShapeFamily:
    from compiler.graph import ShapeFamily

    if not isinstance(model, ShapeFamily):
        raise FrontendError(f"the program's shapes are static: it has no dimension {sorted(dims)}")
    ranges = {k: v for k, v in dims.items() if not isinstance(v, str)}
    if len(ranges) < len(dims):
        raise FrontendError("a program's dimensions are the same by torch.export's own record: no aliases")
    return model.narrowed(ranges)


def _from_graph_json(source: str | os.PathLike[str] | bytes, max_bytes: int, max_nodes: int) -> Module:
    from compiler.graph.serialize import module_from_json

    size = len(source) if isinstance(source, bytes) else os.path.getsize(source)
    if size > max_bytes:
        raise FrontendError(f"the graph is {size} bytes, more than max_bytes={max_bytes}")
    text = source if isinstance(source, bytes) else Path(source).read_bytes()
    try:
        data = json.loads(text)
    except ValueError as e:
        raise FrontendError(f"the graph is not JSON: {e}") from None
    return module_from_json(data, max_nodes=max_nodes)


__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_NODES",
    "SOURCE_FORMATS",
    "FrontendError",
    "from_onnx",
    "from_torch",
    "load",
    "require_static",
]
