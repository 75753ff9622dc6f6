"""The tensor-program IR: immutable expression and statement nodes.

Expressions are built with Python operators, as in TVM: `i + 1`, `i < n`, and `i == 0` give IR
nodes. `==` and `!=` give an `EqualOp`: an expression where one is expected (`te.select(i == 0, ...)`)
and, where Python wants a bool (`if`, dict keys, `in`), whether the two sides are the same
expression. Structural equality has a name, `structural_equal`; an expression has no truth value of
its own (`if i < n:` raises). Every expression carries its structural hash, computed once when it is
built, so expressions are cheap dictionary keys.

Statements are frozen dataclasses: `==` is structural equality. Variables are identified by name:
the code that creates variables (te, the schedule) keeps names unique inside a PrimFunc, which makes
printing, serializing and trace replay deterministic.

Each node says what its children are (`children()`, `with_children()`): `compiler.visit` walks and
rewrites every kind of node through them. Loops always start at 0. Leaf blocks hold one store (and an
optional init store for reductions); the only block that contains others is the implicit root, the
body of the PrimFunc.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, dataclass_transform

from compiler.dtypes import DTYPES, FLOAT_DTYPES, INDEX_DTYPE, INT_DTYPES, wrapped
from compiler.ops import Op

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled")
ITER_KINDS = ("S", "R", "O")  # spatial, reduce, ordered (the recurrence axis of a scan)


class IRError(TypeError):
    """A node that cannot exist: an op on operands of the wrong dtype, an unknown dtype."""


class SymbolicError(ValueError):
    """A symbolic dimension (a `SizeVar`) where only a number will do: the primitives, rules and
    analyses that do not take symbolic extents yet refuse them by name."""


def static_dim(dim: int | Expr, what: str) -> int:
    """`dim` as a number, or a SymbolicError naming `what` (which needs one)."""
    if isinstance(dim, int):
        return dim
    from compiler.printer import expr_str

    raise SymbolicError(
        f"{what}: the extent {expr_str(dim)} is symbolic; only static extents are supported here"
    )


def static_shape(shape: tuple[int | Expr, ...], what: str) -> tuple[int, ...]:
    return tuple(static_dim(d, what) for d in shape)


class Expr:
    """Base of expressions; Python operators build IR so compute lambdas read like math."""

    __slots__ = ("_hash",)
    _hash: int
    # The dataclass fields that make two nodes of a class the same expression.
    _key_fields: ClassVar[tuple[str, ...]] = ()
    # Declared, never set here: `expr_node` makes every concrete node a dataclass, and this says so
    # to the type checker, so `dataclasses.fields` accepts any node.
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    if TYPE_CHECKING:
        # Read-only: node kinds store it (Var, Binary) or derive it (Select, Load). For the type
        # checker only: at run time a property here would become the default of subclasses' fields.
        @property
        def dtype(self) -> str: ...

    def children(self) -> tuple[Expr, ...]:
        return ()

    def with_children(self, kids: Sequence[Expr]) -> Expr:
        """This node over `kids` in place of its children (the same node for a leaf)."""
        return self

    def _fields_hash(self) -> int:
        return hash((type(self), tuple(getattr(self, name) for name in self._key_fields)))

    def __hash__(self) -> int:
        """Structural, computed on first use and kept: many nodes are built (arith, te) and never
        hashed, and the ones that are become dictionary keys again and again."""
        try:
            return self._hash
        except AttributeError:
            h = self._fields_hash()
            _set(self, "_hash", h)
            return h

    def __eq__(self, other: object) -> EqualOp:  # type: ignore[override]  # TVM-style: builds `a == b`
        return EqualOp(self, other)

    def __ne__(self, other: object) -> NotEqualOp:  # type: ignore[override]  # TVM-style: builds `a != b`
        return NotEqualOp(self, other)

    def __bool__(self) -> bool:
        raise TypeError(
            f"an expression has no truth value ({type(self).__name__}); build conditions with "
            "te.all / te.any / te.select, or compare expressions with structural_equal"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt through __init__ in the receiving process: hashes of strings differ between
        # processes, so the cached hash must not travel.
        init = tuple(getattr(self, f.name) for f in dataclasses.fields(self) if f.init)
        return type(self), init

    def __add__(self, other: ExprLike) -> Expr:
        return binary(Op.ADD, self, other)

    def __radd__(self, other: ExprLike) -> Expr:
        return binary(Op.ADD, other, self)

    def __sub__(self, other: ExprLike) -> Expr:
        return binary(Op.SUB, self, other)

    def __rsub__(self, other: ExprLike) -> Expr:
        return binary(Op.SUB, other, self)

    def __mul__(self, other: ExprLike) -> Expr:
        return binary(Op.MUL, self, other)

    def __rmul__(self, other: ExprLike) -> Expr:
        return binary(Op.MUL, other, self)

    def __truediv__(self, other: ExprLike) -> Expr:
        return binary(Op.DIV, self, other)

    def __rtruediv__(self, other: ExprLike) -> Expr:
        return binary(Op.DIV, other, self)

    def __floordiv__(self, other: ExprLike) -> Expr:
        return binary(Op.FLOORDIV, self, other)

    def __mod__(self, other: ExprLike) -> Expr:
        return binary(Op.FLOORMOD, self, other)

    def __neg__(self) -> Expr:
        return binary(Op.SUB, const(0, self.dtype), self)

    def __lt__(self, other: ExprLike) -> Expr:
        return binary(Op.LT, self, other)

    def __le__(self, other: ExprLike) -> Expr:
        return binary(Op.LE, self, other)

    def __gt__(self, other: ExprLike) -> Expr:
        return binary(Op.GT, self, other)

    def __ge__(self, other: ExprLike) -> Expr:
        return binary(Op.GE, self, other)


class EqualOp:
    """`a == b` on expressions: the comparison `a == b` where an expression is expected, and whether
    `a` and `b` are the same expression where Python wants a bool."""

    __slots__ = ("a", "b")
    op: ClassVar[Op] = Op.EQ

    def __init__(self, a: Expr, b: object) -> None:
        self.a, self.b = a, b

    def __bool__(self) -> bool:
        return structural_equal(self.a, self.b)

    def as_expr(self) -> Expr:
        # `==` accepts any object (Python's contract), but only numbers and expressions compare.
        if not isinstance(self.b, Expr | EqualOp | int | float):
            raise TypeError(f"cannot compare an expression with {type(self.b).__name__} {self.b!r}")
        return binary(self.op, self.a, self.b)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.a!r}, {self.b!r})"


class NotEqualOp(EqualOp):
    """`a != b` on expressions: the comparison, or whether the two are different expressions."""

    __slots__ = ()
    op = Op.NE

    def __bool__(self) -> bool:
        return not structural_equal(self.a, self.b)


ExprLike = Expr | EqualOp | int | float | bool
E = TypeVar("E", bound=Expr)


@dataclass_transform(frozen_default=True, eq_default=False, field_specifiers=(field,))
def expr_node(cls: type[E]) -> type[E]:
    """Make an Expr subclass a frozen, slotted dataclass whose identity is its compared fields."""
    out = dataclass(frozen=True, eq=False, slots=True)(cls)
    out._key_fields = tuple(f.name for f in dataclasses.fields(out) if f.compare)
    return out


@expr_node
class Var(Expr):
    name: str
    dtype: str = INDEX_DTYPE

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            _check_dtype(self.dtype)


@expr_node
class SizeVar(Var):
    """A symbolic dimension: an int64 known only at run time, declared in [lo, hi] (both >= 1). It
    appears in buffer shapes and loop extents; a kernel reads its value from its arguments' shapes."""

    lo: int = 1
    hi: int = 1

    def __post_init__(self) -> None:
        if self.dtype != INDEX_DTYPE or not (1 <= self.lo <= self.hi):
            raise IRError(f"size var {self.name}: needs int64 and 1 <= lo <= hi, got {self.lo}..{self.hi}")


