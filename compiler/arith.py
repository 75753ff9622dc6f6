"""Integer arithmetic on index expressions: simplification, numeric bounds and symbolic ranges.

Schedules produce index expressions such as `i0 * 32 + i1` or `(f // 16) * 16 + f % 16`; these
routines keep them readable and let compute_at infer the region a loop nest touches.
Index expressions are int64; float expressions only get constant folding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from compiler.ir import INDEX_DTYPE, INT_DTYPES, TRUE, Binary, Const, Expr, Not, Select, Var, const
from compiler.visit import map_children

Range = tuple[int, int]  # inclusive numeric bounds
Ranges = Mapping[Var, Range]


def _fold(op: str, a: Const, b: Const) -> Const | None:
    x, y = a.value, b.value
    integral = a.dtype in INT_DTYPES
    try:
        if op == "add":
            return Const(x + y, a.dtype)
        if op == "sub":
            return Const(x - y, a.dtype)
        if op == "mul":
            return Const(x * y, a.dtype)
        if op == "div":
            return None if integral else Const(x / y, a.dtype)
        if op == "floordiv" and integral and y != 0:
            return Const(x // y, a.dtype)
        if op == "floormod" and integral and y != 0:
            return Const(x % y, a.dtype)
        if op == "min":
            return Const(min(x, y), a.dtype)
        if op == "max":
            return Const(max(x, y), a.dtype)
        cmp = {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y, "ne": x != y}
        if op in cmp:
            return Const(bool(cmp[op]), "bool")
        if op == "and":
            return Const(bool(x and y), "bool")
        if op == "or":
            return Const(bool(x or y), "bool")
    except (ZeroDivisionError, OverflowError):
        return None
    return None


class Linear:
    """sum(coef * atom) + constant, with atoms kept in first-seen order so output is deterministic."""

    __slots__ = ("constant", "terms")

    def __init__(self, terms: dict[Expr, int] | None = None, constant: int = 0) -> None:
        self.terms = {k: v for k, v in terms.items() if v != 0} if terms else {}
        self.constant = constant

    def add(self, other: Linear, sign: int = 1) -> Linear:
        out = Linear.__new__(Linear)
        out.constant = self.constant + sign * other.constant
        if not other.terms:
            out.terms = self.terms  # never mutated, so safe to share
            return out
        terms = dict(self.terms)
        for k, v in other.terms.items():
            v = terms.get(k, 0) + sign * v
            if v:
                terms[k] = v
            else:
                del terms[k]
        out.terms = terms
        return out

    def scale(self, c: int) -> Linear:
        if c == 0:
            return Linear({}, 0)
        out = Linear.__new__(Linear)
        out.terms, out.constant = {k: v * c for k, v in self.terms.items()}, self.constant * c
        return out

    def to_expr(self) -> Expr:
        out: Expr | None = None
        for atom, coef in self.terms.items():
            term = atom if abs(coef) == 1 else Binary("mul", atom, const(abs(coef)))
            if out is None:
                out = term if coef > 0 else Binary("sub", const(0), term)
            else:
                out = Binary("add" if coef > 0 else "sub", out, term)
        if out is None:
            return const(self.constant)
        if self.constant > 0:
            return Binary("add", out, const(self.constant))
        if self.constant < 0:
            return Binary("sub", out, const(-self.constant))
        return out


def linear(expr: Expr) -> Linear:
    """Linear form of an (already simplified) integer expression; non-linear parts become atoms."""
    if isinstance(expr, Const):
        return Linear({}, int(expr.value))
    if isinstance(expr, Binary) and expr.op in ("add", "sub"):
        return linear(expr.a).add(linear(expr.b), 1 if expr.op == "add" else -1)
    if isinstance(expr, Binary) and expr.op == "mul":
        if isinstance(expr.b, Const):
            return linear(expr.a).scale(int(expr.b.value))
        if isinstance(expr.a, Const):
            return linear(expr.b).scale(int(expr.a.value))
    return Linear({expr: 1})


def simplify(expr: Expr, ranges: Ranges | None = None) -> Expr:
    """Fold constants and canonicalize integer arithmetic; `ranges` bounds loop variables."""
    return _simplify(expr, ranges or {})


def _simplify(e: Expr, rng: Ranges) -> Expr:
    """Bottom-up, except that a sum of index terms is canonicalized in one pass (`_index_sum`)."""
    if isinstance(e, Binary):
        if e.op in _SUM_OPS and e.dtype == INDEX_DTYPE:
            return _index_sum(e, rng).to_expr()
        a, b = _simplify(e.a, rng), _simplify(e.b, rng)
        node: Expr = e if (a is e.a and b is e.b) else Binary(e.op, a, b)
    elif isinstance(e, (Var, Const)):
        return e
    else:
        node = map_children(e, lambda c: _simplify(c, rng))
    out = _simplify_node(node, rng)
    return node if out is None else out


_SUM_OPS = ("add", "sub", "mul")


def _index_sum(e: Expr, rng: Ranges) -> Linear:
    """The linear form of simplify(e), read straight through its sums and products by constants
    (the atoms in between simplified on their own). Canonicalizing each node of the sum on the way
    up, as the rest of simplify does, re-reads every subtree at every level above it."""
    if isinstance(e, Const):
        return Linear({}, int(e.value))
    if isinstance(e, Binary) and e.op in _SUM_OPS and e.dtype == INDEX_DTYPE:
        a, b = _index_sum(e.a, rng), _index_sum(e.b, rng)
        if e.op != "mul":
            return a.add(b, 1 if e.op == "add" else -1)
        if not b.terms:
            return a.scale(b.constant)
        if not a.terms:
            return b.scale(a.constant)
        return Linear({Binary("mul", a.to_expr(), b.to_expr()): 1})
    return linear(_simplify(e, rng))


def _simplify_node(e: Expr, rng: Ranges) -> Expr | None:
    if isinstance(e, Not) and isinstance(e.a, Const):
        return Const(not e.a.value, "bool")
    if isinstance(e, Select) and isinstance(e.cond, Const):
        return e.true_value if e.cond.value else e.false_value
    if not isinstance(e, Binary):
        return None
    a, b, op = e.a, e.b, e.op
    if isinstance(a, Const) and isinstance(b, Const):
        folded = _fold(op, a, b)
        if folded is not None:
            return folded
    if op == "and":
        if a == TRUE:
            return b
        if b == TRUE:
            return a
    if op == "or" and (a == TRUE or b == TRUE):
        return TRUE
    if e.dtype not in INT_DTYPES and op not in ("lt", "le", "gt", "ge", "eq", "ne"):
        return _float_identities(e)
    if e.dtype in INT_DTYPES:
        return _simplify_int(e, rng)
    if a.dtype in INT_DTYPES:
        return _decide_compare(e, rng)
    return None


def _float_identities(e: Binary) -> Expr | None:
    a, b = e.a, e.b
    if e.op == "mul" and isinstance(b, Const) and b.value == 1:
        return a
    if e.op == "add" and isinstance(b, Const) and b.value == 0:
        return a
    return None


def _simplify_int(e: Binary, rng: Ranges) -> Expr | None:
    op, a, b = e.op, e.a, e.b
    if op in ("add", "sub", "mul"):
        return linear(e).to_expr()
    if op in ("floordiv", "floormod") and isinstance(b, Const) and b.value > 0:
        return _simplify_divmod(op, a, int(b.value), rng)
    if op in ("min", "max"):
        diff = bound(linear(a).add(linear(b), -1).to_expr(), rng)
        if diff is not None:
            if diff[1] <= 0:
                return a if op == "min" else b
            if diff[0] >= 0:
                return b if op == "min" else a
    return None


def _simplify_divmod(op: str, a: Expr, c: int, rng: Ranges) -> Expr | None:
    if c == 1:
        return a if op == "floordiv" else const(0)
    if isinstance(a, Binary) and a.op == op == "floordiv" and isinstance(a.b, Const):
        return simplify(Binary("floordiv", a.a, const(int(a.b.value) * c)), rng)
    if (
        isinstance(a, Binary)
        and a.op == op == "floormod"
        and isinstance(a.b, Const)
        and int(a.b.value) % c == 0
    ):
        return simplify(Binary("floormod", a.a, const(c)), rng)
    lin = linear(a)
    quotient = Linear({k: v // c for k, v in lin.terms.items() if v % c == 0}, lin.constant // c)
    rest = Linear({k: v for k, v in lin.terms.items() if v % c != 0}, lin.constant % c)
    rest_expr = rest.to_expr()
    rest_bound = bound(rest_expr, rng)
    if rest_bound is not None and rest_bound[0] >= 0 and rest_bound[1] < c:
        return quotient.to_expr() if op == "floordiv" else rest_expr
    if not quotient.terms and quotient.constant == 0:
        return None
    inner = Binary(op, rest_expr, const(c))
    if op == "floormod":
        return inner
    return linear(Binary("add", quotient.to_expr(), inner)).to_expr()


def _decide_compare(e: Binary, rng: Ranges) -> Expr | None:
    diff = bound(simplify(Binary("sub", e.a, e.b), rng), rng)
    if diff is None:
        return None
    lo, hi = diff
    decided = {
        "lt": (hi < 0, lo >= 0),
        "le": (hi <= 0, lo > 0),
        "gt": (lo > 0, hi <= 0),
        "ge": (lo >= 0, hi < 0),
        "eq": (lo == hi == 0, lo > 0 or hi < 0),
        "ne": (lo > 0 or hi < 0, lo == hi == 0),
    }[e.op]
    if decided[0]:
        return TRUE
    if decided[1]:
        return Const(False, "bool")
    return None


def bound(expr: Expr, ranges: Ranges) -> Range | None:
    """Inclusive numeric bounds of an integer expression, or None when a variable is unbounded."""
    if isinstance(expr, Const):
        return int(expr.value), int(expr.value)
    if isinstance(expr, Var):
        return ranges.get(expr)
    if isinstance(expr, Select):
        t, f = bound(expr.true_value, ranges), bound(expr.false_value, ranges)
        return None if t is None or f is None else (min(t[0], f[0]), max(t[1], f[1]))
    if not isinstance(expr, Binary):
        return None
    a = bound(expr.a, ranges)
    b = bound(expr.b, ranges)
    if a is None or b is None:
        return None
    return _bound_binary(expr.op, a, b)


def _bound_binary(op: str, a: Range, b: Range) -> Range | None:
    if op == "add":
        return a[0] + b[0], a[1] + b[1]
    if op == "sub":
        return a[0] - b[1], a[1] - b[0]
    if op == "mul":
        p = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
        return min(p), max(p)
    if op == "min":
        return min(a[0], b[0]), min(a[1], b[1])
    if op == "max":
        return max(a[0], b[0]), max(a[1], b[1])
    if op in ("floordiv", "floormod") and b[0] == b[1] and b[0] > 0:
        c = b[0]
        if op == "floordiv":
            return a[0] // c, a[1] // c
        if a[0] // c == a[1] // c:
            return a[0] % c, a[1] % c
        return 0, c - 1
    return None


def symbolic_range(expr: Expr, inner: Ranges) -> tuple[Expr, Expr] | None:
    """Bounds of `expr` as expressions of its outer variables when `inner` variables sweep their ranges.

    This is the region inference behind compute_at: with i = i0 * 32 + i1 and i1 in [0, 31], the
    range of i is [i0 * 32, i0 * 32 + 31]. Returns None for forms it cannot bound (e.g. data-dependent).
    """
    r = _sym(simplify(expr, inner), inner)
    if r is None:
        return None
    return simplify(r[0], inner), simplify(r[1], inner)


def _sym(e: Expr, inner: Ranges) -> tuple[Expr, Expr] | None:
    if isinstance(e, Const):
        return e, e
    if isinstance(e, Var):
        if e in inner:
            lo, hi = inner[e]
            return const(lo), const(hi)
        return e, e
    if not isinstance(e, Binary) or e.dtype not in INT_DTYPES:
        return None
    a, b = _sym(e.a, inner), _sym(e.b, inner)
    if a is None or b is None:
        return None
    op = e.op
    if op == "add":
        return Binary("add", a[0], b[0]), Binary("add", a[1], b[1])
    if op == "sub":
        return Binary("sub", a[0], b[1]), Binary("sub", a[1], b[0])
    if op in ("min", "max"):
        return Binary(op, a[0], b[0]), Binary(op, a[1], b[1])
    if op == "mul":
        return _sym_mul(a, b)
    if op in ("floordiv", "floormod") and isinstance(e.b, Const) and int(e.b.value) > 0:
        return _sym_divmod(op, a, int(e.b.value))
    return None


def _sym_mul(a: tuple[Expr, Expr], b: tuple[Expr, Expr]) -> tuple[Expr, Expr] | None:
    if isinstance(a[0], Const) and a[0] == a[1]:
        a, b = b, a
    if not (isinstance(b[0], Const) and b[0] == b[1]):
        return None if a[0] != a[1] or b[0] != b[1] else (Binary("mul", a[0], b[0]),) * 2
    c = b[0]
    lo, hi = Binary("mul", a[0], c), Binary("mul", a[1], c)
    return (lo, hi) if c.value >= 0 else (hi, lo)


def _sym_divmod(op: str, a: tuple[Expr, Expr], c: int) -> tuple[Expr, Expr]:
    cc = const(c)
    if op == "floordiv":
        return Binary("floordiv", a[0], cc), Binary("floordiv", a[1], cc)
    lo, hi = simplify(a[0]), simplify(a[1])
    if lo == hi:
        return Binary("floormod", lo, cc), Binary("floormod", hi, cc)
    span = linear(hi).add(linear(lo), -1)
    if not span.terms and span.constant < c:
        same_period = simplify(Binary("eq", Binary("floordiv", lo, cc), Binary("floordiv", hi, cc)))
        if same_period == TRUE:
            return Binary("floormod", lo, cc), Binary("floormod", hi, cc)
    return const(0), const(c - 1)


def is_const(expr: Expr, value: int | None = None) -> bool:
    return isinstance(expr, Const) and (value is None or expr.value == value)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))
