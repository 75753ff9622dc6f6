"""The graph level's vocabulary: a model as one dataflow function over tensors with static shapes.

A `Module` is TVM Relax's `main` in miniature: inputs, named constants (the weights), and nodes that
are a `Call` of a graph operator (what the frontends produce and the passes rewrite), a `CallTIR` of
a PrimFunc of the module in destination-passing style (what fusion leaves: the kernel writes its
output into a buffer the executor owns), or a `CallDPSPacked` of a registered extern function in the
same style (`compiler.graph.extern`), which no pass looks into. Every node has exactly one output
tensor; nodes are immutable and compare by identity, so passes rebuild the graph instead of editing it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeAlias

import numpy as np

from compiler.arith import largest
from compiler.dtypes import DTYPES as DTYPES
from compiler.dtypes import FLOAT_DTYPES, INT_DTYPES
from compiler.ir import Expr, PrimFunc
from compiler.printer import expr_str

# The tensors a model computes with (`compiler.dtypes.DTYPES`): floats for its activations and weights,
# integers for token ids, positions, pixels and quantized values, bools for masks and comparisons.
# Indices (of gathers, embeddings) are int32 or int64, as ONNX allows.
INDEX_DTYPES = ("int32", "int64")
NUMERIC_DTYPES = FLOAT_DTYPES + INT_DTYPES

AttrValue: TypeAlias = "int | float | str | bool | tuple[AttrValue, ...] | None"


class GraphError(ValueError):
    """A model the graph level cannot represent or a malformed graph; names the node and the op."""

    def __init__(self, node: str, op: str, reason: str) -> None:
        super().__init__(node, op, reason)
        self.node = node
        self.op = op
        self.reason = reason

    def __str__(self) -> str:
        return f"node {self.node!r} ({self.op}): {self.reason}"


class EmptyTensorError(GraphError):
    """An operator asked to compute on an empty tensor (a size of 0): the graph has none, as
    nothing computes on them (the frontends fold what they would compute)."""


@dataclass(frozen=True)
class TensorType:
    """A tensor's dimensions and element type. A dimension is a number, or in a module made for a
    range of sizes (`compiler.graph.symbolic`, after fusion) an int64 expression of size vars
    (`compiler.ir.SizeVar`). Everything before fusion is static and reads `shape`."""

    dims: tuple[int | Expr, ...]
    dtype: str

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.dims)

    @property
    def shape(self) -> tuple[int, ...]:
        """The dimensions of a static tensor (a ValueError for a symbolic one)."""
        if not self.is_static:
            raise ValueError(f"{self} has symbolic dimensions where a static shape is needed")
        return self.dims  # type: ignore[return-value]

    @property
    def size(self) -> int:
        """Elements, at the largest value of each size var: what storage for the tensor must hold."""
        return int(np.prod([largest(d) for d in self.dims], dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    def __str__(self) -> str:
        dims = ", ".join(str(d) if isinstance(d, int) else expr_str(d) for d in self.dims)
        return f"Tensor(({dims}{',' if len(self.dims) == 1 else ''}), {self.dtype!r})"


@dataclass(frozen=True, eq=False)
class Node(ABC):
    """One tensor of the graph. `name` is unique within a module (the printer and errors use it)."""

    name: str

    @property
    @abstractmethod
    def type(self) -> TensorType: ...

    @property
    def args(self) -> tuple[Node, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class Input(Node):
    tensor_type: TensorType

    @property
    def type(self) -> TensorType:
        return self.tensor_type


@dataclass(frozen=True, eq=False)
class Constant(Node):
    """A named constant (a weight); its data is never written."""

    data: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        self.data.setflags(write=False)

    @property
    def type(self) -> TensorType:
        return TensorType(tuple(self.data.shape), str(self.data.dtype))


@dataclass(frozen=True, eq=False)
class Apply(Node):
    """A tensor computed from others: what Call and CallTIR share."""

    call_args: tuple[Node, ...]
    tensor_type: TensorType

    @property
    def type(self) -> TensorType:
        return self.tensor_type

    @property
    def args(self) -> tuple[Node, ...]:
        return self.call_args


@dataclass(frozen=True, eq=False)
class Call(Apply):
    """A graph operator applied to tensors (`compiler.graph.op.OPS[op]`), with its attributes."""

    op: str
    attrs: Attrs


@dataclass(frozen=True, eq=False)
class DPSCall(Apply):
    """A call in destination-passing style: the executor runs it as one step that writes its output
    into storage the memory plan gives it. What CallTIR and CallDPSPacked share."""


@dataclass(frozen=True, eq=False)
class CallTIR(DPSCall):
    """A call of the module's PrimFunc `func`: its parameters are `args` then one output of `type`.
    `ops` lists the graph operators fused into it and `flops` what they compute, for the printer
    and the task table."""

    func: str
    ops: tuple[str, ...] = ()
    flops: int = 0


@dataclass(frozen=True, eq=False)
class CallDPSPacked(DPSCall):
    """A call of the extern function registered as `func` (Relax's `call_dps_packed`): it takes
    `args`, then one output of `type`, and writes the output. It is held by name, so the function is
    looked up when the module is built or run, and it is opaque: no pass fuses, folds or tunes it."""

    func: str


@dataclass(frozen=True)
class Attrs(Mapping[str, AttrValue]):
    """An operator's attributes: an immutable, hashable mapping of plain values (lists become
    tuples), so two calls with the same attributes compare equal."""

    items_: tuple[tuple[str, AttrValue], ...] = ()

    @staticmethod
    def of(values: Mapping[str, object]) -> Attrs:
        return Attrs(tuple(sorted((k, _freeze(v)) for k, v in values.items())))

    def __getitem__(self, key: str) -> AttrValue:
        for k, v in self.items_:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self.items_)

    def __len__(self) -> int:
        return len(self.items_)

    def __str__(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.items_)


def _freeze(value: object) -> AttrValue:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.generic):
        return _freeze(value.item())
    if value is None or isinstance(value, (int, float, str, bool)):
        return value
    raise TypeError(
        f"attribute values must be numbers, strings or tuples of them, got {type(value).__name__}"
    )


@dataclass(frozen=True)
class Module:
    """A model: `inputs` in order, the `outputs` it returns, and the PrimFuncs its CallTIRs call.

    The graph level has no rank-0 tensors: a scalar is held as shape (1,). `scalar_inputs` and
    `scalar_outputs` are the positions of the inputs and outputs the model's caller sees as rank 0
    (as ONNX Runtime and PyTorch give them); the compiled model takes and returns those with shape ()."""

    inputs: tuple[Input, ...]
    outputs: tuple[Node, ...]
    funcs: Mapping[str, PrimFunc] = field(default_factory=dict)
    scalar_inputs: frozenset[int] = frozenset()
    scalar_outputs: frozenset[int] = frozenset()

    def nodes(self) -> list[Node]:
        """Every node the outputs depend on, each after its arguments (inputs first, in order)."""
        order: list[Node] = list(self.inputs)
        seen = {id(n) for n in order}
        for out in self.outputs:
            _post_order(out, seen, order)
        return order

    def constants(self) -> list[Constant]:
        return [n for n in self.nodes() if isinstance(n, Constant)]

    def calls(self) -> list[Call | CallTIR]:
        return [n for n in self.nodes() if isinstance(n, (Call, CallTIR))]

    def users(self) -> dict[int, list[Node]]:
        """For each node's id, the nodes that take it as an argument (once per use)."""
        out: dict[int, list[Node]] = {id(n): [] for n in self.nodes()}
        for n in self.nodes():
            for a in n.args:
                out[id(a)].append(n)
        return out

    def script(self) -> str:
        from compiler.graph.printer import module_script

        return module_script(self)


