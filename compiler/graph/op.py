"""Graph operators: each declares once what every part of the graph level needs from it.

An `OpDef` gives the output type from the argument types and attributes (and refuses what it cannot
compute, with the reason), the te compute that fusion composes into PrimFuncs, the numpy reference
that constant folding and the tests use, its flop count for the task table, and its fusion pattern.
Operators register themselves in `OPS` by name (the modules of `compiler/graph/ops/`); the frontends
speak only these names.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from compiler import te
from compiler.graph.ir import Attrs, AttrValue, Call, GraphError, Node, TensorType


class Pattern(enum.IntEnum):
    """How an operator fuses, in TVM's order (OpPatternKind): a lower kind fuses more freely."""

    ELEMWISE = 0  # out[i] = f(in[i]) for every input of the output's shape
    BROADCAST = 1  # elementwise after numpy broadcasting of the inputs
    INJECTIVE = 2  # each output element reads one input element (reshape, transpose, slice, concat)
    REDUCTION = 3  # reduces over some axes (pooling, softmax, norms, mean)
    ANCHOR = 4  # conv2d, matmul: elementwise and broadcast consumers fuse into its output
    OPAQUE = 8  # never fused


InferType = Callable[[Sequence[TensorType], Attrs], TensorType]
Compute = Callable[[Sequence[te.Tensor], Attrs, str], te.Tensor]
Reference = Callable[[Sequence[np.ndarray], Attrs], np.ndarray]
Flops = Callable[[Sequence[TensorType], TensorType, Attrs], int]


class OpError(ValueError):
    """Raised by an operator's type rule: the arguments or attributes it cannot compute. The caller
    adds the node's name and op (GraphError)."""


def check(cond: bool, reason: str) -> None:
    if not cond:
        raise OpError(reason)


@dataclass(frozen=True)
class OpDef:
    """`compute(inputs, attrs, name)` returns the output te tensor named `name` (intermediate
    tensors it needs are named after it); `reference` computes the same in numpy."""

    name: str
    pattern: Pattern
    infer_type: InferType
    compute: Compute
    reference: Reference
    flops: Flops


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"graph operator {op.name!r} registered twice")
    OPS[op.name] = op
    return op


def call(name: str, op: str, args: Sequence[Node], attrs: Mapping[str, object] | None = None) -> Call:
    """A checked Call node: the op exists, the arguments have types it accepts, and its output
    type is inferred. Anything else is a GraphError naming the node, the op and the reason."""
    if op not in OPS:
        raise GraphError(name, op, "unsupported operator")
    frozen = Attrs.of(attrs or {})
    try:
        out = OPS[op].infer_type([a.type for a in args], frozen)
    except OpError as e:
        raise GraphError(name, op, str(e)) from None
    return Call(name, tuple(args), out, op=op, attrs=frozen)


def attr_ints(attrs: Attrs, key: str) -> tuple[int, ...]:
    """A tuple-of-ints attribute (the type rules have checked it)."""
    value = attrs[key]
    assert isinstance(value, tuple)
    return tuple(int(v) for v in value)  # type: ignore[arg-type]


def attr_int(attrs: Attrs, key: str) -> int:
    value = attrs[key]
    assert isinstance(value, int)
    return value


def attr_float(attrs: Attrs, key: str) -> float:
    value = attrs[key]
    assert isinstance(value, (int, float))
    return float(value)


__all__ = [
    "OPS",
    "AttrValue",
    "Compute",
    "Flops",
    "InferType",
    "OpDef",
    "OpError",
    "Pattern",
    "Reference",
    "attr_float",
    "attr_int",
    "attr_ints",
    "call",
    "check",
    "register",
]