@expr_node
class Const(Expr):
    value: int | float | bool
    dtype: str

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            _check_dtype(self.dtype)


@expr_node
class Binary(Expr):
    """An op of two operands of one dtype (see `compiler.ops`)."""

    op: Op
    a: Expr
    b: Expr
    dtype: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        op, a, b = self.op, self.a, self.b
        dtype = a.dtype
        try:
            valid = op.arity == 2 and dtype in op.operands and b.dtype == dtype
        except AttributeError:  # not an Op
            valid = False
        if not valid:
            _check_operands(op, (a, b))
        _set(self, "dtype", "bool" if op.bool_result else dtype)

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)

    def with_children(self, kids: Sequence[Expr]) -> Expr:
        return Binary(self.op, kids[0], kids[1])


@expr_node
class Unary(Expr):
    """An op of one operand: a math function (exp, sqrt, ...) or logical not."""

    op: Op
    a: Expr
    dtype: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        op, a = self.op, self.a
        if not isinstance(op, Op) or op.arity != 1 or a.dtype not in op.operands:
            _check_operands(op, (a,))
        _set(self, "dtype", "bool" if op.bool_result else a.dtype)

    def children(self) -> tuple[Expr, ...]:
        return (self.a,)

    def with_children(self, kids: Sequence[Expr]) -> Expr:
        return Unary(self.op, kids[0])