def _post_order(root: Node, seen: set[int], order: list[Node]) -> None:
    """Iterative, so that a deep model (hundreds of layers) does not hit Python's recursion limit."""
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded:
            seen.add(id(node))
            order.append(node)
            continue
        stack.append((node, True))
        stack.extend((a, False) for a in reversed(node.args) if id(a) not in seen)


RewriteFn = Callable[[Node, tuple[Node, ...]], Node | None]


def rewrite(module: Module, fn: RewriteFn) -> Module:
    """Rebuild `module` bottom-up: `fn(node, new_args)` returns the node's replacement (or None to keep
    it, rebuilt over the new arguments when they changed). Inputs are kept."""
    memo: dict[int, Node] = {}
    for node in module.nodes():
        args = tuple(memo[id(a)] for a in node.args)
        replaced = fn(node, args)
        if replaced is None:
            replaced = with_args(node, args)
        memo[id(node)] = replaced
    return replace(module, outputs=tuple(memo[id(o)] for o in module.outputs))


def with_args(node: Node, args: Sequence[Node]) -> Node:
    """`node` over new arguments (itself when they are the same objects)."""
    if all(a is b for a, b in zip(args, node.args)):
        return node
    if not isinstance(node, Apply):
        raise TypeError(f"{type(node).__name__} has no arguments")
    return replace(node, call_args=tuple(args))


def name_supply(module: Module) -> Callable[[str], str]:
    """A generator of names unused in `module` (nor returned before), for the nodes a pass adds."""
    from compiler.names import unique_name

    used = {n.name for n in module.nodes()}

    def fresh(hint: str) -> str:
        name = unique_name(hint, used, sep="_")
        used.add(name)
        return name

    return fresh
