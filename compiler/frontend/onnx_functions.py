"""ONNX defines many operators as functions of others (Attention, RMSNormalization, RotaryEmbedding,
the losses, Swish, Shrink, ...). An operator the importer has no converter for is imported as its
body, instantiated for the node's attributes and input types: the same expansion ONNX's own
`_expanded` test models hold, so every such operator is as correct as the operators its body uses."""

from __future__ import annotations

from typing import Any

import onnx
from onnx import helper

# Nested expansions (a body calling another function) stop here: ONNX's deepest is two levels.
MAX_DEPTH = 4


def function_body(
    node: onnx.NodeProto, opset: int, input_types: list[onnx.TypeProto]
) -> onnx.FunctionProto | None:
    """The body ONNX defines for `node` at `opset` (None when its operator is not a function):
    context-dependent bodies are built for the node's attributes and input types."""
    if node.domain not in ("", "ai.onnx") or not onnx.defs.has(node.op_type, opset):
        return None
    # Any: the onnx package's type stubs omit OpSchema's function accessors.
    schema: Any = onnx.defs.get_schema(node.op_type, opset)
    body = onnx.FunctionProto()
    if schema.has_context_dependent_function:
        version = _version(schema.context_dependent_function_opset_versions, opset)
        if version is None:
            return None
        types = [t.SerializeToString() for t in input_types]
        data = schema.get_context_dependent_function_with_opset_version(
            version, node.SerializeToString(), types
        )
    elif schema.has_function:
        version = _version(schema.function_opset_versions, opset)
        if version is None:
            return None
        data = schema.get_function_with_opset_version(version)
    else:
        return None
    body.ParseFromString(data)
    if not body.node or any(_has_subgraph(inner) for inner in body.node):
        return None
    _add_schema_defaults(body, schema)
    return body


def _add_schema_defaults(body: onnx.FunctionProto, schema: Any) -> None:
    """An attribute the caller omits takes the schema's default (MeanVarianceNormalization's axes),
    which a body built from the schema does not always carry itself."""
    present = {a.name for a in body.attribute_proto}
    for name, attribute in schema.attributes.items():
        default = attribute.default_value
        if name not in present and default.type != onnx.AttributeProto.UNDEFINED:
            copy = body.attribute_proto.add()
            copy.CopyFrom(default)
            copy.name = name


def _has_subgraph(node: onnx.NodeProto) -> bool:
    """Control flow (Range's body is a Loop), which the importer refuses by name."""
    graphs = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    return any(a.type in graphs for a in node.attribute)


def _version(versions: list[int], opset: int) -> int | None:
    """The newest body defined at or before the model's opset, else the oldest: a body written
    later for an operator unchanged since (Shrink's, at 18) computes the same, read at its own
    opset (`body_opset`)."""
    return max((v for v in versions if v <= opset), default=min(versions, default=None))


def body_opset(body: onnx.FunctionProto, opset: int) -> int:
    """The ai.onnx opset the body's nodes are written in."""
    return next((o.version for o in body.opset_import if o.domain in ("", "ai.onnx")), opset)


def instantiate(
    node: onnx.NodeProto, body: onnx.FunctionProto, scope: str
) -> tuple[list[onnx.NodeProto], list[str]]:
    """The body's nodes reading `node`'s inputs, with every tensor of their own renamed under `scope`
    and attribute references resolved from `node` (or the body's defaults); and the names the body
    gives `node`'s outputs, in order."""
    names = {formal: actual for formal, actual in zip(body.input, node.input)}
    names.update({formal: f"{scope}/{formal}" for formal in body.output})
    given = {a.name: a for a in node.attribute}
    defaults = {a.name: a for a in body.attribute_proto}
    nodes = []
    for i, inner in enumerate(body.node):
        copy = onnx.NodeProto()
        copy.CopyFrom(inner)
        copy.name = f"{scope}/{inner.name or f'{inner.op_type}_{i}'}"
        copy.ClearField("input")
        copy.input.extend(_rename(n, names, scope) for n in inner.input)
        copy.ClearField("output")
        copy.output.extend(_rename(n, names, scope) for n in inner.output)
        copy.ClearField("attribute")
        copy.attribute.extend(_resolved(inner.attribute, given, defaults))
        nodes.append(copy)
    return nodes, [names[formal] for formal in body.output]


def _rename(name: str, names: dict[str, str], scope: str) -> str:
    """An omitted optional tensor stays omitted; the body's own tensors are scoped."""
    if not name:
        return name
    return names.setdefault(name, f"{scope}/{name}")


def _resolved(
    attributes: list[onnx.AttributeProto],
    given: dict[str, onnx.AttributeProto],
    defaults: dict[str, onnx.AttributeProto],
) -> list[onnx.AttributeProto]:
    """A reference to the caller's attribute takes the caller's value, else the body's default, else
    is dropped (the inner operator's own default applies), as ONNX's function semantics say."""
    out = []
    for attribute in attributes:
        if not attribute.ref_attr_name:
            out.append(attribute)
            continue
        source = given.get(attribute.ref_attr_name) or defaults.get(attribute.ref_attr_name)
        if source is None:
            continue
        value = helper.get_attribute_value(source)
        out.append(helper.make_attribute(attribute.name, value, attr_type=source.type))
    return out