@expr_node
class Select(Expr):
    cond: Expr
    true_value: Expr
    false_value: Expr

    def __post_init__(self) -> None:
        if self.cond.dtype != "bool":
            raise IRError(f"select: the condition must be bool, got {self.cond.dtype}")
        if self.true_value.dtype != self.false_value.dtype:
            raise IRError(
                f"select: branch dtypes differ ({self.true_value.dtype} vs {self.false_value.dtype})"
            )

    @property
    def dtype(self) -> str:
        return self.true_value.dtype

    def children(self) -> tuple[Expr, ...]:
        return (self.cond, self.true_value, self.false_value)

    def with_children(self, kids: Sequence[Expr]) -> Expr:
        return Select(kids[0], kids[1], kids[2])


@expr_node
class Cast(Expr):
    dtype: str
    value: Expr

    def __post_init__(self) -> None:
        _check_dtype(self.dtype)

    def children(self) -> tuple[Expr, ...]:
        return (self.value,)

    def with_children(self, kids: Sequence[Expr]) -> Expr:
        return Cast(self.dtype, kids[0])


SCOPES = ("global", "local")  # the storage scopes of a CPU: it has no shared or texture memory


@dataclass(frozen=True)
class Buffer:
    """A tensor of `shape` and `dtype`. `scope` is where an intermediate lives (TVM's storage scope):
    "global" (the stack when small, else the heap) or "local" (the stack; see `compiler.codegen`)."""

    name: str
    shape: tuple[int | Expr, ...]
    dtype: str
    scope: str = "global"

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    def __getitem__(self, indices: object) -> Load:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return Load(self, tuple(as_expr(i, INDEX_DTYPE) for i in indices))

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:  # static_dim raises on a symbolic dimension; the message is built only then
            n *= d if isinstance(d, int) else static_dim(d, f"the size of {self.name}")
        return n


@expr_node
class Load(Expr):
    buffer: Buffer
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    def children(self) -> tuple[Expr, ...]:
        return self.indices

    def with_children(self, kids: Sequence[Expr]) -> Expr:
        return Load(self.buffer, tuple(kids))


