"""An ONNX model's input dimensions that have no size: named ones (`dim_param`, "batch_size",
"sequence_length", as exporters write them) and unnamed unknown ones, each given a size or a range by
the user (`from_onnx(path, dims={"sequence_length": (1, 512), "batch_size": 1})`).

A dimension is keyed by its name, or by "input:axis" when it has none. Sizes are set in the model's
own shape fields (inputs, outputs and recorded intermediate shapes alike) before the importer reads
it, so that ONNX's shape inference and the importer see a static model: a range gives a
`ShapeFamily`, importing the model again at each binding it is asked for.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import onnx

from compiler.build import ShapeError
from compiler.frontend import FrontendError
from compiler.graph.ir import GraphError, Module
from compiler.graph.shape_family import DimRange, DimSpec, InputSignature, ShapeFamily, Size, dim_bounds
from compiler.graph.value_family import ValueFamily

# The largest size a dimension may be given (ONNX stores sizes as int64; no tensor is larger).
MAX_SIZE = 2**31


@dataclass(frozen=True)
class OpenDim:
    """An input dimension without a size, keyed by its name (or "input:axis"), where it first occurs."""

    key: str
    input: str
    axis: int


def import_with_dims(
    proto: onnx.ModelProto,
    dims: Mapping[str, DimSpec],
    importer: Callable[[onnx.ModelProto], Module | ValueFamily],
) -> Module | ShapeFamily | ValueFamily:
    """The module (every dimension sized) or the shape family (some given a range) of `proto`; a
    model whose input values set shapes is a value family, which takes no ranges (each binding of
    the sizes would be a family of its own)."""
    unsized = open_dims(proto)
    keys = {u.key: u for u in unsized}
    unknown = sorted(set(dims) - set(keys))
    if unknown:
        have = ", ".join(f"{k!r} (input {u.input!r}, dimension {u.axis})" for k, u in keys.items())
        raise DimsError(
            f"dims names {unknown}, which no input dimension is; the model's dimensions without a size "
            f"are: {have or 'none'}"
        )
    for u in unsized:
        if u.key not in dims:
            raise unsized_error(u.input, u.axis, u.key)
    if not dims:
        return importer(proto)
    given = _Given.of(dims)
    template = onnx.ModelProto()
    template.CopyFrom(proto)

    lock = threading.Lock()  # one binding at a time writes its sizes into the one template

    def at(values: Mapping[str, int]) -> Module | ValueFamily:
        with lock, _sized(template, given.every_size(values)):
            return importer(template)

    if not given.ranges:
        return at({})

    def ranged(values: Mapping[str, int]) -> Module:
        module = at(values)
        if isinstance(module, ValueFamily):
            raise GraphError(
                module.value_inputs[0],
                "input",
                f"the values of inputs {list(module.value_inputs)} set shapes, which a model with ranged "
                "dimensions cannot take: give every dimension a size",
            )
        return module

    names = {**{k: k for k in given.sizes}, **{r.name: r.name for r in given.ranges}, **given.aliases}
    return ShapeFamily(input_signatures(proto, given.sizes, names), given.ranges, ranged)


@dataclass(frozen=True)
class _Given:
    """What `dims` gives, checked: sizes, ranges, and aliases (a dimension given as another's
    name, the same size: "attention_mask:1": "sequence")."""

    sizes: dict[str, int]
    ranges: tuple[DimRange, ...]
    aliases: dict[str, str]

    @staticmethod
    def of(dims: Mapping[str, DimSpec]) -> _Given:
        aliases = {k: v for k, v in dims.items() if isinstance(v, str)}
        for key, target in aliases.items():
            if target not in dims or isinstance(dims[target], str):
                raise DimsError(
                    f"dims[{key!r}] is {target!r}, which is not a dimension given a size or a range in dims"
                )
        sizes: dict[str, int] = {}
        ranges: list[DimRange] = []
        for key, spec in dims.items():
            if key not in aliases:
                low, high = _parse(key, spec)
                if low == high:
                    sizes[key] = low
                else:
                    ranges.append(DimRange(key, low, high))
        return _Given(sizes, tuple(ranges), aliases)

    def every_size(self, values: Mapping[str, int]) -> dict[str, int]:
        """Every key's size, the ranges' from `values`."""
        known = {**self.sizes, **values}
        return {**known, **{k: known[v] for k, v in self.aliases.items()}}


class DimsError(FrontendError):
    """Dims that do not fit the model: an unknown name, a missing dimension, a bad size or range."""


def sized_onnx(model: bytes, dims: Mapping[str, int | str], *, max_bytes: int, max_nodes: int) -> bytes:
    """The model's bytes with its open input dimensions sized as `dims` says (sizes, or names of
    other dimensions; every open dimension given): a static model that stays one when stored."""
    from compiler.frontend.onnx import load_checked

    proto = load_checked(model, max_bytes, max_nodes)
    keys = {d.key for d in open_dims(proto)}
    ranges = sorted(k for k, v in dims.items() if not isinstance(v, (int, str)))
    if ranges:
        raise DimsError(f"dims {ranges}: give sizes here, not ranges")
    unknown = sorted(set(dims) - keys)
    if unknown or keys - set(dims):
        missing = sorted(keys - set(dims))
        raise DimsError(
            f"dims: the model's open dimensions are {sorted(keys)}"
            + (f"; unknown: {unknown}" if unknown else "")
            + (f"; not given: {missing}" if missing else "")
        )
    with _sized(proto, _Given.of(dims).every_size({})):
        return proto.SerializeToString()


def unsized_error(input_name: str, axis: int, key: str) -> GraphError:
    size = "unknown (it has no name)" if key.startswith(f"{input_name}:") else repr(key)
    return GraphError(
        input_name,
        "input",
        f"dimension {axis} is {size}: give it a range or a size, as from_onnx(..., dims={{{key!r}: "
        f"(1, 512)}}) or dims={{{key!r}: 128}}, or on the command line --dim {key}=1..512",
    )


def _parse(key: str, spec: object) -> tuple[int, int]:
    try:
        low, high = dim_bounds(f"dims[{key!r}]", spec)
    except ShapeError as e:
        raise DimsError(str(e)) from None
    if not 0 <= low <= high <= MAX_SIZE:
        raise DimsError(f"dims[{key!r}] is {spec!r}: sizes are 0 to {MAX_SIZE}, and min <= max")
    return low, high


def _user_inputs(proto: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    weights = {t.name for t in proto.graph.initializer}
    return [i for i in proto.graph.input if i.name not in weights]


def _key(info: onnx.ValueInfoProto, axis: int, dim: onnx.TensorShapeProto.Dimension) -> str | None:
    """The dimension's key if it has no size, else None."""
    if _sized_dim(dim):
        return None
    return dim.dim_param if dim.HasField("dim_param") and dim.dim_param else f"{info.name}:{axis}"


