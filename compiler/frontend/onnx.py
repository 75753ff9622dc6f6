"""Import an ONNX model (opsets 13 to 28; older ones converted up to 13 by ONNX's version converter)
into a graph module, one converter per ONNX operator, or the operator's ONNX function body where it
has one and no converter (`onnx_functions`).

Every input shape is static, so the shape computations exporters emit (Shape, Gather, Unsqueeze,
Concat feeding a Reshape; Equal, Where and Trilu building masks) are compile-time constants: the
importer computes them while it converts (numpy twins for the common shape operators, ONNX's
reference implementation for any other), and only tensors that depend on the model's inputs become
graph calls. Weights stay constants of the graph; arithmetic on them is left to the
constant-folding pass.

Opsets 22 to 28 changed none of the converted operators for the dtypes the graph has (float32/64,
int32/64, bool): they added dtypes (bfloat16, float8, int4, ...), which the builder refuses, and
attributes that act on those only (Cast's round_mode, Range's stash_type). A pool's ceil_mode
window rule that opset 22 wrote down is the one the graph already computes.
"""

from __future__ import annotations

import math
import os
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, TypeAlias

import numpy as np

try:
    import onnx
    import onnx.version_converter
    from google.protobuf.descriptor import FieldDescriptor
    from google.protobuf.message import DecodeError, Message
    from onnx import helper, numpy_helper
except ImportError as e:  # pragma: no cover - the models extra is installed wherever tests run
    raise ImportError("from_onnx needs the onnx package: pip install 'tensor-tuner[models]'") from e

from compiler.dtypes import FLOAT_DTYPES, convert
from compiler.frontend import DEFAULT_MAX_BYTES, DEFAULT_MAX_NODES, FrontendError
from compiler.frontend.onnx_dims import import_with_dims, input_signatures, unsized_error
from compiler.frontend.onnx_functions import MAX_DEPTH, body_opset, function_body, instantiate
from compiler.frontend.onnx_reference import FoldError, fold_with_reference
from compiler.graph import Constant, GraphBuilder, GraphError, Module, Node, normalize
from compiler.graph.conv_transpose import conv_transpose2d
from compiler.graph.einsum import einsum
from compiler.graph.ir import DTYPES, EmptyTensorError
from compiler.graph.resize import COORDINATE_MODES, MODES, NEAREST_MODES, Crop, Filter, resize
from compiler.graph.shape_family import DimSpec, ShapeFamily
from compiler.graph.value_family import MAX_VALUE_ELEMENTS, InputValuesNeeded, ValueFamily

MIN_OPSET, MAX_OPSET = 13, 28

# A tensor while importing: a numpy array when it is known at compile time (weights, constants and
# everything computed from them and from shapes), else the graph node that computes it.
Value: TypeAlias = "np.ndarray | Node"


def from_onnx(
    model: str | os.PathLike[str] | bytes | onnx.ModelProto,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_nodes: int = DEFAULT_MAX_NODES,
    dims: Mapping[str, DimSpec] | None = None,
) -> Module | ShapeFamily | ValueFamily:
    """The graph module that computes what `model` (a path, its serialized bytes or a ModelProto)
    computes. A model that cannot be read is a FrontendError; one the graph level cannot represent
    (an unsupported operator or attribute) is a GraphError naming the node.

    An input dimension without a size (named, as "sequence_length", or unknown, keyed "input:axis")
    needs one in `dims`: a size, or a (min, max) range. With a range the result is a ShapeFamily, the
    model imported at each binding it is asked for (`compiler.frontend.onnx_dims`). A model some of
    whose small inputs set shapes by their values (scales, axes, a target shape) is a ValueFamily,
    imported at each value a call gives (`compiler.graph.value_family`)."""
    proto = _at_supported_opset(load_checked(model, max_bytes, max_nodes))
    opset = _check(proto)
    return import_with_dims(proto, dims or {}, lambda p: _import_with_values(p, opset))


def _import_with_values(proto: onnx.ModelProto, opset: int) -> Module | ValueFamily:
    """The module of a model of static shapes; when some of its inputs set shapes by their values
    (a Resize's scales, a Reduce's axes given as model inputs), its ValueFamily: the model imported
    again, with those inputs as initializers of the values a call gives."""
    try:
        return _Importer(proto, opset).run()
    except InputValuesNeeded as e:
        needed = e.inputs
    model = onnx.ModelProto()
    model.CopyFrom(proto)  # the caller's proto may change (onnx_dims writes its sizes into it)

    def at(values: Mapping[str, np.ndarray]) -> Module:
        bound = onnx.ModelProto()
        bound.CopyFrom(model)
        bound.graph.initializer.extend(numpy_helper.from_array(v, name) for name, v in values.items())
        return _Importer(bound, opset).run()

    return ValueFamily(input_signatures(model), needed, at)


