"""The meaning of a parsed expression program: names resolved, reductions found, extents inferred
and every index proven in bounds, so te and the numpy interpreter only ever see valid programs.

A call is a reduction when its trailing arguments are bare names that are neither output axes nor
tensors: `sum(A[i, k] * B[k, j], k)`. An index variable's extent comes from a place where it is a
whole index of a tensor of known shape; index expressions must be affine in the index variables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from compiler.ops import BY_SYNTAX, Op
from compiler.workloads.expr_syntax import (
    Access,
    BinOp,
    FuncCall,
    Name,
    Neg,
    Node,
    Num,
    Statement,
    error,
    node_text,
)
from compiler.workloads.workload import MAX_RANK, WorkloadError

REDUCERS = ("sum", "max", "min")
# The ops the language calls as functions, by name (exp(x), max(a, b)): see compiler.ops.
CALLABLE_OPS = {name: op for name, op in BY_SYNTAX.items() if name.isidentifier()}
FUNCTIONS = frozenset(REDUCERS) | CALLABLE_OPS.keys()


@dataclass(frozen=True)
class Compute:
    """One checked statement: `name[axes] = value`, or a reduction of `value` over `reduce_axes`."""

    name: str
    axes: tuple[str, ...]
    shape: tuple[int, ...]
    value: Node
    combiner: str | None = None  # "sum" | "max" | "min"
    reduce_axes: tuple[str, ...] = ()
    reduce_extents: tuple[int, ...] = ()


@dataclass(frozen=True)
class Program:
    inputs: tuple[tuple[str, tuple[int, ...]], ...]  # in order of first use: the PrimFunc's param order
    computes: tuple[Compute, ...]  # the last one is the output


def check(stmts: list[Statement], inputs: dict[str, tuple[int, ...]]) -> Program:
    """Resolve `stmts` against `inputs` (name -> shape); errors name the token and its position."""
    shapes = dict(inputs)
    reads: dict[str, None] = {}  # tensors read, in order of first use
    computes = []
    for st in stmts:
        c = _Statement(st, shapes).check(reads)
        shapes[c.name] = c.shape
        computes.append(c)
    for c, st in zip(computes[:-1], stmts):
        if c.name not in reads:
            raise error(f"tensor {c.name!r} is computed but never used", st.target.pos)
    for name in inputs:
        if name not in reads:
            raise WorkloadError(f"inputs.{name}", "input is not used by the expression")
    return Program(tuple((n, inputs[n]) for n in reads if n in inputs), tuple(computes))


class _Statement:
    """Checks one statement; index variables are its output axes plus its reduction variables."""

    def __init__(self, st: Statement, shapes: dict[str, tuple[int, ...]]) -> None:
        self.st, self.shapes = st, shapes
        self.vars: dict[str, Name] = {}  # index variable -> its defining occurrence
        self.extents: dict[str, tuple[int, str]] = {}  # variable -> (extent, where it was inferred)
        self.indices: list[tuple[str, int, Node]] = []  # (tensor, axis, index) to bounds-check

    def check(self, reads: dict[str, None]) -> Compute:
        st = self.st
        if st.target.name in self.shapes:
            raise error(f"tensor {st.target.name!r} is already defined", st.target.pos)
        self.declare(st.target, "a tensor")
        if len(st.axes) > MAX_RANK:
            raise error(f"rank {len(st.axes)} exceeds the limit of {MAX_RANK}", st.target.pos)
        for a in st.axes:
            self.define_var(a)
        combiner, source, reduce_vars = self.split_reduction(st.value)
        for r in reduce_vars:
            self.define_var(r)
        self.value(source, reads)
        for v in self.vars.values():
            if v.name not in self.extents:
                raise error(
                    f"cannot infer the extent of index variable {v.name!r}: it is never a whole index "
                    "of a tensor",
                    v.pos,
                )
        for tensor, axis, node in self.indices:
            self.check_bounds(tensor, axis, node)
        axes = tuple(a.name for a in st.axes)
        red = tuple(r.name for r in reduce_vars)
        return Compute(
            st.target.name,
            axes,
            tuple(self.extents[a][0] for a in axes),
            source,
            combiner,
            red,
            tuple(self.extents[r][0] for r in red),
        )

    def declare(self, name: Name, what: str) -> None:
        if name.name in FUNCTIONS:
            raise error(f"{name.name!r} is a function and cannot name {what}", name.pos)

    def define_var(self, name: Name) -> None:
        self.declare(name, "an index variable")
        if name.name in self.shapes or name.name == self.st.target.name:
            raise error(f"{name.name!r} is a tensor and cannot be an index variable", name.pos)
        if name.name in self.vars:
            raise error(f"index variable {name.name!r} appears twice", name.pos)
        self.vars[name.name] = name

    def reduce_vars(self, call: FuncCall) -> list[Name]:
        """The trailing arguments of `call` that name reduction variables."""
        out: list[Name] = []
        axes = {a.name for a in self.st.axes}
        for arg in reversed(call.args):
            if (
                not isinstance(arg, Name)
                or arg.name in axes
                or arg.name in self.shapes
                or arg.name in FUNCTIONS
            ):
                break
            out.insert(0, arg)
        return out

    def split_reduction(self, node: Node) -> tuple[str | None, Node, list[Name]]:
        if isinstance(node, FuncCall) and node.func in REDUCERS:
            red = self.reduce_vars(node)
            if red:
                if len(node.args) - len(red) != 1:
                    raise error(
                        f"{node.func} reduction takes one expression, then reduction variables", node.pos
                    )
                return node.func, node.args[0], red
        return None, node, []

    def value(self, node: Node, reads: dict[str, None]) -> None:
        if isinstance(node, Num):
            return
        if isinstance(node, Name):
            if node.name in self.vars:
                raise error(f"index variable {node.name!r} can only be used inside tensor indices", node.pos)
            if node.name in self.shapes:
                raise error(f"tensor {node.name!r} needs indices, as in {node.name}[...]", node.pos)
            raise error(f"unknown name {node.name!r}", node.pos)
        if isinstance(node, Access):
            self.access(node, reads)
            return
        if isinstance(node, (BinOp, Neg)):
            for child in (node.a, node.b) if isinstance(node, BinOp) else (node.a,):
                self.value(child, reads)
            return
        self.call(node)
        for arg in node.args:
            self.value(arg, reads)

    def call(self, node: FuncCall) -> None:
        if node.func in REDUCERS and self.reduce_vars(node):
            raise error(
                f"a {node.func} reduction must be the whole right-hand side of its statement", node.pos
            )
        if node.func == "sum":
            raise error("sum needs one expression, then reduction variables, as in sum(A[i, k], k)", node.pos)
        op = CALLABLE_OPS.get(node.func)
        if op is None:
            raise error(f"unknown function {node.func!r}", node.pos)
        arity = op.spec.arity
        if len(node.args) != arity:
            raise error(f"{node.func} takes {arity} argument(s), got {len(node.args)}", node.pos)

    def access(self, node: Access, reads: dict[str, None]) -> None:
        if node.tensor not in self.shapes:
            own = " (a statement cannot read its own output)" if node.tensor == self.st.target.name else ""
            raise error(f"unknown tensor {node.tensor!r}{own}", node.pos)
        shape = self.shapes[node.tensor]
        if len(node.indices) != len(shape):
            raise error(
                f"{node.tensor} has rank {len(shape)} but is indexed with {len(node.indices)}", node.pos
            )
        reads.setdefault(node.tensor)
        for axis, idx in enumerate(node.indices):
            self.affine(idx)
            if isinstance(idx, Name):
                self.infer(idx, shape[axis], f"{node.tensor} axis {axis} (position {idx.pos})")
            self.indices.append((node.tensor, axis, idx))

    def infer(self, var: Name, extent: int, where: str) -> None:
        known = self.extents.setdefault(var.name, (extent, where))
        if known[0] != extent:
            raise WorkloadError(
                "expr",
                f"inconsistent extents for index variable {var.name!r} at position {var.pos}: "
                f"{extent} from {where}, but {known[0]} from {known[1]}",
            )

    def affine(self, node: Node) -> tuple[dict[str, int], int]:
        """`node` as (coefficient per index variable, constant), or an error if it is not affine."""
        if isinstance(node, Num):
            if not isinstance(node.value, int):
                raise error(f"index must be an integer, found {node.value!r}", node.pos)
            return {}, node.value
        if isinstance(node, Name):
            if node.name in self.vars:
                return {node.name: 1}, 0
            if node.name in self.shapes:
                raise error(f"tensor {node.name!r} cannot be used in an index", node.pos)
            raise error(f"unknown index variable {node.name!r}", node.pos)
        if isinstance(node, Neg):
            terms, c = self.affine(node.a)
            return {k: -v for k, v in terms.items()}, -c
        if isinstance(node, BinOp) and node.op in "+-":
            (ta, ca), (tb, cb) = self.affine(node.a), self.affine(node.b)
            sign = 1 if node.op == "+" else -1
            terms = dict(ta)
            for k, v in tb.items():
                terms[k] = terms.get(k, 0) + sign * v
            return terms, ca + sign * cb
        if isinstance(node, BinOp) and node.op == "*":
            (ta, ca), (tb, cb) = self.affine(node.a), self.affine(node.b)
            if ta and tb:
                raise error("index is not affine: it multiplies two index variables", node.pos)
            scale, (terms, c) = (cb, (ta, ca)) if not tb else (ca, (tb, cb))
            return {k: v * scale for k, v in terms.items()}, c * scale
        what = "division" if isinstance(node, BinOp) else "tensor reads and calls"
        raise error(f"{what} not allowed in an index; indices are affine in the index variables", node.pos)

    def check_bounds(self, tensor: str, axis: int, node: Node) -> None:
        terms, c = self.affine(node)
        lo = c + sum(min(0, k * (self.extents[v][0] - 1)) for v, k in terms.items())
        hi = c + sum(max(0, k * (self.extents[v][0] - 1)) for v, k in terms.items())
        size = self.shapes[tensor][axis]
        if lo < 0 or hi >= size:
            raise error(
                f"index {node_text(node)} of {tensor} axis {axis} ranges over [{lo}, {hi}], "
                f"outside [0, {size - 1}]",
                node.pos,
            )


class Backend(Protocol):
    """What `evaluate` needs to turn a checked expression into te expressions or numpy arrays."""

    def number(self, value: int | float) -> Any: ...
    def var(self, name: str) -> Any: ...
    def load(self, tensor: str, indices: list[Any]) -> Any: ...
    def apply(self, op: Op, args: list[Any]) -> Any: ...


def evaluate(node: Node, backend: Backend, index: bool = False) -> Any:
    """Fold a checked expression bottom-up with `backend`; inside indices numbers stay Python ints."""
    if isinstance(node, Num):
        return node.value if index else backend.number(node.value)
    if isinstance(node, Name):
        return backend.var(node.name)
    if isinstance(node, Access):
        return backend.load(node.tensor, [evaluate(i, backend, True) for i in node.indices])
    if isinstance(node, FuncCall):
        return backend.apply(CALLABLE_OPS[node.func], [evaluate(a, backend) for a in node.args])
    if isinstance(node, Neg):
        return -evaluate(node.a, backend, index)
    a, b = evaluate(node.a, backend, index), evaluate(node.b, backend, index)
    op = BY_SYNTAX[node.op]
    if index and isinstance(a, int) and isinstance(b, int):
        return op.fold(a, b)  # constant index arithmetic stays a Python int
    return backend.apply(op, [a, b])


def op_count(node: Node) -> int:
    """Arithmetic operations per evaluation of `node`; index arithmetic is addressing, not flops."""
    if isinstance(node, BinOp):
        return 1 + op_count(node.a) + op_count(node.b)
    if isinstance(node, Neg):
        return 1 + op_count(node.a)
    if isinstance(node, FuncCall):
        return 1 + sum(op_count(a) for a in node.args)
    return 0