def _shape(info: onnx.ValueInfoProto) -> list[onnx.TensorShapeProto.Dimension]:
    kind = info.type
    if not kind.HasField("tensor_type") or not kind.tensor_type.HasField("shape"):
        return []
    return list(kind.tensor_type.shape.dim)


def open_dims(proto: onnx.ModelProto) -> list[OpenDim]:
    """The model's input dimensions without a size, each key once."""
    out: dict[str, OpenDim] = {}
    for info in _user_inputs(proto):
        for axis, dim in enumerate(_shape(info)):
            key = _key(info, axis, dim)
            if key is not None and key not in out:
                out[key] = OpenDim(key, info.name, axis)
    return list(out.values())


def input_signatures(
    proto: onnx.ModelProto, sizes: Mapping[str, int] | None = None, names: Mapping[str, str] | None = None
) -> tuple[InputSignature, ...]:
    """Each input's shape: its static sizes and those given, the others by their range's name (a
    model without open dimensions needs neither)."""
    sizes, names = sizes or {}, names or {}
    from onnx import helper

    out = []
    for info in _user_inputs(proto):
        shape: list[Size] = []
        for axis, dim in enumerate(_shape(info)):
            key = _key(info, axis, dim)
            if key is None:
                shape.append(dim.dim_value)
            else:
                name = names[key]
                shape.append(sizes.get(name, name))
        dtype = str(helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type))
        out.append(InputSignature(info.name, tuple(shape), dtype))
    return tuple(out)


@contextlib.contextmanager
def _sized(proto: onnx.ModelProto, sizes: Mapping[str, int]) -> Iterator[None]:
    """The model with these sizes written into its shapes, restored afterwards, whatever happens
    (a write that fails part-way included: the next binding must find the model as it was)."""
    graph = proto.graph
    inputs = {i.name for i in _user_inputs(proto)}
    changed: list[tuple[onnx.TensorShapeProto.Dimension, str | None, int | None]] = []
    try:
        for info in [*graph.input, *graph.output, *graph.value_info]:
            for axis, dim in enumerate(_shape(info)):
                if _sized_dim(dim):
                    continue
                named = dim.dim_param if dim.HasField("dim_param") and dim.dim_param else None
                key = named or (f"{info.name}:{axis}" if info.name in inputs else None)
                if key is not None and key in sizes:
                    changed.append((dim, named, dim.dim_value if dim.HasField("dim_value") else None))
                    dim.dim_value = sizes[key]
        yield
    finally:
        for dim, named, value in changed:
            if named is not None:
                dim.dim_param = named
            elif value is not None:
                dim.dim_value = value
            else:
                dim.ClearField("dim_value")


def _sized_dim(dim: onnx.TensorShapeProto.Dimension) -> bool:
    """Whether a dimension has a size: 0 included (an empty tensor); a negative one is open, as
    some exporters write -1 for a dimension they leave to the caller."""
    return dim.HasField("dim_value") and dim.dim_value >= 0


__all__ = [
    "MAX_SIZE",
    "DimsError",
    "OpenDim",
    "import_with_dims",
    "input_signatures",
    "open_dims",
    "sized_onnx",
    "unsized_error",
]