def load_checked(
    model: str | os.PathLike[str] | bytes | onnx.ModelProto,
    max_bytes: int,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> onnx.ModelProto:
    """The model parsed, after the checks that come before reading any tensor (size, external data,
    node count)."""
    proto = _load(model, max_bytes)
    _check_container(proto, max_nodes)
    return proto


def _load(model: str | os.PathLike[str] | bytes | onnx.ModelProto, max_bytes: int) -> onnx.ModelProto:
    """Parse the model, refusing it by size first so that an oversized file is never read."""
    if isinstance(model, onnx.ModelProto):
        _check_size(model.ByteSize(), max_bytes)
        return model
    if isinstance(model, (str, os.PathLike)):
        _check_size(os.path.getsize(model), max_bytes)
        with open(model, "rb") as f:
            data = f.read()
    elif isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    else:
        raise TypeError(f"from_onnx takes a path, bytes or an onnx.ModelProto, not {type(model).__name__}")
    _check_size(len(data), max_bytes)
    try:
        return onnx.load_model_from_string(data)
    except DecodeError as e:
        raise FrontendError(f"not an ONNX model (truncated or not a ModelProto): {e}") from None


def _check_size(size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise FrontendError(f"the model is {size} bytes, more than max_bytes={max_bytes}")


def _check_container(model: onnx.ModelProto, max_nodes: int) -> None:
    """The checks before the onnx library reads any tensor: external data, size."""
    external = _external_tensor(model)
    if external is not None:
        # The message names the tensor only: neither the location it gives nor whether it exists.
        raise FrontendError(
            f"tensor {external.name!r} keeps its data in an external file: from_onnx reads a model's "
            "bytes only (save it with onnx.save_model(..., save_as_external_data=False))"
        )
    if len(model.graph.node) > max_nodes:
        raise FrontendError(f"the model has {len(model.graph.node)} nodes, more than max_nodes={max_nodes}")


def _opset(model: onnx.ModelProto) -> int:
    opsets = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not opsets:
        raise FrontendError("the model imports no ai.onnx opset")
    return opsets[0]


def _at_supported_opset(model: onnx.ModelProto) -> onnx.ModelProto:
    """A model older than opset 13 (the ONNX model zoo's, exporters before 2021) converted up with
    ONNX's own version converter, which rewrites every operator whose definition changed since."""
    opset = _opset(model)
    if opset >= MIN_OPSET:
        return model
    for i, node in enumerate(model.graph.node):
        if node.domain in ("", "ai.onnx") and not onnx.defs.has(node.op_type, opset):
            raise GraphError(
                _label(node, i),
                node.op_type,
                f"not an operator of opset {opset} (an experimental one, since removed), so the model "
                f"cannot be converted up to opset {MIN_OPSET}",
            )
    try:
        return onnx.version_converter.convert_version(model, MIN_OPSET)
    except Exception as e:  # the converter raises RuntimeError or its own C++ error types
        detail = str(e).split("failed: ", 1)[-1].strip() or type(e).__name__
        raise FrontendError(
            f"opset {opset} is older than {MIN_OPSET}, and ONNX's version converter cannot convert the "
            f"model: {detail}"
        ) from None


def _check(model: onnx.ModelProto) -> int:
    """The model's ai.onnx opset, after the checks that need no conversion: opset, operators (before
    the checker, so that it never walks a graph we would refuse), the ONNX checker."""
    graph = model.graph
    opset = _opset(model)
    if opset > MAX_OPSET:
        raise FrontendError(
            f"opset {opset} is not supported: from_onnx reads opsets {MIN_OPSET} to {MAX_OPSET} "
            f"(older ones are converted up to {MIN_OPSET})"
        )
    for i, node in enumerate(graph.node):
        refusal = _refusal(node, opset)
        if refusal is not None:
            op = f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
            raise GraphError(_label(node, i), op, refusal)
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        raise FrontendError(f"invalid ONNX model: {e}") from None
    return opset


def _refusal(node: onnx.NodeProto, opset: int) -> str | None:
    """Why `node` can never be imported, known before any conversion: an operator outside ai.onnx,
    one with subgraphs (control flow), or one ONNX does not define. Any other operator without a
    converter is folded when its inputs are known at import, and refused by name when not."""
    if node.domain not in ("", "ai.onnx"):
        return _unsupported()
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return "operators with subgraphs (control flow) are not supported"
    if node.op_type not in CONVERTERS and not onnx.defs.has(node.op_type, opset):
        return _unsupported()
    return None


def _unsupported() -> str:
    return f"unsupported operator; supported: {', '.join(sorted(CONVERTERS))}"


def _external_tensor(model: onnx.ModelProto) -> onnx.TensorProto | None:
    """The first tensor anywhere in the model that points at an external file, else None.

    The onnx library reads such a tensor's bytes from a path relative to the working directory
    wherever it meets one (the checker, shape inference, numpy_helper), and a tensor can hide in
    any attribute of any node, in subgraphs, sparse tensors, functions and training graphs. So every
    message of the model is visited, without recursion (a nesting thousands deep is legal protobuf)."""
    pending: list[Message] = [model]
    while pending:
        message = pending.pop()
        if isinstance(message, onnx.TensorProto):
            if message.data_location == onnx.TensorProto.EXTERNAL or len(message.external_data):
                return message
            continue
        for descriptor, value in message.ListFields():
            if descriptor.type != FieldDescriptor.TYPE_MESSAGE:
                continue
            if isinstance(value, Message):
                pending.append(value)
            else:
                pending.extend(value)
    return None


def _label(node: onnx.NodeProto, index: int) -> str:
    """How errors name a node: its name, else its first output, else its position."""
    return node.name or next((o for o in node.output if o), f"{node.op_type}#{index}")


def _inferred_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto.Tensor]:
    """The tensor types ONNX's shape inference gives the model's tensors. Their ranks are a
    cross-check of the conversion, and how rank-0 tensors (which the graph level holds as shape (1,))
    are told from rank-1 ones; their sizes say only whether a tensor is empty: they are not always
    ONNX Runtime's (a ceil_mode pool whose last window would start in the padding has one more
    column by ONNX's inference, not by the runtime or PyTorch)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as e:
        raise FrontendError(f"ONNX shape inference failed: {e}") from None
    return {
        info.name: info.type.tensor_type
        for info in [*inferred.graph.value_info, *inferred.graph.output]
        if info.type.tensor_type.HasField("shape")
    }


def _body_types(
    node: onnx.NodeProto,
    types: list[onnx.TypeProto],
    body: list[onnx.NodeProto],
    outputs: list[str],
    opset: int,
) -> dict[str, onnx.TypeProto.Tensor]:
    """The types of a function body's tensors, inferred on the body as a model of its own."""
    typed = {name: kind for name, kind in zip(node.input, types) if name}
    inputs = [helper.make_value_info(name, kind) for name, kind in typed.items()]
    graph = helper.make_graph(
        body, node.name or "body", inputs, [helper.make_value_info(o, onnx.TypeProto()) for o in outputs]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return _inferred_types(model)


class _Importer:
    """Converts the nodes in order, mapping every ONNX tensor name to its value."""

    def __init__(self, model: onnx.ModelProto, opset: int) -> None:
        self.graph = model.graph
        self.opset = opset
        self.builder = GraphBuilder()
        self.values: dict[str, Value] = {}
        self.constants: dict[str, Constant] = {}
        # DequantizeLinear outputs with their quantized inputs (`_Dequantized`), for MatMul.
        self.dequantized: dict[str, _Dequantized] = {}
        # Rank-0 tensors computed at run time, held as nodes of shape (1,).
        self.scalars: set[str] = set()
        self.inferred = _inferred_types(model)
        # For each tensor, the nodes that read it: (label, op_type, input position).
        self.consumers: dict[str, list[tuple[str, str, int]]] = {}
        for i, node in enumerate(self.graph.node):
            for k, name in enumerate(node.input):
                self.consumers.setdefault(name, []).append((_label(node, i), node.op_type, k))
        self.outputs = {o.name for o in self.graph.output}
        self.depth = 0  # how deep in function bodies the node converting now is
        self.input_names: dict[int, str] = {}  # the ONNX name of each input node, by id

    def run(self) -> Module:
        if self.graph.sparse_initializer:
            raise FrontendError("sparse initializers are not supported")
        for tensor in self.graph.initializer:
            self.values[tensor.name] = numpy_helper.to_array(tensor)
        for info in self.graph.input:
            if info.name not in self.values:
                self.values[info.name] = self._input(info)
        for i, node in enumerate(self.graph.node):
            self._convert(node, _label(node, i))
        outputs = [self.node_of(o.name) for o in self.graph.output]
        return self.builder.module(
            outputs, [k for k, o in enumerate(self.graph.output) if self._is_scalar(o.name)]
        )

    def _is_scalar(self, name: str) -> bool:
        value = self.values[name]
        return name in self.scalars if isinstance(value, Node) else value.ndim == 0

    def _input(self, info: onnx.ValueInfoProto) -> Value:
        name = info.name
        if not info.type.HasField("tensor_type") or not info.type.tensor_type.HasField("shape"):
            raise GraphError(name, "input", "a model input must be a tensor of known shape")
        tensor = info.type.tensor_type
        for i, dim in enumerate(tensor.shape.dim):
            if not dim.HasField("dim_value") or dim.dim_value < 0:
                raise unsized_error(name, i, dim.dim_param or f"{name}:{i}")
        if not tensor.shape.dim:
            self.scalars.add(name)
        dtype = str(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        shape = [d.dim_value for d in tensor.shape.dim]
        node = self.builder.input(name, shape, dtype)
        self.input_names[id(node)] = name
        # An empty input has one value, known now: the model still takes it (unread), and what is
        # computed from it folds (a first decoding step's empty past, CastLike's empty "like").
        return np.zeros(shape, dtype) if 0 in shape else node

    def _convert(self, proto: onnx.NodeProto, label: str) -> None:
        op = _Op(self, proto, label, [self.values[n] if n else None for n in proto.input])
        outs: Sequence[Value | None]
        try:
            outs = self._outputs(op)
        except GraphError as e:
            if e.node == label:
                raise
            reason = f"{e.op} {e.node!r}: {e.reason}"
            if isinstance(e, InputValuesNeeded):
                raise InputValuesNeeded(label, proto.op_type, reason, e.inputs) from None
            raise GraphError(label, proto.op_type, reason) from None
        except (ValueError, IndexError) as e:  # numpy or the reference refusing a folded computation
            raise GraphError(label, proto.op_type, str(e)) from None
        for k, name in enumerate(proto.output):
            value = outs[k] if k < len(outs) else None
            if value is not None:
                self._bind(op, name, value)
            elif name and (name in self.consumers or name in self.outputs):
                raise op.fail(f"output {_output_name(proto, self.opset, k)} ({name!r}) is not supported")

    def _outputs(self, op: _Op) -> Sequence[Value | None]:
        """Folded when every input is known and none is a float tensor (float arithmetic on weights
        is the graph's constant folding), or when known and there is no converter; else converted.
        Where ONNX's reference has no implementation at the model's opset (its DequantizeLinear
        starts at 19) and a converter exists, the converter's graph is folded instead."""
        op_type = op.proto.op_type
        if op.foldable() and op_type not in CONVERTS_CONSTANTS:
            fold = FOLDS.get(op_type)
            if fold is not None:
                return [np.asarray(v) for v in fold(op)]  # numpy makes scalars of rank-0 results
            try:
                return list(fold_with_reference(op.proto, op.static_values(), self.opset))
            except FoldError:
                if op_type not in CONVERTERS:
                    raise
        converter = CONVERTERS.get(op_type)
        if converter is not None:
            try:
                return list(converter(op))
            except EmptyTensorError:
                empty = [self._empty(name) if name else None for name in op.proto.output]
                if all(e is not None for e, name in zip(empty, op.proto.output) if name):
                    return empty  # every output is empty: nothing to compute
                self._fold_around_empty(op)
                raise
        if op.static_inputs():
            return list(fold_with_reference(op.proto, op.static_values(), self.opset))
        expanded = self._expand(op)
        if expanded is not None:
            return expanded
        raise op.fail(
            "unsupported operator on values computed at run time (it folds only when its inputs "
            f"are known at import); supported: {', '.join(sorted(CONVERTERS))}"
        )

    def _empty(self, name: str) -> np.ndarray | None:
        """Tensor `name`'s value if ONNX's shape inference makes it empty (of a static shape with a
        size of 0), else None."""
        inferred = self.inferred.get(name)
        if inferred is None or not all(d.HasField("dim_value") for d in inferred.shape.dim):
            return None
        shape = tuple(d.dim_value for d in inferred.shape.dim)
        return np.zeros(shape, helper.tensor_dtype_to_np_dtype(inferred.elem_type)) if 0 in shape else None

    def _fold_around_empty(self, op: _Op) -> None:
        """An operator that would compute on an empty tensor computes nothing at run time: it folds,
        once its other inputs are known, so the model inputs those come from (if small) must give
        their values."""
        runtime = [v for v in op.inputs if isinstance(v, Node)]
        behind = self.inputs_behind(*runtime) if runtime else None
        if behind is not None:
            raise InputValuesNeeded(
                op.label,
                op.proto.op_type,
                f"an input is empty, so the node folds, with the values of {', '.join(map(repr, behind))}",
                behind,
            )

    def _expand(self, op: _Op) -> list[Value | None] | None:
        """The outputs of `op`'s ONNX function body, its nodes converted in its place, None for an
        output the body leaves out (Attention's present_key without a past); None when the operator
        is not a function, or the body nests too deep or holds control flow."""
        if self.depth >= MAX_DEPTH:
            return None
        types = [self._type_proto(name) for name in op.proto.input]
        body = function_body(op.proto, self.opset, types)
        if body is None:
            return None
        nodes, outputs = instantiate(op.proto, body, op.label)
        opset, self.opset = self.opset, body_opset(body, self.opset)
        self.inferred.update(_body_types(op.proto, types, nodes, outputs, self.opset))
        self.depth += 1
        try:
            for node in nodes:
                self._convert(node, node.name)
        finally:
            self.depth -= 1
            self.opset = opset
        return [self.values.get(name) for name in outputs]

    def _type_proto(self, name: str) -> onnx.TypeProto:
        """The ONNX type of tensor `name` (empty for an omitted input): what a context-dependent
        function body is built for."""
        if not name:
            return onnx.TypeProto()
        value = self.values[name]
        if isinstance(value, np.ndarray):
            dtype, shape = value.dtype, value.shape
        else:
            dtype, shape = np.dtype(value.type.dtype), () if name in self.scalars else value.type.shape
        return helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(dtype), shape)

    def _bind(self, op: _Op, name: str, value: Value) -> None:
        """Record an output, checked against ONNX's shape inference where it knows the rank."""
        shape = value.shape if isinstance(value, np.ndarray) else value.type.shape
        inferred = self.inferred.get(name)
        rank = None if inferred is None else len(inferred.shape.dim)
        if rank == 0 and shape == (1,) and isinstance(value, Node):
            self.scalars.add(name)
        elif rank is not None and rank != len(shape):
            raise op.fail(f"output {name!r} has shape {shape}, but ONNX infers rank {rank}")
        self.values[name] = value

    def inputs_behind(self, *values: Node) -> tuple[str, ...] | None:
        """The model inputs `values` are computed from, in input order, if they are small enough to
        set a shape by their values (at most MAX_VALUE_ELEMENTS values in all), else None."""
        found: dict[int, Node] = {}
        pending, seen = list(values), set()
        while pending:
            node = pending.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if id(node) in self.input_names:
                found[id(node)] = node
            pending.extend(node.args)
        if not found or sum(n.type.size for n in found.values()) > MAX_VALUE_ELEMENTS:
            return None
        return tuple(self.input_names[id(n)] for n in self.builder.inputs if id(n) in found)

    def node_of(self, name: str) -> Node:
        """The graph node of tensor `name`; a compile-time value becomes a constant (once)."""
        value = self.values[name]
        if isinstance(value, Node):
            return value
        if value.size == 0 and name not in self.outputs:  # an empty output is returned as it is
            raise EmptyTensorError(name, "tensor", "is empty: no operator computes on an empty tensor")
        if name not in self.constants:
            self.constants[name] = self.builder.constant(name, value)
        return self.constants[name]


def _output_name(proto: onnx.NodeProto, opset: int, k: int) -> str:
    """The schema's name of output `k` (Indices, mask, Mean, ...), for errors."""
    outputs = onnx.defs.get_schema(proto.op_type, opset).outputs
    return outputs[min(k, len(outputs) - 1)].name


@dataclass
class _Op:
    """One ONNX node while it converts: its attributes, its inputs as values, ways to make nodes."""

    importer: _Importer
    proto: onnx.NodeProto
    label: str
    inputs: list[Value | None]
    attrs: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.attrs = {a.name: _attribute(a) for a in self.proto.attribute}

    @property
    def opset(self) -> int:
        return self.importer.opset

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def fail(self, reason: str) -> GraphError:
        return GraphError(self.label, self.proto.op_type, reason)

    def has(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def value(self, i: int) -> Value:
        value = self.inputs[i] if i < len(self.inputs) else None
        if value is None:
            raise self.fail(f"input {i} is required")
        return value

    def node(self, i: int) -> Node:
        self.value(i)
        return self.importer.node_of(self.proto.input[i])

    def static(self, i: int) -> np.ndarray:
        value = self.value(i)
        if isinstance(value, np.ndarray):
            return value
        reason = (
            f"input {i} ({self.proto.input[i]!r}) must be a compile-time constant, but it depends on "
            "the model's inputs"
        )
        behind = self.importer.inputs_behind(value)
        if behind is None:
            raise self.fail(reason)
        reason += f" ({', '.join(map(repr, behind))}, whose values would set it)"
        raise InputValuesNeeded(self.label, self.proto.op_type, reason, behind)

    def ints(self, i: int) -> list[int]:
        return [int(v) for v in self.static(i).reshape(-1)]

    def scalar(self, i: int) -> float:
        array = self.static(i)
        if array.size != 1:
            raise self.fail(f"input {i} must hold one value, got shape {array.shape}")
        return float(array.reshape(-1)[0])

    def shape(self, i: int) -> tuple[int, ...]:
        """The ONNX shape of input `i` (rank 0 for run-time scalars held as shape (1,))."""
        value = self.value(i)
        if isinstance(value, np.ndarray):
            return tuple(value.shape)
        return () if self.proto.input[i] in self.importer.scalars else value.type.shape

    def dtype(self, i: int) -> str:
        value = self.value(i)
        return str(value.dtype) if isinstance(value, np.ndarray) else value.type.dtype

    def static_inputs(self) -> bool:
        """Whether every input is known at import."""
        return all(isinstance(v, np.ndarray) for v in self.inputs if v is not None)

    def static_values(self) -> list[np.ndarray | None]:
        """The inputs, every one known at import (None for an omitted optional one)."""
        return [v if v is None else self.static(k) for k, v in enumerate(self.inputs)]

    def foldable(self) -> bool:
        """Whether this node computes now: every input is known, and none is a float tensor larger
        than shape arithmetic's scalars and short vectors (arithmetic on weights is the graph's
        constant folding, which fuses it with what follows)."""
        if not self.static_inputs():
            return False
        values = [v for v in self.static_values() if v is not None]
        return all(v.dtype.kind not in "fc" or v.size <= _SMALL_FLOAT_FOLD for v in values)

    def call(self, op: str, args: Sequence[Node], **attrs: object) -> Node:
        return self.importer.builder.call(op, args, name=self.hint(), **attrs)

    def const(self, data: np.ndarray) -> Constant:
        return self.importer.builder.constant(self.hint(), data)

    def hint(self) -> str:
        return next((o for o in self.proto.output if o), self.label)

    def axis(self, axis: int, rank: int) -> int:
        if not -rank <= axis < rank:
            raise self.fail(f"axis {axis} is out of range for rank {rank}")
        return axis % rank

    def reshape(self, x: Node, shape: Sequence[int]) -> Node:
        """`x` as `shape`; a rank-0 shape is held as (1,)."""
        target = tuple(shape) or (1,)
        return x if x.type.shape == target else self.call("reshape", [x], shape=target)


def _attribute(attribute: onnx.AttributeProto) -> Any:
    value = helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        return value.decode()
    return value


Converter = Callable[[_Op], Sequence[Value]]
Fold = Callable[[_Op], Sequence[np.ndarray]]


# Elementwise and broadcasting operators.


def _unary(graph_op: str) -> Converter:
    return lambda op: [op.call(graph_op, [op.node(0)])]


def _binary(graph_op: str) -> Converter:
    return lambda op: [op.call(graph_op, [op.node(0), op.node(1)])]


def _variadic(graph_op: str) -> Converter:
    """Max and Min take one or more inputs."""
    return lambda op: [
        reduce(lambda a, b: op.call(graph_op, [a, b]), [op.node(i) for i in range(len(op.inputs))])
    ]


def _mean(op: _Op) -> list[Value]:
    """The elementwise mean of one or more inputs (older model-zoo exports)."""
    (total,) = _variadic("add")(op)
    assert isinstance(total, Node)
    return [op.call("divide", [total, op.const(np.full(1, len(op.inputs), op.dtype(0)))])]


def _local_response_norm(op: _Op) -> list[Value]:
    """x / (bias + alpha / size * (sum of x^2 over `size` neighbouring channels)) ** beta: the sum a
    channel-wise average pool of the squares over zero padding (AlexNet, GoogLeNet exports)."""
    x, shape = op.node(0), op.shape(0)
    size = int(op.attr("size"))
    if len(shape) < 3 or size < 1:
        raise op.fail(f"needs an (N, C, ...) input and a positive size, got {shape} and {size}")
    squares = op.call("multiply", [x, x])
    rows = op.call("reshape", [squares], shape=(shape[0], 1, shape[1], math.prod(shape[2:])))
    pads = ((size - 1) // 2, 0, size // 2, 0)
    pooled = op.call(
        "avg_pool2d",
        [rows],
        kernel=(size, 1),
        strides=(1, 1),
        padding=pads,
        ceil_mode=False,
        count_include_pad=True,
    )
    alpha, beta, bias = (float(op.attr(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    scaled = op.call(
        "multiply", [op.call("reshape", [pooled], shape=shape), op.const(np.full(1, alpha, op.dtype(0)))]
    )
    base = op.call("add", [scaled, op.const(np.full(1, bias, op.dtype(0)))])
    power = op.call("power", [base, op.const(np.full(1, beta, op.dtype(0)))])
    return [op.call("divide", [x, power])]


def _cumsum(op: _Op) -> list[Value]:
    """An axis known at import is the op's attribute. One computed at run time (the output's shape
    does not depend on it) selects among the sums along every axis: rank times the work, and an axis
    out of range gives the input's sum along none of them, zeros."""
    rank = len(op.shape(0))
    exclusive, reverse = bool(op.attr("exclusive", 0)), bool(op.attr("reverse", 0))
    if isinstance(op.value(1), np.ndarray):
        axis = op.axis(int(op.scalar(1)), rank)
        return [op.call("cumsum", [op.node(0)], axis=axis, exclusive=exclusive, reverse=reverse)]
    chosen = op.reshape(op.node(1), (1,))
    y = op.call("broadcast_to", [op.const(np.zeros(1, op.dtype(0)))], shape=op.node(0).type.shape)
    for axis in range(rank):
        summed = op.call("cumsum", [op.node(0)], axis=axis, exclusive=exclusive, reverse=reverse)
        matches = [
            op.call("equal", [chosen, op.const(np.array([k], op.dtype(1)))]) for k in (axis, axis - rank)
        ]
        y = op.call("where", [op.call("logical_or", matches), summed, y])
    return [y]


def _where(op: _Op) -> list[Value]:
    return [op.call("where", [op.node(0), op.node(1), op.node(2)])]


def _pow(op: _Op) -> list[Value]:
    """The result has the base's type; the exponent may have another (ONNX's T1). A float base takes
    its exponent in its own type. An integer base with a float exponent is the float64 power cast
    back (as ONNX's reference computes it); with an integer exponent of another width, the int64
    power cast back (exact: a product modulo 2**64 wraps to the same narrower value)."""
    base, exponent = op.dtype(0), op.dtype(1)
    if base == exponent:
        return [op.call("power", [op.node(0), op.node(1)])]
    if base in FLOAT_DTYPES:
        return [op.call("power", [op.node(0), _as_dtype(op, 1, base)])]
    wide = "float64" if exponent in FLOAT_DTYPES else "int64"
    power = op.call("power", [_as_dtype(op, 0, wide), _as_dtype(op, 1, wide)])
    return [power if base == wide else op.call("cast", [power], dtype=base)]


def _as_dtype(op: _Op, i: int, dtype: str) -> Node:
    """Input `i` in `dtype`: a constant converted now, a run-time tensor cast in the graph."""
    value = op.value(i)
    if isinstance(value, np.ndarray):
        return op.const(convert(value, dtype))
    return op.node(i) if value.type.dtype == dtype else op.call("cast", [value], dtype=dtype)


def _mod(op: _Op) -> list[Value]:
    """fmod=0: the divisor's sign (numpy's mod, also on floats, as ONNX's reference computes it);
    fmod=1: the dividend's."""
    truncated = bool(op.attr("fmod", 0))
    return [op.call("mod", [op.node(0), op.node(1)], fmod=truncated)]


def _clip(op: _Op) -> list[Value]:
    """Bounds known at import are the clip op's attributes; a bound computed at run time is a
    maximum (then a minimum) with it, in ONNX's order: min(max(x, low), high)."""
    bounds = [op.has(k) and not isinstance(op.value(k), np.ndarray) for k in (1, 2)]
    if not any(bounds):
        low = op.scalar(1) if op.has(1) else None
        high = op.scalar(2) if op.has(2) else None
        return [op.call("clip", [op.node(0)], min=low, max=high)]
    y = op.node(0)
    for k, graph_op in ((1, "maximum"), (2, "minimum")):
        if op.has(k):
            y = op.call(graph_op, [y, op.reshape(op.node(k), (1,))])
    return [y]


def _hard_sigmoid(op: _Op) -> list[Value]:
    alpha, beta = float(op.attr("alpha", 0.2)), float(op.attr("beta", 0.5))
    return [op.call("hardsigmoid", [op.node(0)], alpha=alpha, beta=beta)]


def _leaky_relu(op: _Op) -> list[Value]:
    return [op.call("leaky_relu", [op.node(0)], alpha=float(op.attr("alpha", 0.01)))]


def _elu(alpha: float, scale: float = 1.0, celu: bool = False) -> Converter:
    """Elu, Selu and Celu are one graph op (PyTorch's aten.elu); Celu scales the input by 1/alpha."""

    def convert(op: _Op) -> list[Value]:
        a = float(op.attr("alpha", alpha))
        gamma = float(op.attr("gamma", scale))
        if celu and a == 0:
            raise op.fail("alpha 0 (Celu divides by it)")
        return [op.call("elu", [op.node(0)], alpha=a, scale=gamma, input_scale=1 / a if celu else 1.0)]

    return convert


def _softplus(op: _Op) -> Node:
    return op.call("softplus", [op.node(0)], beta=1.0)


def _mish(op: _Op) -> list[Value]:
    """x tanh(softplus(x))."""
    x = op.node(0)
    return [op.call("multiply", [x, op.call("tanh", [_softplus(op)])])]


def _softsign(op: _Op) -> list[Value]:
    """x / (1 + |x|)."""
    x = op.node(0)
    one = op.const(np.ones(1, op.dtype(0)))
    return [op.call("divide", [x, op.call("add", [one, op.call("abs", [x])])])]


def _prelu(op: _Op) -> list[Value]:
    """relu(x) + slope min(x, 0), exact (one term is 0); the slope broadcasts to x, never x to it."""
    x, slope = op.node(0), op.node(1)
    try:
        fits = np.broadcast_shapes(op.shape(0), op.shape(1)) == op.shape(0)
    except ValueError:
        fits = False
    if not fits:
        raise op.fail(f"slope of shape {op.shape(1)} does not broadcast to x's {op.shape(0)}")
    negative = op.call("minimum", [x, op.const(np.zeros(1, op.dtype(0)))])
    return [op.call("add", [op.call("relu", [x]), op.call("multiply", [slope, negative])])]


def _gelu(op: _Op) -> list[Value]:
    return [op.call("gelu", [op.node(0)], approximate=op.attr("approximate", "none"))]


def _identity(op: _Op) -> list[Value]:
    return [op.value(0)]


def _dropout(op: _Op) -> list[Value]:
    """Inference: the identity, and a mask that keeps everything (known at import)."""
    if op.has(2) and bool(op.static(2).reshape(-1)[0]):
        raise op.fail("training_mode=1 is not supported (inference only)")
    return [op.value(0), np.ones(op.shape(0), bool)]


def _cast(op: _Op) -> list[Value]:
    """A constant converts now, a run-time tensor in the graph (`compiler.dtypes.convert`: a float
    becomes an int truncated and saturated, NaN as 0, where ONNX leaves it undefined)."""
    return _cast_to(op, str(helper.tensor_dtype_to_np_dtype(op.attr("to"))))


def _cast_like(op: _Op) -> list[Value]:
    return _cast_to(op, op.dtype(1))


def _cast_to(op: _Op, target: str) -> list[Value]:
    if target not in DTYPES:
        raise op.fail(f"a cast to {target} is not supported ({', '.join(DTYPES)})")
    value = op.value(0)
    if isinstance(value, np.ndarray):
        if str(value.dtype) not in DTYPES:
            raise op.fail(f"a cast from {value.dtype} is not supported ({', '.join(DTYPES)})")
        return [convert(value, target)]
    if target == value.type.dtype:
        return [value]
    return [op.call("cast", [value], dtype=target)]


# Quantization (QDQ models): integers to floats and back, as ONNX Runtime computes them in float32.

_QUANTIZED = ("int8", "uint8", "int16", "uint16")


def _quantization_param(op: _Op, i: int, axis: int, block_size: int) -> Node:
    """A scale or zero point broadcast against x (input 0): one value as it is (whatever `axis`
    says), a vector along `axis`, or for blocked quantization each value repeated over its block of
    `block_size` along `axis`."""
    shape, x_shape = op.shape(i), op.shape(0)
    node = op.node(i)
    if math.prod(shape) == 1 and not block_size:
        return op.reshape(node, (1,))
    rank = len(x_shape)
    axis = op.axis(axis, rank)
    if not block_size:
        if shape != (x_shape[axis],):
            raise op.fail(f"input {i} has shape {shape}; expected ({x_shape[axis]},) for axis {axis}")
        return op.reshape(node, tuple(x_shape[axis] if k == axis else 1 for k in range(rank)))
    blocks = -(-x_shape[axis] // block_size)
    expected = x_shape[:axis] + (blocks,) + x_shape[axis + 1 :]
    if shape != expected:
        raise op.fail(f"input {i} has shape {shape}; expected {expected} for blocks of {block_size}")
    split = shape[: axis + 1] + (1,) + shape[axis + 1 :]
    repeated = op.call(
        "broadcast_to", [op.reshape(node, split)], shape=split[: axis + 1] + (block_size,) + split[axis + 2 :]
    )
    whole = op.reshape(repeated, shape[:axis] + (blocks * block_size,) + shape[axis + 1 :])
    if blocks * block_size == x_shape[axis]:
        return whole
    end = tuple(x_shape[axis] if k == axis else shape[k] for k in range(rank))
    return op.call("slice", [whole], begin=(0,) * rank, end=end, strides=(1,) * rank)


def _quantization_axes(op: _Op) -> tuple[int, int]:
    block_size = int(op.attr("block_size", 0))
    if block_size < 0:
        raise op.fail(f"block_size {block_size} is negative")
    return int(op.attr("axis", 1)), block_size


def _dequantize_linear(op: _Op) -> list[Value]:
    """(x - zero_point) * scale, in float32, then the scale's type (or output_dtype)."""
    if op.dtype(0) not in _QUANTIZED + ("int32",):
        raise op.fail(f"dequantizing {op.dtype(0)} is not supported ({', '.join(_QUANTIZED)}, int32)")
    axis, block_size = _quantization_axes(op)
    x = op.call("cast", [op.node(0)], dtype="float32")
    if op.has(2):
        zero = _quantization_param(op, 2, axis, block_size)
        x = op.call("subtract", [x, op.call("cast", [zero], dtype="float32")])
    scale = _quantization_param(op, 1, axis, block_size)
    y = op.call("multiply", [x, op.call("cast", [scale], dtype="float32")])
    target = op.attr("output_dtype")
    dtype = str(helper.tensor_dtype_to_np_dtype(target)) if target else op.dtype(1)
    if dtype not in ("float32", "float64"):
        raise op.fail(f"a dequantized {dtype} is not supported (float32, float64)")
    if dtype == "float32" and not block_size:
        _remember_dequantized(op, axis)
    return [y if dtype == "float32" else op.call("cast", [y], dtype=dtype)]


@dataclass(frozen=True)
class _Dequantized:
    """A DequantizeLinear of 8-bit `quantized` by a scale and zero point known at import, one value
    or one per index of `axis`: what a MatMul of two such tensors computes in integers."""

    quantized: str
    scale: np.ndarray
    zero: np.ndarray
    axis: int


def _remember_dequantized(op: _Op, axis: int) -> None:
    scale = op.value(1)
    zero = op.value(2) if op.has(2) else np.zeros(1, op.dtype(0))
    if op.dtype(0) in ("uint8", "int8") and isinstance(scale, np.ndarray) and isinstance(zero, np.ndarray):
        rank = len(op.shape(0))
        op.importer.dequantized[op.proto.output[0]] = _Dequantized(
            op.proto.input[0], scale.astype(np.float32), zero, axis % rank if rank else 0
        )


def _quantize_linear(op: _Op) -> list[Value]:
    """round(x / scale) + zero_point (halves to even), saturated into the integer type: the cast
    saturates (NaN becomes 0). Computed in x's float type (or `precision`)."""
    axis, block_size = _quantization_axes(op)
    target = op.attr("output_dtype")
    dtype = op.dtype(2) if op.has(2) else str(helper.tensor_dtype_to_np_dtype(target)) if target else "uint8"
    if dtype not in _QUANTIZED:
        raise op.fail(f"quantizing to {dtype} is not supported ({', '.join(_QUANTIZED)})")
    if not bool(op.attr("saturate", 1)) and dtype not in _QUANTIZED:
        raise op.fail("saturate=0 applies to float8 outputs only")
    precision = op.attr("precision")
    compute = str(helper.tensor_dtype_to_np_dtype(precision)) if precision else op.dtype(0)
    if compute not in ("float32", "float64"):
        raise op.fail(f"quantizing in {compute} is not supported (float32, float64)")
    x = op.call("cast", [op.node(0)], dtype=compute) if op.dtype(0) != compute else op.node(0)
    scale = op.call("cast", [_quantization_param(op, 1, axis, block_size)], dtype=compute)
    y = op.call("round", [op.call("divide", [x, scale])])
    if op.has(2):
        zero = op.call("cast", [_quantization_param(op, 2, axis, block_size)], dtype=compute)
        y = op.call("add", [y, zero])
    return [op.call("cast", [y], dtype=dtype)]


# Convolution, normalization, pooling.


def _same_pads(
    op: _Op, spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int]
) -> tuple[int, ...]:
    """Explicit (top, left, bottom, right) padding for auto_pad, as the ONNX spec computes it."""
    auto_pad = op.attr("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = tuple(op.attr("pads", [0] * 2 * len(spatial)))
        if len(pads) != 2 * len(spatial):
            raise op.fail(f"pads {pads} must have {2 * len(spatial)} entries")
        return pads
    if auto_pad == "VALID":
        return (0,) * 2 * len(spatial)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise op.fail(f"auto_pad {auto_pad!r} is not supported")
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        total = max(0, (math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return (*begins, *ends)


def _window(op: _Op, kernel: Sequence[int]) -> dict[str, tuple[int, ...]]:
    """Strides, dilation and padding of a 2-D conv or pool over input 0 (NCHW)."""
    shape = op.shape(0)
    if len(shape) != 4:
        raise op.fail(f"only 2-D windows over NCHW inputs are supported, got input shape {shape}")
    strides = tuple(op.attr("strides", [1, 1]))
    dilation = tuple(op.attr("dilations", [1, 1]))
    padding = _same_pads(op, shape[2:], kernel, strides, dilation)
    return {"strides": strides, "dilation": dilation, "padding": padding}


def _conv(op: _Op) -> list[Value]:
    """A 2-D conv; a 1-D one (audio models, causal convs) as 2-D over rows of height 1."""
    x, w = op.node(0), op.node(1)
    kernel = w.type.shape[2:]
    if tuple(op.attr("kernel_shape", kernel)) != kernel:
        raise op.fail(f"kernel_shape {op.attr('kernel_shape')} differs from the weight's {kernel}")
    if len(op.shape(0)) == 3:
        window = _window_1d(op, kernel)
        x = op.reshape(x, (*x.type.shape[:2], 1, x.type.shape[2]))
        w = op.reshape(w, (*w.type.shape[:2], 1, w.type.shape[2]))
    else:
        window = _window(op, kernel)
    y = op.call("conv2d", [x, w], groups=int(op.attr("group", 1)), **window)
    if len(op.shape(0)) == 3:
        y = op.reshape(y, (y.type.shape[0], y.type.shape[1], y.type.shape[3]))
    if op.has(2):
        bias = op.reshape(op.node(2), (w.type.shape[0],) + (1,) * (len(op.shape(0)) - 2))
        y = op.call("add", [y, bias])
    return [y]


def _window_1d(op: _Op, kernel: Sequence[int]) -> dict[str, tuple[int, ...]]:
    """A 1-D conv's window as the 2-D window of its height-1 form."""
    strides = tuple(op.attr("strides", [1]))
    dilation = tuple(op.attr("dilations", [1]))
    begin, end = _same_pads(op, op.shape(0)[2:], kernel, strides, dilation)
    return {"strides": (1, *strides), "dilation": (1, *dilation), "padding": (0, begin, 0, end)}


def _conv_transpose(op: _Op) -> list[Value]:
    """2-D transposed convolution (compiler.graph.conv_transpose); a 1-D one as 2-D over rows of
    height 1. auto_pad and output_shape become explicit pads, as ONNX defines them."""
    x, weight = op.node(0), op.node(1)
    spatial = len(op.shape(0)) - 2
    if spatial not in (1, 2):
        raise op.fail(f"only 1-D and 2-D transposed convolutions are supported, got input {op.shape(0)}")
    kernel = weight.type.shape[2:]
    if tuple(op.attr("kernel_shape", kernel)) != kernel:
        raise op.fail(f"kernel_shape {op.attr('kernel_shape')} differs from the weight's {kernel}")
    strides = list(op.attr("strides", [1] * spatial))
    dilation = list(op.attr("dilations", [1] * spatial))
    output_padding = list(op.attr("output_padding", [0] * spatial))
    pads = _transposed_pads(op, op.shape(0)[2:], kernel, strides, dilation, output_padding)
    if spatial == 1:  # (N, C, L) as (N, C, 1, L)
        x = op.reshape(x, (*x.type.shape[:2], 1, x.type.shape[2]))
        weight = op.reshape(weight, (*weight.type.shape[:2], 1, weight.type.shape[2]))
        strides, dilation, output_padding = [1, *strides], [1, *dilation], [0, *output_padding]
        pads = [0, pads[0], 0, pads[1]]
    y = conv_transpose2d(
        op.importer.builder,
        op.hint(),
        x,
        weight,
        strides=tuple(strides),
        padding=tuple(pads),
        output_padding=tuple(output_padding),
        dilation=tuple(dilation),
        groups=int(op.attr("group", 1)),
    )
    if spatial == 1:
        y = op.reshape(y, (y.type.shape[0], y.type.shape[1], y.type.shape[3]))
    if op.has(2):
        y = op.call("add", [y, op.reshape(op.node(2), (y.type.shape[1],) + (1,) * spatial)])
    return [y]


def _transposed_pads(
    op: _Op,
    size: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilation: Sequence[int],
    output_padding: list[int],
) -> list[int]:
    """ConvTranspose's pads (begins, then ends): given, or what makes the output `output_shape`
    (input x stride under SAME_UPPER / SAME_LOWER), the odd one at the end for SAME_UPPER and at
    the beginning otherwise, as ONNX's definition says (`output_padding` grows where an end pad
    would be negative)."""
    auto = op.attr("auto_pad", "NOTSET")
    wanted = op.attr("output_shape")
    if auto == "VALID":
        return [0] * 2 * len(size)
    if wanted is None and auto == "NOTSET":
        return list(op.attr("pads", [0] * 2 * len(size)))
    if auto not in ("NOTSET", "SAME_UPPER", "SAME_LOWER"):
        raise op.fail(f"auto_pad {auto!r} is not supported")
    target = list(wanted)[-len(size) :] if wanted is not None else [n * s for n, s in zip(size, strides)]
    total = [
        s * (n - 1) + p + (k - 1) * d + 1 - t
        for n, k, s, d, p, t in zip(size, kernel, strides, dilation, output_padding, target)
    ]
    if auto == "SAME_UPPER":
        begins, ends = [t // 2 for t in total], [t - t // 2 for t in total]
    else:
        begins, ends = [t - t // 2 for t in total], [t // 2 for t in total]
    if any(b < 0 for b in begins):
        raise op.fail(f"output_shape {target} needs output columns before the first input's")
    # A negative end pad is output past the last contribution: zeros, as output_padding gives.
    for i, end in enumerate(ends):
        if end < 0:
            output_padding[i], ends[i] = output_padding[i] - end, 0
    return begins + ends


def _resize(op: _Op) -> list[Value]:
    """Nearest, linear and cubic resizing (antialiased or not) with static scales or sizes
    (compiler.graph.resize)."""
    f = Filter(
        mode=op.attr("mode", "nearest"),
        antialias=bool(op.attr("antialias", 0)),
        cubic_a=float(op.attr("cubic_coeff_a", -0.75)),
        exclude_outside=bool(op.attr("exclude_outside", 0)),
    )
    coordinates = op.attr("coordinate_transformation_mode", "half_pixel")
    rounding = op.attr("nearest_mode", "round_prefer_floor")
    if f.mode not in MODES:
        raise op.fail(f"mode {f.mode!r} is not supported ({', '.join(MODES)})")
    if f.mode == "nearest" and f.antialias:
        raise op.fail("antialias applies to linear and cubic modes only")
    if coordinates not in COORDINATE_MODES:
        raise op.fail(f"coordinate_transformation_mode {coordinates!r} is not supported")
    if rounding not in NEAREST_MODES:
        raise op.fail(f"nearest_mode {rounding!r} is not supported")
    shape = op.shape(0)
    axes = [op.axis(a, len(shape)) for a in op.attr("axes", range(len(shape)))]
    crop = _crop(op, len(shape), axes) if coordinates == "tf_crop_and_resize" else None
    sizes, scales = _resize_shape(op, shape, axes, crop)
    if any(n < 1 for n in sizes):
        raise op.fail(f"the output shape {tuple(sizes)} is empty")
    y = resize(op.importer.builder, op.hint(), op.node(0), sizes, scales, f, coordinates, rounding, crop)
    return [y]


def _crop(op: _Op, rank: int, axes: Sequence[int]) -> Crop:
    """tf_crop_and_resize's region (input 1, `roi`: the starts of the resized axes, then their ends)."""
    if not op.has(1):
        raise op.fail("tf_crop_and_resize needs roi (input 1)")
    roi = op.static(1).reshape(-1).astype(np.float64).tolist()
    if len(roi) != 2 * len(axes):
        raise op.fail(f"roi has {len(roi)} values; {2 * len(axes)} expected (starts, then ends)")
    regions = [(0.0, 1.0)] * rank
    for k, axis in enumerate(axes):
        regions[axis] = (roi[k], roi[k + len(axes)])
    return Crop(tuple(regions), float(op.attr("extrapolation_value", 0.0)))


def _resize_shape(
    op: _Op, shape: Sequence[int], axes: Sequence[int], crop: Crop | None
) -> tuple[list[int], list[float]]:
    """The output sizes and the per-axis scales the coordinates use: from `sizes` (kept to the
    input's aspect ratio under keep_aspect_ratio_policy not_larger / not_smaller) or from `scales`
    (of the crop's extent under tf_crop_and_resize).

    align_corners and tf_crop_and_resize divide by the output's length less one: the length itself
    (from a scale whose output length is fractional, 4 x 0.6 = 2.4 floored to 2, by 1), as ONNX
    Runtime and PyTorch do, where ONNX's reference divides by 1.4 (onnx/onnx#2462)."""
    sizes, scales = list(shape), [1.0] * len(shape)
    policy = op.attr("keep_aspect_ratio_policy", "stretch")
    if op.has(3) and op.static(3).size:
        for axis, n in zip(axes, op.ints(3)):
            sizes[axis], scales[axis] = n, n / shape[axis]
        if policy in ("not_larger", "not_smaller"):
            pick = min if policy == "not_larger" else max
            scale = pick(scales[axis] for axis in axes)
            for axis in axes:
                sizes[axis], scales[axis] = int(scale * shape[axis] + 0.5), scale
        elif policy != "stretch":
            raise op.fail(f"keep_aspect_ratio_policy {policy!r} is not supported")
    elif op.has(2) and op.static(2).size:
        for axis, scale in zip(axes, op.static(2).reshape(-1).tolist()):
            start, end = crop.roi[axis] if crop is not None else (0.0, 1.0)
            sizes[axis], scales[axis] = math.floor(shape[axis] * (end - start) * scale), scale
    else:
        raise op.fail("neither scales nor sizes is given")
    return sizes, scales


def _batch_norm(op: _Op) -> list[Value]:
    if op.attr("training_mode", 0):
        raise op.fail("training_mode=1 is not supported (inference only)")
    args = [op.node(i) for i in range(5)]
    return [op.call("batch_norm", args, epsilon=float(op.attr("epsilon", 1e-5)))]


def _pool_kernel(op: _Op) -> tuple[int, ...]:
    kernel = op.attr("kernel_shape")
    if kernel is None:
        raise op.fail("kernel_shape is required")
    return tuple(kernel)


def _max_pool(op: _Op) -> list[Value]:
    kernel = _pool_kernel(op)
    window = _window(op, kernel)
    ceil_mode = bool(op.attr("ceil_mode", 0))
    return [op.call("max_pool2d", [op.node(0)], kernel=kernel, ceil_mode=ceil_mode, **window)]


def _average_pool(op: _Op) -> list[Value]:
    kernel = _pool_kernel(op)
    window = _window(op, kernel)
    if window.pop("dilation") != (1, 1):
        raise op.fail("dilated average pooling is not supported")
    return [
        op.call(
            "avg_pool2d",
            [op.node(0)],
            kernel=kernel,
            ceil_mode=bool(op.attr("ceil_mode", 0)),
            count_include_pad=bool(op.attr("count_include_pad", 0)),
            **window,
        )
    ]


def _global_pool(graph_op: str) -> Converter:
    """Global pooling reduces every spatial axis, keeping them as size 1."""

    def convert(op: _Op) -> list[Value]:
        axes = tuple(range(2, len(op.shape(0))))
        return [op.call(graph_op, [op.node(0)], axes=axes, keepdims=True)]

    return convert


def _layer_norm(op: _Op) -> list[Value]:
    x = op.node(0)
    rank = len(op.shape(0))
    axis = op.axis(int(op.attr("axis", -1)), rank)
    normalized = op.shape(0)[axis:]
    gamma = op.node(1)
    if gamma.type.shape != normalized:
        gamma = op.call("broadcast_to", [gamma], shape=normalized)
    beta = op.node(2) if op.has(2) else op.const(np.zeros(normalized, x.type.dtype))
    if beta.type.shape != normalized:
        beta = op.call("broadcast_to", [beta], shape=normalized)
    axes = tuple(range(axis, rank))
    eps = float(op.attr("epsilon", 1e-5))
    out = op.call("layer_norm", [x, gamma, beta], axes=axes, epsilon=eps)
    if not any(op.proto.output[1:]):
        return [out]
    b, name = op.importer.builder, op.hint()
    mean, deviations = normalize.centered(b, name, x, axes)  # computed apart: the fused op keeps neither
    spread = normalize.root(b, name, normalize.biased_variance(b, name, deviations, axes), eps)
    return [out, mean, op.call("reciprocal", [spread])]


def _instance_norm(op: _Op) -> list[Value]:
    """Each sample's channel normalized over its positions, then scaled per channel."""
    b, name = op.importer.builder, op.hint()
    axes = tuple(range(2, len(op.shape(0))))
    out = normalize.normalized(b, name, op.node(0), axes, float(op.attr("epsilon", 1e-5)))
    return [normalize.affine(b, name, out, op.node(1), op.node(2), 1)]


def _group_norm(op: _Op) -> list[Value]:
    """The channels in num_groups groups, each normalized over its channels and positions; then
    scaled per channel (opset 21), or per group (opset 18, where scale and bias have num_groups)."""
    x, shape = op.node(0), op.shape(0)
    groups = int(op.attr("num_groups"))
    if len(shape) < 2 or shape[1] % groups:
        raise op.fail(f"{shape[1:2]} channels do not split into {groups} groups")
    b, name = op.importer.builder, op.hint()
    grouped = op.call("reshape", [x], shape=(shape[0], groups, math.prod(shape[1:]) // groups))
    out = normalize.normalized(b, name, grouped, (2,), float(op.attr("epsilon", 1e-5)))
    if op.node(1).type.shape[0] == groups and op.opset < 21:
        return [op.call("reshape", [normalize.affine(b, name, out, op.node(1), op.node(2), 1)], shape=shape)]
    return [normalize.affine(b, name, op.call("reshape", [out], shape=shape), op.node(1), op.node(2), 1)]


# Linear algebra and softmax.


def _gemm(op: _Op) -> list[Value]:
    """alpha * A' @ B' + beta * C, with transposes and scales as graph calls (folded later when A, B or C
    are weights)."""
    a, b = op.node(0), op.node(1)
    if op.attr("transA", 0):
        a = op.call("transpose", [a], axes=(1, 0))
    if op.attr("transB", 0):
        b = op.call("transpose", [b], axes=(1, 0))
    y = op.call("matmul", [a, b])
    alpha, beta = float(op.attr("alpha", 1.0)), float(op.attr("beta", 1.0))
    if alpha != 1.0:
        y = op.call("multiply", [y, op.const(np.array(alpha, y.type.dtype))])
    if op.has(2):
        c = op.node(2)
        if beta != 1.0:
            c = op.call("multiply", [c, op.const(np.array(beta, c.type.dtype))])
        y = op.call("add", [y, c])
    return [y]


def _matmul(op: _Op) -> list[Value]:
    """numpy's matmul: a rank-1 operand is a matrix of one row (left) or column (right) whose axis
    the result drops. Of two dequantized 8-bit tensors (a QDQ model), it is their integer product
    scaled (`_quantized_matmul`)."""
    quantized = _quantized_matmul(op)
    if quantized is not None:
        return [quantized]
    a, b = op.node(0), op.node(1)
    a_shape, b_shape = op.shape(0), op.shape(1)
    if len(a_shape) == 1:
        a = op.reshape(a, (1, *a_shape))
    if len(b_shape) == 1:
        b = op.reshape(b, (*b_shape, 1))
    y = op.call("matmul", [a, b])
    shape = list(y.type.shape)
    if len(b_shape) == 1:
        del shape[-1]
    if len(a_shape) == 1:
        del shape[-1 if len(b_shape) == 1 else -2]
    return [op.reshape(y, shape)]


def _matmul_integer(op: _Op) -> list[Value]:
    """sum_k (A - a_zero) (B - b_zero) in int32, as the exact product of the 8-bit operands (which
    AVX-512 VNNI computes) less the zero points' terms: a_zero * colsum(B) + b_zero * rowsum(A) -
    K * a_zero * b_zero. A zero point absent or all zero (symmetric weights) adds nothing; with
    constant weights, colsum(B) folds at import. Zero points: a scalar, or A's per-row / B's
    per-column vector."""
    a_shape, b_shape = op.shape(0), op.shape(1)
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise op.fail(f"operands of rank >= 2 are supported, got {a_shape} and {b_shape}")
    a_zero = _zero_point(op, 2, (a_shape[-2], 1))
    b_zero = _zero_point(op, 3, (b_shape[-1],))
    return [_integer_matmul(op, (op.node(0), op.value(0)), (op.node(1), op.value(1)), a_zero, b_zero)]


_IntegerOperand = tuple[Node, Value]  # an 8-bit tensor's node, and its value (an array if known)


def _integer_matmul(
    op: _Op, a: _IntegerOperand, b: _IntegerOperand, a_zero: Node | None, b_zero: Node | None
) -> Node:
    """sum_k (a - a_zero) (b - b_zero) in int32: matmul_integer less the zero points' terms."""
    a_rank, b_rank = len(a[0].type.shape), len(b[0].type.shape)
    y = op.call("matmul_integer", [a[0], b[0]])
    if a_zero is not None:
        y = op.call("subtract", [y, op.call("multiply", [a_zero, _integer_sums(op, b[1], b[0], b_rank - 2)])])
    if b_zero is not None:
        y = op.call("subtract", [y, op.call("multiply", [_integer_sums(op, a[1], a[0], a_rank - 1), b_zero])])
    if a_zero is not None and b_zero is not None:
        k = op.const(np.array([a[0].type.shape[-1]], "int32"))
        y = op.call("add", [y, op.call("multiply", [k, op.call("multiply", [a_zero, b_zero])])])
    return y


def _quantized_matmul(op: _Op) -> Node | None:
    """MatMul(DequantizeLinear(a), DequantizeLinear(w)) as ONNX Runtime's QDQ fusion computes it:
    the exact int32 product of the 8-bit tensors less the zero points' terms (`_integer_matmul`),
    times a_scale * w_scale, where `a` is one scale (and zero point) for the tensor and the weights
    `w` [K, N] are known at import, one scale and zero point or one per column. None otherwise: the
    float computation of the dequantized values, as before."""
    found = [op.importer.dequantized.get(name) for name in op.proto.input[:2]]
    a, w = found
    if a is None or w is None or len(op.shape(0)) < 2 or len(op.shape(1)) != 2:
        return None
    weights = op.importer.values[w.quantized]
    other_axis = w.scale.size != 1 and (w.axis != 1 or w.scale.size != op.shape(1)[1])
    if a.scale.size != 1 or a.zero.size != 1 or not isinstance(weights, np.ndarray) or other_axis:
        return None
    if w.zero.size not in (1, w.scale.size):
        return None
    a_q, w_q = op.importer.node_of(a.quantized), op.importer.node_of(w.quantized)
    a_zero = op.const(a.zero.astype(np.int32).reshape(1)) if a.zero.any() else None
    w_zero = op.const(w.zero.astype(np.int32).reshape(-1)) if w.zero.any() else None
    sums = _integer_matmul(op, (a_q, op.importer.values[a.quantized]), (w_q, weights), a_zero, w_zero)
    scale = op.const((a.scale.reshape(1) * w.scale.reshape(-1)).astype(np.float32))
    return op.call("multiply", [op.call("cast", [sums], dtype="float32"), scale])


def _integer_sums(op: _Op, value: Value, node: Node, axis: int) -> Node:
    """The int32 sums of an 8-bit tensor over `axis` (kept): computed here for weights known at
    import."""
    known = value.data if isinstance(value, Constant) else value if isinstance(value, np.ndarray) else None
    if known is not None:
        return op.const(known.astype(np.int32).sum(axis=axis, keepdims=True, dtype=np.int32))
    return op.call("sum", [op.call("cast", [node], dtype="int32")], axes=(axis,), keepdims=True)


def _zero_point(op: _Op, i: int, vector_shape: tuple[int, ...]) -> Node | None:
    """MatMulInteger's zero point `i` as int32, shaped to broadcast (a vector along `vector_shape`'s
    long axis), or None when it is absent or known to be zero."""
    if not op.has(i):
        return None
    value = op.value(i)
    if isinstance(value, np.ndarray) and not value.any():
        return None
    size = math.prod(op.shape(i))
    if size not in (1, max(vector_shape)):
        per = "row" if i == 2 else "column"
        raise op.fail(f"zero point {i} has shape {op.shape(i)}: a scalar or one per {per} is supported")
    zero = op.call("cast", [op.node(i)], dtype="int32")
    return op.reshape(zero, (1,) if size == 1 else vector_shape)


def _einsum(op: _Op) -> list[Value]:
    """Sums, transposes and batched matmuls (compiler.graph.einsum). A rank-0 operand, held as shape
    (1,), names that one axis with a letter nothing else uses, which the sum then removes."""
    equation = str(op.attr("equation", ""))
    lhs, arrow, rhs = equation.partition("->")
    spare = next(c for c in string.ascii_letters if c not in equation)
    terms = [spare if not t.strip() and op.shape(i) == () else t for i, t in enumerate(lhs.split(","))]
    equation = ",".join(terms) + arrow + rhs
    operands = [op.node(i) for i in range(len(op.inputs))]
    y = einsum(op.importer.builder, op.hint(), equation, operands)
    scalar = "->" in equation and not equation.split("->")[1].strip()
    return [op.reshape(y, ()) if scalar else y]


def _softmax(graph_op: str) -> Converter:
    def convert(op: _Op) -> list[Value]:
        axis = op.axis(int(op.attr("axis", -1)), len(op.shape(0)))
        return [op.call(graph_op, [op.node(0)], axis=axis)]

    return convert


def _reduce_axes(op: _Op) -> tuple[int, ...] | None:
    """The axes a Reduce* node reduces, from an attribute, or from input 1 in ReduceSum (opset 13)
    and the rest (opset 18); None for none at all (noop_with_empty_axes)."""
    rank = len(op.shape(0))
    from_input = op.proto.op_type == "ReduceSum" or op.opset >= 18
    axes = (op.ints(1) if op.has(1) else []) if from_input else list(op.attr("axes", []))
    if not axes and op.attr("noop_with_empty_axes", 0):
        return None
    return tuple(sorted({op.axis(a, rank) for a in axes or range(rank)}))


def _reduced(op: _Op, reduced: Node, axes: tuple[int, ...]) -> Node:
    """A reduction computed with keepdims, shaped as the node's keepdims says (rank 0 as ONNX has)."""
    if op.attr("keepdims", 1):
        return reduced
    return op.reshape(reduced, tuple(d for i, d in enumerate(op.shape(0)) if i not in axes))


def _reduce_call(op: _Op, graph_op: str, x: Node, axes: tuple[int, ...], **attrs: object) -> Node:
    """`graph_op` over `axes` with the node's keepdims; all axes without it give rank 0."""
    keepdims = bool(op.attr("keepdims", 1))
    if keepdims or len(axes) < len(op.shape(0)):
        return op.call(graph_op, [x], axes=axes, keepdims=keepdims, **attrs)
    return op.reshape(op.call(graph_op, [x], axes=axes, keepdims=True, **attrs), ())


def _reduce(graph_op: str, before: str | None = None, after: str | None = None) -> Converter:
    """`graph_op` over the axes, of `before` (abs, square) of the input, then `after` (sqrt): ReduceL1
    is the sum of abs, ReduceL2 the sqrt of the sum of squares."""

    def convert(op: _Op) -> list[Value]:
        axes = _reduce_axes(op)  # first: axes that are model inputs make a value family
        x = op.node(0)
        if axes is None:  # no axes: the identity, of what the reduction sums
            axes = ()
        if before == "square":
            x = op.call("multiply", [x, x])
        elif before is not None:
            x = op.call(before, [x])
        out = _reduce_call(op, graph_op, x, axes) if axes else x
        return [out if after is None else op.call(after, [out])]

    return convert


def _reduce_log_sum_exp(op: _Op) -> list[Value]:
    """log(sum(exp(x - max))) + max: what ONNX defines, without overflow."""
    axes = _reduce_axes(op)
    x = op.node(0)
    if axes is None:
        return [op.call("log", [op.call("exp", [x])])]
    top = op.call("max", [x], axes=axes, keepdims=True)
    total = op.call("sum", [op.call("exp", [op.call("subtract", [x, top])])], axes=axes, keepdims=True)
    return [_reduced(op, op.call("add", [op.call("log", [total]), top]), axes)]


def _arg(graph_op: str) -> Converter:
    def convert(op: _Op) -> list[Value]:
        rank = len(op.shape(0))
        axis = op.axis(int(op.attr("axis", 0)), rank)
        last = bool(op.attr("select_last_index", 0))
        keepdims = bool(op.attr("keepdims", 1))
        if keepdims or rank > 1:
            return [op.call(graph_op, [op.node(0)], axis=axis, keepdims=keepdims, select_last_index=last)]
        out = op.call(graph_op, [op.node(0)], axis=axis, keepdims=True, select_last_index=last)
        return [op.reshape(out, ())]

    return convert


# Shape and layout: each converter has a numpy twin in FOLDS for compile-time integer tensors.


def _reshape_target(op: _Op, shape: Sequence[int], target: Sequence[int]) -> tuple[int, ...]:
    """Reshape's target with 0 (copy the input's dim, unless allowzero) and -1 (the rest) resolved."""
    allowzero = op.attr("allowzero", 0)
    dims = [shape[i] if d == 0 and not allowzero and i < len(shape) else d for i, d in enumerate(target)]
    size = math.prod(shape)
    if dims.count(-1) == 1:
        known = math.prod(d for d in dims if d != -1)
        if known > 0 and size % known == 0:
            dims[dims.index(-1)] = size // known
    if any(d < 0 for d in dims) or math.prod(dims) != size:
        raise op.fail(f"cannot reshape shape {tuple(shape)} to {tuple(target)}")
    return tuple(dims)


def _reshape(op: _Op) -> list[Value]:
    return [op.reshape(op.node(0), _reshape_target(op, op.shape(0), op.ints(1)))]


def _fold_reshape(op: _Op) -> list[np.ndarray]:
    return [op.static(0).reshape(_reshape_target(op, op.shape(0), op.ints(1)))]


def _flatten(op: _Op) -> list[Value]:
    shape = op.shape(0)
    axis = int(op.attr("axis", 1))
    if not -len(shape) <= axis <= len(shape):
        raise op.fail(f"axis {axis} is out of range for rank {len(shape)}")
    axis += len(shape) if axis < 0 else 0
    return [op.reshape(op.node(0), (math.prod(shape[:axis]), math.prod(shape[axis:])))]


def _transpose(op: _Op) -> list[Value]:
    rank = len(op.shape(0))
    perm = tuple(op.attr("perm", range(rank - 1, -1, -1)))
    if sorted(perm) != list(range(rank)):
        raise op.fail(f"perm {perm} is not a permutation of the {rank} axes")
    x = op.node(0)
    return [x if perm == tuple(range(rank)) else op.call("transpose", [x], axes=perm)]


def _concat(op: _Op) -> list[Value]:
    """Empty operands (the graph has no empty tensors; they are known at import) are left out."""
    axis = op.axis(int(op.attr("axis")), len(op.shape(0)))
    kept = [i for i, v in enumerate(op.inputs) if not (isinstance(v, np.ndarray) and v.size == 0)]
    if len(kept) == 1:
        return [op.value(kept[0])]
    return [op.call("concat", [op.node(i) for i in kept], axis=axis)]


def _fold_concat(op: _Op) -> list[np.ndarray]:
    axis = op.axis(int(op.attr("axis")), len(op.shape(0)))
    return [np.concatenate([op.static(i) for i in range(len(op.inputs))], axis=axis)]


def _unsqueeze_shape(op: _Op) -> tuple[int, ...]:
    shape = op.shape(0)
    axes = op.ints(1)
    rank = len(shape) + len(axes)
    normalized = sorted(op.axis(a, rank) for a in axes)
    if len(set(normalized)) != len(normalized):
        raise op.fail(f"axes {axes} repeat an axis")
    dims = iter(shape)
    return tuple(1 if i in normalized else next(dims) for i in range(rank))


def _unsqueeze(op: _Op) -> list[Value]:
    return [op.reshape(op.node(0), _unsqueeze_shape(op))]


def _fold_unsqueeze(op: _Op) -> list[np.ndarray]:
    return [op.static(0).reshape(_unsqueeze_shape(op))]


def _squeeze_shape(op: _Op) -> tuple[int, ...]:
    shape = op.shape(0)
    if op.has(1):
        axes = {op.axis(a, len(shape)) for a in op.ints(1)}
        if any(shape[a] != 1 for a in axes):
            raise op.fail(f"cannot squeeze axes {sorted(axes)} of shape {shape}: they must have size 1")
    else:
        axes = {a for a, d in enumerate(shape) if d == 1}
    return tuple(d for a, d in enumerate(shape) if a not in axes)


def _squeeze(op: _Op) -> list[Value]:
    return [op.reshape(op.node(0), _squeeze_shape(op))]


def _fold_squeeze(op: _Op) -> list[np.ndarray]:
    return [op.static(0).reshape(_squeeze_shape(op))]


def _expand_shape(op: _Op) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(op.shape(0), tuple(op.ints(1))))
    except ValueError:
        raise op.fail(f"cannot expand shape {op.shape(0)} to {tuple(op.ints(1))}") from None


def _expand(op: _Op) -> list[Value]:
    x, shape = op.node(0), _expand_shape(op)
    return [x if op.shape(0) == shape else op.call("broadcast_to", [x], shape=shape)]


def _fold_expand(op: _Op) -> list[np.ndarray]:
    return [np.broadcast_to(op.static(0), _expand_shape(op)).copy()]


def _slice_bounds(op: _Op) -> list[tuple[int, int, int]]:
    """(start, end, step) for every axis, normalized and clamped as ONNX's Slice does."""
    shape = op.shape(0)
    starts, ends = op.ints(1), op.ints(2)
    axes = [op.axis(a, len(shape)) for a in op.ints(3)] if op.has(3) else list(range(len(starts)))
    steps = op.ints(4) if op.has(4) else [1] * len(starts)
    if len(set(axes)) != len(axes) or not len(starts) == len(ends) == len(axes) == len(steps):
        raise op.fail("starts, ends, axes and steps must have one entry per sliced axis, axes unique")
    bounds = [(0, d, 1) for d in shape]
    for start, end, axis, step in zip(starts, ends, axes, steps):
        dim = shape[axis]
        if step == 0:
            raise op.fail("a step of 0")
        start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
        if step > 0:
            bounds[axis] = (_clamp(start, 0, dim), _clamp(end, 0, dim), step)
        else:  # end -1 stands for "before index 0"
            bounds[axis] = (_clamp(start, 0, dim - 1), _clamp(end, -1, dim - 1), step)
    return bounds


def _clamp(value: int, low: int, high: int) -> int:
    return min(max(value, low), high)


def _slice(op: _Op) -> list[Value]:
    x, bounds = op.node(0), _slice_bounds(op)
    shape = tuple(len(range(*b)) for b in bounds)
    if 0 in shape:  # nothing to compute: known now
        return [np.zeros(shape, op.dtype(0))]
    # Axes read backwards (a negative step) are gathers of their rows; the others one slice.
    backwards = {axis: b for axis, b in enumerate(bounds) if b[2] < 0}
    forward = [(0, d, 1) if axis in backwards else b for axis, (b, d) in enumerate(zip(bounds, op.shape(0)))]
    if any(b != (0, d, 1) for b, d in zip(forward, op.shape(0))):
        begin, end, strides = (tuple(b[i] for b in forward) for i in range(3))
        x = op.call("slice", [x], begin=begin, end=end, strides=strides)
    for axis, (start, stop, step) in backwards.items():
        rows = np.arange(start, stop, step, dtype=np.int64)
        x = op.call("take", [x, op.const(rows)], axis=axis)
    return [x]


def _fold_slice(op: _Op) -> list[np.ndarray]:
    index = tuple(slice(start, None if end < 0 else end, step) for start, end, step in _slice_bounds(op))
    return [op.static(0)[index]]


def _split_sizes(op: _Op, dim: int) -> list[int]:
    """Split's part sizes: the `split` input, else num_outputs parts (opset 18: the last one
    smaller), else one equal part per output."""
    if op.has(1):
        sizes = op.ints(1)
    elif op.attr("num_outputs") is not None:
        parts = int(op.attr("num_outputs"))
        chunk = math.ceil(dim / parts)
        sizes = [chunk] * (parts - 1) + [dim - chunk * (parts - 1)]
    else:
        parts = len(op.proto.output)
        sizes = [dim // parts] * parts if dim % parts == 0 else []
    if sum(sizes) != dim or any(s < 0 for s in sizes) or not any(sizes):
        raise op.fail(f"cannot split a dimension of {dim} into {sizes or len(op.proto.output)} parts")
    return sizes


def _split(op: _Op) -> list[Value]:
    x, shape = op.node(0), op.shape(0)
    axis = op.axis(int(op.attr("axis", 0)), len(shape))
    parts: list[Value] = []
    offset = 0
    for size in _split_sizes(op, shape[axis]):
        if size == 0:  # empty: known at import (RotaryEmbedding's pass-through part of a full rotation)
            parts.append(np.empty(tuple(0 if a == axis else d for a, d in enumerate(shape)), op.dtype(0)))
            continue
        begin = tuple(offset if a == axis else 0 for a in range(len(shape)))
        end = tuple(offset + size if a == axis else d for a, d in enumerate(shape))
        parts.append(op.call("slice", [x], begin=begin, end=end, strides=(1,) * len(shape)))
        offset += size
    return parts


def _pad(op: _Op) -> list[Value]:
    if op.attr("mode", "constant") != "constant":
        raise op.fail(f"mode {op.attr('mode')!r} is not supported (constant only)")
    rank = len(op.shape(0))
    axes = [op.axis(a, rank) for a in op.ints(3)] if op.has(3) else list(range(rank))
    given = op.ints(1)
    if len(given) != 2 * len(axes):
        raise op.fail(f"pads {given} must have two entries per padded axis ({len(axes)} axes)")
    pads = [0] * 2 * rank
    for i, axis in enumerate(axes):
        pads[axis], pads[rank + axis] = given[i], given[len(axes) + i]
    if any(p < 0 for p in pads):
        raise op.fail(f"negative pads {given} are not supported")
    value = op.scalar(2) if op.has(2) else 0.0
    x = op.node(0)
    return [x if not any(pads) else op.call("pad", [x], pads=tuple(pads), value=value)]


def _gather_indices(op: _Op, axis: int) -> np.ndarray | None:
    """Constant indices, checked in range (run-time indices wrap or fault as the kernel decides)."""
    indices = op.value(1)
    if not isinstance(indices, np.ndarray):
        return None
    dim = op.shape(0)[axis]
    if indices.size and not (-dim <= indices.min() and indices.max() < dim):
        raise op.fail(f"indices out of range for a dimension of {dim}")
    return indices


def _gather(op: _Op) -> list[Value]:
    shape = op.shape(0)
    axis = op.axis(int(op.attr("axis", 0)), len(shape))
    indices = _gather_indices(op, axis)
    y = op.call("take", [op.node(0), op.node(1)], axis=axis)
    if indices is not None and indices.ndim == 0:
        y = op.reshape(y, shape[:axis] + shape[axis + 1 :])
    return [y]


def _gather_elements(op: _Op) -> list[Value]:
    axis = op.axis(int(op.attr("axis", 0)), len(op.shape(0)))
    return [op.call("gather_elements", [op.node(0), op.node(1)], axis=axis)]


def _fold_gather_elements(op: _Op) -> list[np.ndarray]:
    """numpy's twin (the onnx package's reference fails on some index shapes): indices wrap."""
    data, indices = op.static(0), op.static(1)
    axis = op.axis(int(op.attr("axis", 0)), data.ndim)
    return [np.take_along_axis(data, np.mod(indices, data.shape[axis]), axis)]


def _gather_nd(op: _Op) -> list[Value]:
    """The last axis of the indices splits into one index tensor per data axis (`gather_nd`). The
    first `batch_dims` axes index themselves: their index tensors are each position's own batch
    coordinates (constants)."""
    indices, data = op.shape(1), op.shape(0)
    batch = int(op.attr("batch_dims", 0))
    count, last = indices[-1], len(indices) - 1
    if not 0 <= batch < len(indices) or indices[:batch] != data[:batch]:
        raise op.fail(f"batch_dims {batch} does not fit data {data} and indices {indices}")
    if batch + count > len(data):
        raise op.fail(f"index tuples of {count} after {batch} batch axes exceed the data's rank {len(data)}")
    split: list[Node] = []
    for axis in range(batch):
        coordinate = np.arange(data[axis]).reshape((-1,) + (1,) * (last - axis - 1))
        split.append(op.const(np.broadcast_to(coordinate, indices[:-1]).astype(op.dtype(1))))
    for k in range(count):
        begin = (0,) * last + (k,)
        column = op.call(
            "slice", [op.node(1)], begin=begin, end=indices[:-1] + (k + 1,), strides=(1,) * len(indices)
        )
        split.append(op.reshape(column, indices[:-1]))
    y = op.call("gather_nd", [op.node(0), *split], axis=0)
    return [op.reshape(y, indices[:-1] + data[batch + count :])]


def _trilu(op: _Op) -> list[Value]:
    """A select under a mask of the last two axes (their sizes are static): a constant when the
    diagonal offset `k` is, else column - row compared with `k` at run time."""
    rows, cols = op.shape(0)[-2:]
    upper = bool(op.attr("upper", 1))
    zero = op.const(np.zeros((1,), op.dtype(0)))
    if op.has(1) and not isinstance(op.value(1), np.ndarray):
        offset = np.arange(cols, dtype=np.int64)[None, :] - np.arange(rows, dtype=np.int64)[:, None]
        k = op.reshape(op.node(1), (1,))
        keep = op.call("greater_equal" if upper else "less_equal", [op.const(offset), k])
        return [op.call("where", [keep, op.node(0), zero])]
    k_value = int(op.scalar(1)) if op.has(1) else 0
    mask = (np.triu if upper else np.tril)(np.ones((rows, cols), bool), k_value)
    return [op.call("where", [op.const(mask), op.node(0), zero])]


def _size(op: _Op) -> list[Value]:
    """The element count, known from the static shape."""
    return [np.array(math.prod(op.shape(0)), np.int64)]


def _fold_gather(op: _Op) -> list[np.ndarray]:
    axis = op.axis(int(op.attr("axis", 0)), len(op.shape(0)))
    _gather_indices(op, axis)
    return [np.take(op.static(0), op.static(1), axis=axis)]


# Tensors known at compile time.


def _constant(op: _Op) -> list[Value]:
    kinds: dict[str, Callable[[Any], np.ndarray]] = {
        "value": numpy_helper.to_array,
        "value_float": lambda v: np.array(v, np.float32),
        "value_floats": lambda v: np.array(v, np.float32),
        "value_int": lambda v: np.array(v, np.int64),
        "value_ints": lambda v: np.array(v, np.int64),
    }
    for key, make in kinds.items():
        if key in op.attrs:
            return [make(op.attrs[key])]
    raise op.fail(f"a Constant with {sorted(op.attrs)} is not supported")


def _shape(op: _Op) -> list[Value]:
    shape = op.shape(0)
    start, end = int(op.attr("start", 0)), op.attr("end")
    return [np.array(shape[start : len(shape) if end is None else int(end)], np.int64)]


def _constant_of_shape(op: _Op) -> list[Value]:
    fill = op.attr("value")
    value = numpy_helper.to_array(fill).reshape(-1) if fill is not None else np.zeros(1, np.float32)
    return [np.full(tuple(op.ints(0)), value[0], value.dtype)]


def _range(op: _Op) -> list[Value]:
    start, limit, delta = (op.static(i).reshape(()) for i in range(3))
    if delta == 0:
        raise op.fail("a delta of 0")
    count = max(math.ceil((limit - start) / delta), 0)
    return [(start + np.arange(count) * delta).astype(start.dtype)]


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ONNX's integer Div truncates toward zero (numpy's // floors)."""
    if a.dtype.kind in "fc":
        return np.true_divide(a, b).astype(np.result_type(a, b))
    return (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(np.result_type(a, b))


def _fold_binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Fold:
    return lambda op: [fn(op.static(0), op.static(1))]


CONVERTERS: dict[str, Converter] = {
    **{
        onnx_op: _unary(graph_op)
        for onnx_op, graph_op in {
            "Relu": "relu",
            "Sigmoid": "sigmoid",
            "Tanh": "tanh",
            "Erf": "erf",
            "Exp": "exp",
            "Log": "log",
            "Sqrt": "sqrt",
            "Neg": "negative",
            "Abs": "abs",
            "HardSwish": "hardswish",
            "Floor": "floor",
            "Ceil": "ceil",
            "Round": "round",
            "Sign": "sign",
            "Reciprocal": "reciprocal",
        }.items()
    },
    **{
        onnx_op: _binary(graph_op)
        for onnx_op, graph_op in {
            "Add": "add",
            "Sub": "subtract",
            "Mul": "multiply",
            "Div": "divide",
            "Equal": "equal",
            "Less": "less",
            "LessOrEqual": "less_equal",
            "Greater": "greater",
            "GreaterOrEqual": "greater_equal",
            "And": "logical_and",
            "Or": "logical_or",
            "Xor": "logical_xor",
            "BitwiseAnd": "bitwise_and",
            "BitwiseOr": "bitwise_or",
            "BitwiseXor": "bitwise_xor",
        }.items()
    },
    "Not": _unary("logical_not"),
    "IsNaN": _unary("isnan"),
    "Where": _where,
    "CumSum": _cumsum,
    "CastLike": _cast_like,
    "Pow": _pow,
    "Mod": _mod,
    "Max": _variadic("maximum"),
    "Sum": _variadic("add"),
    "Mean": _mean,
    "LRN": _local_response_norm,
    "Min": _variadic("minimum"),
    "Clip": _clip,
    "HardSigmoid": _hard_sigmoid,
    "LeakyRelu": _leaky_relu,
    "Gelu": _gelu,
    "Elu": _elu(1.0),
    "Selu": _elu(1.67326319217681884765625, 1.05070102214813232421875),
    "Celu": _elu(1.0, celu=True),
    "Softplus": lambda op: [_softplus(op)],
    "Mish": _mish,
    "Softsign": _softsign,
    "PRelu": _prelu,
    "Identity": _identity,
    "Dropout": _dropout,
    "Cast": _cast,
    "QuantizeLinear": _quantize_linear,
    "BitShift": lambda op: [
        op.call("shift_left" if op.attr("direction") == "LEFT" else "shift_right", [op.node(0), op.node(1)])
    ],
    "BitwiseNot": _unary("bitwise_not"),
    "DequantizeLinear": _dequantize_linear,
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "Resize": _resize,
    "BatchNormalization": _batch_norm,
    "MaxPool": _max_pool,
    "AveragePool": _average_pool,
    "GlobalAveragePool": _global_pool("mean"),
    "GlobalMaxPool": _global_pool("max"),
    "LayerNormalization": _layer_norm,
    "InstanceNormalization": _instance_norm,
    "GroupNormalization": _group_norm,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "MatMulInteger": _matmul_integer,
    "Einsum": _einsum,
    "Softmax": _softmax("softmax"),
    "LogSoftmax": _softmax("log_softmax"),
    **{
        onnx_op: _reduce(graph_op)
        for onnx_op, graph_op in {
            "ReduceMean": "mean",
            "ReduceSum": "sum",
            "ReduceProd": "prod",
            "ReduceMax": "max",
            "ReduceMin": "min",
        }.items()
    },
    "ReduceL1": _reduce("sum", before="abs"),
    "ReduceL2": _reduce("sum", before="square", after="sqrt"),
    "ReduceSumSquare": _reduce("sum", before="square"),
    "ReduceLogSumExp": _reduce_log_sum_exp,
    "ArgMax": _arg("argmax"),
    "ArgMin": _arg("argmin"),
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Transpose": _transpose,
    "Concat": _concat,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Expand": _expand,
    "Slice": _slice,
    "Split": _split,
    "Pad": _pad,
    "Gather": _gather,
    "GatherElements": _gather_elements,
    "GatherND": _gather_nd,
    "Trilu": _trilu,
    "Constant": _constant,
    "Shape": _shape,
    "Size": _size,
    "ConstantOfShape": _constant_of_shape,
    "Range": _range,
}

# The most elements a float input of a node folded at import may have (see `_Op.foldable`).
_SMALL_FLOAT_FOLD = 64

# The operators whose converters give compile-time values themselves.
CONVERTS_CONSTANTS = frozenset(
    {"Constant", "ConstantOfShape", "Range", "Shape", "Size", "Cast", "CastLike", "Identity", "Dropout"}
)

# The numpy twins that compute shape arithmetic on compile-time tensors (the others fold with ONNX's
# reference implementation).
FOLDS: dict[str, Fold] = {
    "Add": _fold_binary(np.add),
    "Sub": _fold_binary(np.subtract),
    "Mul": _fold_binary(np.multiply),
    "Div": _fold_binary(_divide),
    "Reshape": _fold_reshape,
    "Concat": _fold_concat,
    "Unsqueeze": _fold_unsqueeze,
    "Squeeze": _fold_squeeze,
    "Expand": _fold_expand,
    "Slice": _fold_slice,
    "Gather": _fold_gather,
    "GatherElements": _fold_gather_elements,
}