def structural_equal(a: object, b: object) -> bool:
    """Whether `a` and `b` are the same expression (or statement, function, or tuple of them)."""
    if a is b:
        return True
    if isinstance(a, Expr):
        if type(a) is not type(b) or hash(a) != hash(b):
            return False
        return all(
            structural_equal(getattr(a, name), getattr(b, name))
            for name in a._key_fields  # the same class, so the same fields
        )
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(structural_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


_set = object.__setattr__
_DTYPES = frozenset(DTYPES)


def _check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise IRError(f"unknown dtype {dtype!r}; expected one of {DTYPES}")


def _check_operands(op: Op, operands: tuple[Expr, ...]) -> None:
    """Raise the IRError that says why `op` cannot take `operands`."""
    spec = op.spec if isinstance(op, Op) else None
    if spec is None or spec.arity != len(operands):
        raise IRError(f"{op!r} is not an op of {len(operands)} operand(s)")
    dtype = operands[0].dtype
    if dtype not in spec.operands:
        raise IRError(f"{spec.name} takes {' or '.join(spec.operands)} operands, got {dtype}")
    if len(operands) > 1 and operands[1].dtype != dtype:
        raise IRError(f"{spec.name}: operand dtypes differ ({dtype} vs {operands[1].dtype}); use cast()")


class Stmt:
    """Base of statements."""

    def children(self) -> tuple[Stmt, ...]:
        return ()

    def with_children(self, kids: Sequence[Stmt]) -> Stmt:
        """This statement over `kids` in place of its child statements."""
        return self


@dataclass(frozen=True)
class BufferStore(Stmt):
    buffer: Buffer
    value: Expr
    indices: tuple[Expr, ...]


@dataclass(frozen=True)
class IterVar:
    """A block iteration variable over [0, extent); kind says how iterations may be reordered."""

    var: Var
    extent: int | Expr
    kind: str


@dataclass(frozen=True)
class Block(Stmt):
    """A leaf computation: iteration variables bound to loop expressions, an optional init, one store."""

    name: str
    iter_vars: tuple[IterVar, ...]
    bindings: tuple[Expr, ...]
    body: BufferStore
    init: BufferStore | None = None
    predicate: Expr = field(default_factory=lambda: Const(True, "bool"))
    annotations: tuple[tuple[str, object], ...] = ()
    # The name a schedule renamed the block from (decompose_reduction's update block, `Y` named
    # `Y_update` as in TVM). Handles, stored traces and schedule rules made before the rename name
    # the block so, and `schedule.tree.find_block` finds it by either name. It is the schedule's
    # bookkeeping, not the program: never printed, serialized, compared or hashed, so a program read
    # back from its script is the same program.
    former_name: str | None = field(default=None, compare=False)

    @property
    def is_reduction(self) -> bool:
        return any(iv.kind == "R" for iv in self.iter_vars)

    @property
    def handle_name(self) -> str:
        """The name a schedule's handles know the block by: the one it had before any rename."""
        return self.former_name or self.name


@dataclass(frozen=True)
class For(Stmt):
    var: Var
    extent: int | Expr
    body: Stmt
    kind: str = "serial"
    annotations: tuple[tuple[str, object], ...] = ()

    def children(self) -> tuple[Stmt, ...]:
        return (self.body,)

    def with_children(self, kids: Sequence[Stmt]) -> Stmt:
        return dataclasses.replace(self, body=kids[0])


@dataclass(frozen=True)
class SeqStmt(Stmt):
    stmts: tuple[Stmt, ...]

    def children(self) -> tuple[Stmt, ...]:
        return self.stmts

    def with_children(self, kids: Sequence[Stmt]) -> Stmt:
        return SeqStmt(tuple(kids))


@dataclass(frozen=True)
class IfThenElse(Stmt):
    cond: Expr
    then_case: Stmt
    else_case: Stmt | None = None

    def children(self) -> tuple[Stmt, ...]:
        return (self.then_case,) if self.else_case is None else (self.then_case, self.else_case)

    def with_children(self, kids: Sequence[Stmt]) -> Stmt:
        return IfThenElse(self.cond, kids[0], kids[1] if len(kids) > 1 else None)


@dataclass(frozen=True)
class Allocate(Stmt):
    """A buffer that lives for the duration of `body` (produced by lowering)."""

    buffer: Buffer
    body: Stmt

    def children(self) -> tuple[Stmt, ...]:
        return (self.body,)

    def with_children(self, kids: Sequence[Stmt]) -> Stmt:
        return Allocate(self.buffer, kids[0])


def _size_vars_in(dim: int | Expr) -> list[SizeVar]:
    if isinstance(dim, SizeVar):
        return [dim]
    if isinstance(dim, int):
        return []
    return [v for child in dim.children() for v in _size_vars_in(child)]


@dataclass(frozen=True)
class PrimFunc:
    """A whole tensor program: parameters, intermediate buffers, and the loop nest of blocks."""

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    allocs: tuple[Buffer, ...] = ()
    attrs: tuple[tuple[str, object], ...] = ()  # annotations of the root block

    def specialize(self, values: Mapping[str, int] | Mapping[SizeVar, int]) -> PrimFunc:
        """This function with size vars bound to numbers (`compiler.specialize`), as TVM's."""
        from compiler.specialize import specialize

        return specialize(self, values)

    @functools.cached_property  # in the instance's __dict__: PrimFunc has no slots, and params never change
    def size_vars(self) -> tuple[SizeVar, ...]:
        """The symbolic dimensions of the parameters, in order of first appearance (also those only
        inside a dimension's expression, as `n + 1`: a kernel takes each as an argument)."""
        out: list[SizeVar] = []
        for b in self.params:
            for d in b.shape:
                for v in _size_vars_in(d):
                    if v not in out:
                        out.append(v)
        return tuple(out)

    def script(self) -> str:
        from compiler.printer import script

        return script(self)

    def show(self) -> None:
        """Print the TVMScript text, as TVM's `show()`."""
        print(self.script())

    def with_attr(self, key: str, value: object) -> PrimFunc:
        """This function with the attribute `key` set to `value` (TVM's `with_attr`)."""
        return dataclasses.replace(
            self, attrs=tuple((k, v) for k, v in self.attrs if k != key) + ((key, value),)
        )

    def structural_hash(self) -> str:
        from compiler.serialize import structural_hash

        return structural_hash(self)


def check_params(name: str, params: Sequence[Buffer]) -> None:
    """IRError unless each parameter dimension is a number, a size var, or a sum, difference or
    product of those (a batch of sequences flattened to rows is `batch * seq` long). Run where a
    function is read from outside data (TVMScript, JSON; te checks its own), not in PrimFunc:
    schedules rebuild functions from checked parameters with `dataclasses.replace` on the search's
    hot path."""
    for b in params:
        for d in b.shape:
            if not isinstance(d, int) and not _size_expression(d):
                raise IRError(
                    f"{name}: parameter {b.name}'s dimension {d} is not a size: a parameter's symbolic "
                    "dimension is a size var, or sizes and numbers added, subtracted or multiplied"
                )


def _size_expression(e: object) -> bool:
    if isinstance(e, SizeVar | Const):
        return True
    return (
        isinstance(e, Binary)
        and e.op in (Op.ADD, Op.SUB, Op.MUL)
        and _size_expression(e.a)
        and _size_expression(e.b)
    )


def size_value(e: int | Expr, sizes: Mapping[SizeVar, int]) -> int | None:
    """A dimension's value where `sizes` binds its size vars (None where one is unbound)."""
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, SizeVar):
        return sizes.get(e)
    assert isinstance(e, Binary) and e.op in (Op.ADD, Op.SUB, Op.MUL), e
    a, b = size_value(e.a, sizes), size_value(e.b, sizes)
    if a is None or b is None:
        return None
    return a + b if e.op == Op.ADD else a - b if e.op == Op.SUB else a * b


