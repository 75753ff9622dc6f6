"""Interval bounds of a block's integer expressions, narrowed by the select conditions that guard
them: the proof, before any worker compiles a PrimFunc that arrived as data, that each of its loads
stays inside its buffer, that no integer arithmetic in an index overflows and that no integer division
divides by zero. Elsewhere integer arithmetic wraps, in two's complement, in the kernel (LLVM's plain
add and mul) as in numpy: a value that may overflow then spans its whole dtype (a model's position ids,
computed from int64 inputs of any value, are such values).

Every iteration variable ranges over [0, extent); a load of an integer buffer may be any value of its
dtype. Only the side of a select that runs is checked against what its condition says: the padding
block's `data[y - 1]` is safe because it runs only where `y >= 1` (the kernel branches there, see
`codegen._select`). Conditions narrow the expressions they compare, and through `x + c`, `x - c`,
`c - x` and `c * x` the variables inside them. A load whose index comes from data must clamp it
(`min`/`max`) or wrap it (`floormod`) to be provably inside.
"""

from __future__ import annotations

from collections.abc import Mapping

from compiler.dtypes import INT_DTYPES, int_range
from compiler.ir import Binary, Cast, Const, Expr, Load, Select, Unary, Var
from compiler.ops import Op
from compiler.printer import expr_str
from compiler.visit import guarded_loads
from compiler.workloads.workload import WorkloadError

Range = tuple[int, int]  # inclusive
Facts = Mapping[Expr, Range]  # what is known of each (integer) expression where it is evaluated
DTYPE_RANGES = {dtype: int_range(dtype) for dtype in INT_DTYPES}
INDEX_DTYPE = "int64"  # what codegen computes addresses in

_FLIP = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE, Op.EQ: Op.EQ, Op.NE: Op.NE}
_NEGATE = {Op.LT: Op.GE, Op.LE: Op.GT, Op.GT: Op.LE, Op.GE: Op.LT, Op.EQ: Op.NE, Op.NE: Op.EQ}


def check_expr(e: Expr, variables: Facts, field: str, what: str) -> None:
    """Check `e` where `variables` (iteration variable -> range) are the only variables in scope;
    `what` names them in the error of a variable out of scope. WorkloadError's field is the dotted
    path of the culprit below `field` (the JSON path of `e`)."""
    _Prover(what).visit(e, variables, field)


def expr_range(e: Expr, variables: Facts) -> Range | None:
    """The interval an integer expression spans where `variables` span theirs, or None when it is
    not an integer expression of them that this module can bound (a caller then assumes anything)."""
    try:
        return _Prover("a variable of the expression").visit(e, variables, "expr")
    except WorkloadError:
        return None


