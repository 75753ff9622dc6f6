"""The tensor-program IR: immutable expression and statement nodes.

Every node is a frozen dataclass, so `==` is structural equality and nodes can be dictionary keys.
Variables are identified by name: the code that creates variables (te, the schedule) keeps names
unique inside a PrimFunc, which makes printing, hashing and trace replay deterministic.

Loops always start at 0. Leaf blocks hold one store (and an optional init store for reductions);
the only block that contains others is the implicit root, the body of the PrimFunc.
"""

from __future__ import annotations

from dataclasses import dataclass, field

INDEX_DTYPE = "int64"
FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int32", "int64")
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)

ARITH_OPS = ("add", "sub", "mul", "div", "floordiv", "floormod", "min", "max")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC_OPS = ("and", "or")
MATH_FUNCS = ("exp", "sqrt", "log", "tanh", "fabs")

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled")
ITER_KINDS = ("S", "R", "O")  # spatial, reduce, ordered (the recurrence axis of a scan)


class Expr:
    """Base of expressions; Python operators build IR so compute lambdas read like math."""

    dtype: str

    def __add__(self, other: ExprLike) -> Expr:
        return binary("add", self, other)

    def __radd__(self, other: ExprLike) -> Expr:
        return binary("add", other, self)

    def __sub__(self, other: ExprLike) -> Expr:
        return binary("sub", self, other)

    def __rsub__(self, other: ExprLike) -> Expr:
        return binary("sub", other, self)

    def __mul__(self, other: ExprLike) -> Expr:
        return binary("mul", self, other)

    def __rmul__(self, other: ExprLike) -> Expr:
        return binary("mul", other, self)

    def __truediv__(self, other: ExprLike) -> Expr:
        return binary("div", self, other)

    def __rtruediv__(self, other: ExprLike) -> Expr:
        return binary("div", other, self)

    def __floordiv__(self, other: ExprLike) -> Expr:
        return binary("floordiv", self, other)

    def __mod__(self, other: ExprLike) -> Expr:
        return binary("floormod", self, other)

    def __neg__(self) -> Expr:
        return binary("sub", const(0, self.dtype), self)

    def __lt__(self, other: ExprLike) -> Expr:
        return binary("lt", self, other)

    def __le__(self, other: ExprLike) -> Expr:
        return binary("le", self, other)

    def __gt__(self, other: ExprLike) -> Expr:
        return binary("gt", self, other)

    def __ge__(self, other: ExprLike) -> Expr:
        return binary("ge", self, other)


ExprLike = Expr | int | float | bool


@dataclass(frozen=True)
class Var(Expr):
    name: str
    dtype: str = INDEX_DTYPE


@dataclass(frozen=True)
class Const(Expr):
    value: int | float | bool
    dtype: str


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return "bool" if self.op in COMPARE_OPS + LOGIC_OPS else self.a.dtype


@dataclass(frozen=True)
class Not(Expr):
    a: Expr
    dtype: str = "bool"


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    true_value: Expr
    false_value: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.true_value.dtype


@dataclass(frozen=True)
class Cast(Expr):
    dtype: str
    value: Expr


@dataclass(frozen=True)
class Call(Expr):
    func: str
    args: tuple[Expr, ...]
    dtype: str


@dataclass(frozen=True)
class Buffer:
    name: str
    shape: tuple[int, ...]
    dtype: str

    def __getitem__(self, indices: object) -> Load:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return Load(self, tuple(as_expr(i, INDEX_DTYPE) for i in indices))

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class Load(Expr):
    buffer: Buffer
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.buffer.dtype


class Stmt:
    """Base of statements."""


@dataclass(frozen=True)
class BufferStore(Stmt):
    buffer: Buffer
    value: Expr
    indices: tuple[Expr, ...]


@dataclass(frozen=True)
class IterVar:
    """A block iteration variable over [0, extent); kind says how iterations may be reordered."""

    var: Var
    extent: int
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

    @property
    def is_reduction(self) -> bool:
        return any(iv.kind == "R" for iv in self.iter_vars)


@dataclass(frozen=True)
class For(Stmt):
    var: Var
    extent: int
    body: Stmt
    kind: str = "serial"
    annotations: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class SeqStmt(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True)
class IfThenElse(Stmt):
    cond: Expr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True)
class Allocate(Stmt):
    """A buffer that lives for the duration of `body` (produced by lowering)."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True)
class PrimFunc:
    """A whole tensor program: parameters, intermediate buffers, and the loop nest of blocks."""

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    allocs: tuple[Buffer, ...] = ()
    attrs: tuple[tuple[str, object], ...] = ()  # annotations of the root block

    def script(self) -> str:
        from compiler.printer import script

        return script(self)

    def structural_hash(self) -> str:
        from compiler.hashing import structural_hash

        return structural_hash(self)


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
        value = int(value)
    else:
        value = bool(value)
    return Const(value, dtype)


def as_expr(value: ExprLike, dtype: str | None = None) -> Expr:
    """Turn a Python number into a Const of `dtype` (or a natural default); pass Exprs through."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, int, float)):
        return const(value, dtype)
    raise TypeError(f"cannot use {type(value).__name__} {value!r} as an expression")


def binary(op: str, a: ExprLike, b: ExprLike) -> Expr:
    """Build a binary node; a Python number takes the dtype of the other side."""
    if isinstance(a, Expr) and not isinstance(b, Expr):
        b = const(b, a.dtype if a.dtype != "bool" else None)
    elif isinstance(b, Expr) and not isinstance(a, Expr):
        a = const(a, b.dtype if b.dtype != "bool" else None)
    a, b = as_expr(a), as_expr(b)
    if op not in LOGIC_OPS and a.dtype != b.dtype:
        raise TypeError(f"{op}: operand dtypes differ ({a.dtype} vs {b.dtype}); use cast()")
    return Binary(op, a, b)


TRUE = Const(True, "bool")