@dataclass(frozen=True)
class IRModule:
    """Named PrimFuncs, as TVM's IRModule holds them (`mod["mm_relu"]`): what a script with several
    functions, or an `@I.ir_module` class, gives."""

    functions: tuple[PrimFunc, ...]

    def __post_init__(self) -> None:
        names = [f.name for f in self.functions]
        if len(set(names)) != len(names):
            raise IRError(f"an IRModule names each function once, got {names}")

    def __getitem__(self, name: str) -> PrimFunc:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(f"no function {name!r} in the module; it has {[f.name for f in self.functions]}")

    def __contains__(self, name: object) -> bool:
        return any(f.name == name for f in self.functions)

    def __iter__(self) -> Iterator[str]:
        return (f.name for f in self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def script(self) -> str:
        from compiler.printer import module_script

        return module_script(self)

    def show(self) -> None:
        print(self.script())


def const(value: int | float | bool, dtype: str | None = None) -> Const:
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = INDEX_DTYPE
        else:
            dtype = "float32"
    if dtype in FLOAT_DTYPES:
        value = float(value)
    elif dtype in INT_DTYPES:
        value = wrapped(int(value), dtype)
    else:
        value = bool(value)
    return Const(value, dtype)


def as_expr(value: ExprLike, dtype: str | None = None) -> Expr:
    """Turn a Python number into a Const of `dtype` (or a natural default); pass Exprs through."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, EqualOp):
        return value.as_expr()
    if isinstance(value, (bool, int, float)):
        return const(value, dtype)
    raise TypeError(f"cannot use {type(value).__name__} {value!r} as an expression")


def binary(op: Op, a: ExprLike, b: ExprLike) -> Expr:
    """Build a binary node; a Python number takes the dtype of the other side."""
    if isinstance(a, EqualOp):
        a = a.as_expr()
    if isinstance(b, EqualOp):
        b = b.as_expr()
    if isinstance(a, Expr):
        if not isinstance(b, Expr):
            b = const(b, a.dtype if a.dtype != "bool" else None)
    elif isinstance(b, Expr):
        a = const(a, b.dtype if b.dtype != "bool" else None)
    else:
        a, b = as_expr(a), as_expr(b)
    return Binary(op, a, b)


def unary(op: Op, a: ExprLike) -> Expr:
    return Unary(op, as_expr(a))


def apply(op: Op, *operands: ExprLike) -> Expr:
    """`op` applied to `operands`, whatever its arity."""
    if len(operands) == 1:
        return unary(op, operands[0])
    if len(operands) == 2:
        return binary(op, operands[0], operands[1])
    raise IRError(f"{op!r} takes {op.spec.arity} operand(s), got {len(operands)}")


TRUE = Const(True, "bool")
FALSE = Const(False, "bool")