class _Prover:
    def __init__(self, what: str) -> None:
        self.what = what
        self.indexing = 0  # how many loads' indices the expression being visited is inside

    def visit(self, e: Expr, facts: Facts, path: str) -> Range | None:
        """Check `e` and return its range if it is an integer (None for floats and bools)."""
        if isinstance(e, Var):
            if e not in facts:
                raise WorkloadError(path, f"{e.name} ({e.dtype}) is not {self.what}")
            return facts[e]
        if isinstance(e, Const):
            return self.const(e, path)
        if isinstance(e, Load):
            return self.load(e, facts, path)
        if isinstance(e, Select):
            return self.select(e, facts, path)
        if isinstance(e, Cast):
            inner = self.visit(e.value, facts, f"{path}[2]")
            if e.dtype not in INT_DTYPES:
                return None
            limits = DTYPE_RANGES[e.dtype]
            if inner is None or e.value.dtype not in INT_DTYPES or not _within(inner, limits):
                inner = limits  # a float, or an integer that wraps
            return _narrowed(e, inner, facts)
        if isinstance(e, Binary):
            return self.binary(e, facts, path)
        if isinstance(e, Unary):
            self.visit(e.a, facts, f"{path}[1]")
            return None
        raise WorkloadError(path, f"{type(e).__name__} is not an expression of a PrimFunc")

    def const(self, e: Const, path: str) -> Range | None:
        if e.dtype not in INT_DTYPES:
            return None
        value = int(e.value)
        if not _within((value, value), DTYPE_RANGES[e.dtype]):
            raise WorkloadError(path, f"{value} does not fit {e.dtype}")
        return value, value

    def load(self, e: Load, facts: Facts, path: str) -> Range | None:
        for d, (index, dim) in enumerate(zip(e.indices, e.buffer.shape)):
            where = f"{path}[2][{d}]"
            self.indexing += 1
            try:
                r = self.visit(index, facts, where)
            finally:
                self.indexing -= 1
            if index.dtype != INDEX_DTYPE or r is None:
                raise WorkloadError(where, f"an index must be {INDEX_DTYPE}, got {index.dtype}")
            if not isinstance(dim, int):
                raise WorkloadError(
                    where, f"{e.buffer.name} has a symbolic shape: its loads are not proven yet"
                )
            if not _within(r, (0, dim - 1)):
                bad = r[0] if r[0] < 0 else r[1]
                raise WorkloadError(
                    where,
                    f"index {d} of {e.buffer.name}, {expr_str(index)}, may be {bad}: outside [0, {dim - 1}]",
                )
        return _narrowed(e, DTYPE_RANGES[e.dtype], facts) if e.dtype in INT_DTYPES else None

    def select(self, e: Select, facts: Facts, path: str) -> Range | None:
        """A select whose sides load what its condition does not branches, so only the side chosen
        runs and what its condition says holds there; codegen computes both sides of any other select."""
        self.visit(e.cond, facts, f"{path}[1]")
        branches = bool(guarded_loads(e))
        out: Range | None = None
        for truth, branch, where in ((True, e.true_value, "[2]"), (False, e.false_value, "[3]")):
            known = self.assume(e.cond, truth, facts, f"{path}[1]") if branches else facts
            if known is None:
                continue  # this side never runs
            r = self.visit(branch, known, f"{path}{where}")
            if r is not None:
                out = r if out is None else (min(out[0], r[0]), max(out[1], r[1]))
        if e.dtype not in INT_DTYPES:
            return None
        return _narrowed(e, out or DTYPE_RANGES[e.dtype], facts)

    def binary(self, e: Binary, facts: Facts, path: str) -> Range | None:
        a = self.visit(e.a, facts, f"{path}[1]")
        b = self.visit(e.b, facts, f"{path}[2]")
        if e.dtype not in INT_DTYPES or a is None or b is None:
            return None
        if e.op in (Op.FLOORDIV, Op.FLOORMOD, Op.FMOD) and b[0] < 1:
            raise WorkloadError(path, f"the divisor {expr_str(e.b)} may be {b[0]}: it must be positive")
        r = _arith(e.op, a, b)
        if not _within(r, DTYPE_RANGES[e.dtype]):
            if self.indexing:
                raise WorkloadError(path, f"{expr_str(e)} may overflow {e.dtype}: it spans [{r[0]}, {r[1]}]")
            r = DTYPE_RANGES[e.dtype]  # a value that wraps
        return _narrowed(e, r, facts)

    def assume(self, cond: Expr, truth: bool, facts: Facts, path: str) -> Facts | None:
        """What is known where `cond` is `truth` (None: nowhere, that side never runs)."""
        if isinstance(cond, Const):
            return facts if bool(cond.value) == truth else None
        if isinstance(cond, Unary) and cond.op == Op.NOT:
            return self.assume(cond.a, not truth, facts, f"{path}[1]")
        if isinstance(cond, Binary) and (cond.op, truth) in ((Op.AND, True), (Op.OR, False)):
            known = self.assume(cond.a, truth, facts, f"{path}[1]")
            return None if known is None else self.assume(cond.b, truth, known, f"{path}[2]")
        if isinstance(cond, Binary) and cond.op in _NEGATE and cond.a.dtype in INT_DTYPES:
            op = cond.op if truth else _NEGATE[cond.op]
            known = self.compare(cond.a, op, cond.b, facts, path)
            return None if known is None else self.compare(cond.b, _FLIP[op], cond.a, known, path)
        return facts

    def compare(self, a: Expr, op: Op, b: Expr, facts: Facts, path: str) -> Facts | None:
        """Narrow `a` knowing `a op b`."""
        ra, rb = self.visit(a, facts, path), self.visit(b, facts, path)
        assert ra is not None and rb is not None  # integer operands
        lo, hi = {
            Op.LT: (ra[0], rb[1] - 1),
            Op.LE: (ra[0], rb[1]),
            Op.GT: (rb[0] + 1, ra[1]),
            Op.GE: (rb[0], ra[1]),
            Op.EQ: rb,
            Op.NE: ra,
        }[op]
        return _narrow(a, (max(lo, ra[0]), min(hi, ra[1])), facts)


def _narrow(e: Expr, r: Range, facts: Facts) -> Facts | None:
    """`facts` with `e` known to lie in `r`, and the variable inside `x + c`, `x - c`, `c - x` or
    `c * x` (c > 0) narrowed to match."""
    if r[0] > r[1]:
        return None
    out = {**facts, e: r}
    if not isinstance(e, Binary):
        return out
    a, b = e.a, e.b
    if e.op == Op.ADD and isinstance(b, Const):
        return _narrow(a, (r[0] - int(b.value), r[1] - int(b.value)), out)
    if e.op == Op.ADD and isinstance(a, Const):
        return _narrow(b, (r[0] - int(a.value), r[1] - int(a.value)), out)
    if e.op == Op.SUB and isinstance(b, Const):
        return _narrow(a, (r[0] + int(b.value), r[1] + int(b.value)), out)
    if e.op == Op.SUB and isinstance(a, Const):
        return _narrow(b, (int(a.value) - r[1], int(a.value) - r[0]), out)
    if e.op == Op.MUL and isinstance(b, Const) and int(b.value) > 0:
        c = int(b.value)
        return _narrow(a, (-(-r[0] // c), r[1] // c), out)
    return out


def _narrowed(e: Expr, r: Range, facts: Facts) -> Range:
    """`r`, intersected with what the guarding conditions say of `e`."""
    known = facts.get(e)
    return r if known is None else (max(r[0], known[0]), min(r[1], known[1]))


def _within(r: Range, limits: Range) -> bool:
    return limits[0] <= r[0] and r[1] <= limits[1]


def _arith(op: Op, a: Range, b: Range) -> Range:
    """The range of `a op b`, an op of integer result; a divisor `b` is positive."""
    if op == Op.ADD:
        return a[0] + b[0], a[1] + b[1]
    if op == Op.SUB:
        return a[0] - b[1], a[1] - b[0]
    if op == Op.MUL:
        p = [x * y for x in a for y in b]
        return min(p), max(p)
    if op == Op.MIN:
        return min(a[0], b[0]), min(a[1], b[1])
    if op == Op.MAX:
        return max(a[0], b[0]), max(a[1], b[1])
    if op == Op.FLOORDIV:
        q = [x // y for x in a for y in b]
        return min(q), max(q)
    assert op == Op.FLOORMOD, op
    if b[0] == b[1] and a[0] // b[0] == a[1] // b[0]:
        return a[0] % b[0], a[1] % b[0]
    return 0, b[1] - 1
