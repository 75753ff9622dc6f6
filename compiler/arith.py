"""Integer arithmetic on index expressions: simplification, numeric bounds and symbolic ranges.

Schedules produce index expressions such as `i0 * 32 + i1` or `(f // 16) * 16 + f % 16`; these
routines keep them readable and let compute_at infer the region a loop nest touches.
Index expressions are int64; float expressions only get constant folding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from compiler.dtypes import INDEX_DTYPE
from compiler.ir import (
    FALSE,
    TRUE,
    Binary,
    Const,
    Expr,
    Select,
    SizeVar,
    SymbolicError,
    Unary,
    Var,
    const,
    structural_equal,
)
from compiler.ops import Op
from compiler.visit import free_vars

Range = tuple[int, int]  # inclusive numeric bounds
# The integer types simplified: index arithmetic. The narrow and unsigned types only hold data, where
# an identity is rarely worth proving under their wrapping.
_INDEX_INTS = ("int32", INDEX_DTYPE)
Ranges = Mapping[Var, Range]
Extents = Mapping[Var, Expr]  # loop variables' extents, as expressions where symbolic


def _fold(e: Binary | Unary) -> Const | None:
    """A node whose operands are all constants, as one constant (None where the op is undefined)."""
    out = e.op.fold(*(k.value for k in e.children() if isinstance(k, Const)))
    return None if out is None else const(out, e.dtype)


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
            term = atom if abs(coef) == 1 else Binary(Op.MUL, atom, const(abs(coef)))
            if out is None:
                out = term if coef > 0 else Binary(Op.SUB, const(0), term)
            else:
                out = Binary(Op.ADD if coef > 0 else Op.SUB, out, term)
        if out is None:
            return const(self.constant)
        if self.constant > 0:
            return Binary(Op.ADD, out, const(self.constant))
        if self.constant < 0:
            return Binary(Op.SUB, out, const(-self.constant))
        return out


def linear(expr: Expr) -> Linear:
    """Linear form of an (already simplified) integer expression; non-linear parts become atoms."""
    if isinstance(expr, Const):
        return Linear({}, int(expr.value))
    if isinstance(expr, Binary) and expr.op in (Op.ADD, Op.SUB):
        return linear(expr.a).add(linear(expr.b), 1 if expr.op == Op.ADD else -1)
    if isinstance(expr, Binary) and expr.op == Op.MUL:
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
            return _recombine_divmod(_index_sum(e, rng)).to_expr()
        a, b = _simplify(e.a, rng), _simplify(e.b, rng)
        node: Expr = e if (a is e.a and b is e.b) else Binary(e.op, a, b)
    elif isinstance(e, (Var, Const)):
        return e
    else:
        kids = e.children()
        new = [_simplify(c, rng) for c in kids]
        node = e if all(n is k for n, k in zip(new, kids)) else e.with_children(new)
    out = _simplify_node(node, rng)
    return node if out is None else out


_SUM_OPS = (Op.ADD, Op.SUB, Op.MUL)


def _index_sum(e: Expr, rng: Ranges) -> Linear:
    """The linear form of simplify(e), read straight through its sums and products by constants
    (the atoms in between simplified on their own). Canonicalizing each node of the sum on the way
    up, as the rest of simplify does, re-reads every subtree at every level above it."""
    if isinstance(e, Const):
        return Linear({}, int(e.value))
    if isinstance(e, Binary) and e.op in _SUM_OPS and e.dtype == INDEX_DTYPE:
        a, b = _index_sum(e.a, rng), _index_sum(e.b, rng)
        if e.op != Op.MUL:
            return a.add(b, 1 if e.op == Op.ADD else -1)
        if not b.terms:
            return a.scale(b.constant)
        if not a.terms:
            return b.scale(a.constant)
        return Linear({Binary(Op.MUL, a.to_expr(), b.to_expr()): 1})
    return linear(_simplify(e, rng))


def _recombine_divmod(lin: Linear) -> Linear:
    """`k * c * (x // c) + k * (x % c)` is `k * x`. A fused loop's variable comes back so from the
    row-major offset of the loops it fused (y * W + x, with y = f // W and x = f % W), and once split
    (f = f0 * 16 + f1, W = 7 or 56) the division no longer folds on its own: without this, the
    offset is not linear in the vectorized loop, and a contiguous row is gathered lane by lane."""
    while True:
        for atom, coef in lin.terms.items():
            if not (isinstance(atom, Binary) and atom.op == Op.FLOORMOD and isinstance(atom.b, Const)):
                continue
            partner = coef * int(atom.b.value)
            if not any(
                v == partner and isinstance(t, Binary) and t.op == Op.FLOORDIV for t, v in lin.terms.items()
            ):
                continue
            div: Expr = Binary(Op.FLOORDIV, atom.a, atom.b)
            # The quotient may have folded on its own: (i // 2) // 2 is i // 4.
            div = div if div in lin.terms else simplify(div)
            if lin.terms.get(div) == partner:
                pair = Linear({atom: coef, div: partner})
                lin = lin.add(pair, -1).add(linear(atom.a).scale(coef))
                break
        else:
            return lin


def _simplify_node(e: Expr, rng: Ranges) -> Expr | None:
    if isinstance(e, Select) and isinstance(e.cond, Const):
        return e.true_value if e.cond.value else e.false_value
    if isinstance(e, (Binary, Unary)) and all(isinstance(k, Const) for k in e.children()):
        return _fold(e)
    if not isinstance(e, Binary):
        return None
    a, b, op = e.a, e.b, e.op
    if op == Op.AND:
        if structural_equal(a, TRUE):
            return b
        if structural_equal(b, TRUE):
            return a
    if op == Op.OR and (structural_equal(a, TRUE) or structural_equal(b, TRUE)):
        return TRUE
    if e.dtype not in _INDEX_INTS and not op.is_comparison:
        return _float_identities(e)
    if e.dtype in _INDEX_INTS:
        return _simplify_int(e, rng)
    if a.dtype in _INDEX_INTS:
        return _decide_compare(e, rng)
    return None


def _float_identities(e: Binary) -> Expr | None:
    a, b = e.a, e.b
    if e.op == Op.MUL and isinstance(b, Const) and b.value == 1:
        return a
    if e.op == Op.ADD and isinstance(b, Const) and b.value == 0:
        return a
    return None


def _simplify_int(e: Binary, rng: Ranges) -> Expr | None:
    """Index arithmetic (int64) in canonical form; int32 values, which no index is, as written."""
    if e.dtype != INDEX_DTYPE:
        return None
    op, a, b = e.op, e.a, e.b
    if op in (Op.ADD, Op.SUB, Op.MUL):
        return linear(e).to_expr()
    if op in (Op.FLOORDIV, Op.FLOORMOD) and isinstance(b, Const) and b.value > 0:
        return _simplify_divmod(op, a, int(b.value), rng)
    if op in (Op.MIN, Op.MAX):
        diff = bound(linear(a).add(linear(b), -1).to_expr(), rng)
        if diff is not None:
            if diff[1] <= 0:
                return a if op == Op.MIN else b
            if diff[0] >= 0:
                return b if op == Op.MIN else a
    return None


def _simplify_divmod(op: Op, a: Expr, c: int, rng: Ranges) -> Expr | None:
    if c == 1:
        return a if op == Op.FLOORDIV else const(0)
    if isinstance(a, Binary) and a.op == op == Op.FLOORDIV and isinstance(a.b, Const):
        return simplify(Binary(Op.FLOORDIV, a.a, const(int(a.b.value) * c)), rng)
    if (
        isinstance(a, Binary)
        and a.op == op == Op.FLOORMOD
        and isinstance(a.b, Const)
        and int(a.b.value) % c == 0
    ):
        return simplify(Binary(Op.FLOORMOD, a.a, const(c)), rng)
    lin = linear(a)
    quotient = Linear({k: v // c for k, v in lin.terms.items() if v % c == 0}, lin.constant // c)
    rest = Linear({k: v for k, v in lin.terms.items() if v % c != 0}, lin.constant % c)
    rest_expr = rest.to_expr()
    rest_bound = bound(rest_expr, rng)
    if rest_bound is not None and rest_bound[0] >= 0 and rest_bound[1] < c:
        return quotient.to_expr() if op == Op.FLOORDIV else rest_expr
    if not quotient.terms and quotient.constant == 0:
        return None
    # What is left may be a division or modulo that the rules above fold ((2 + i//2)//2 leaves
    # (i//2)//2, which is i//4): fold it now, or a second simplify would change the result.
    folded = _simplify_divmod(op, rest_expr, c, rng)
    inner = Binary(op, rest_expr, const(c)) if folded is None else folded
    if op == Op.FLOORMOD:
        return inner
    return linear(Binary(Op.ADD, quotient.to_expr(), inner)).to_expr()


def _decide_compare(e: Binary, rng: Ranges) -> Expr | None:
    diff = bound(simplify(Binary(Op.SUB, e.a, e.b), rng), rng)
    if diff is None:
        return None
    lo, hi = diff
    decided = {
        Op.LT: (hi < 0, lo >= 0),
        Op.LE: (hi <= 0, lo > 0),
        Op.GT: (lo > 0, hi <= 0),
        Op.GE: (lo >= 0, hi < 0),
        Op.EQ: (lo == hi == 0, lo > 0 or hi < 0),
        Op.NE: (lo > 0 or hi < 0, lo == hi == 0),
    }[e.op]
    if decided[0]:
        return TRUE
    if decided[1]:
        return FALSE
    return None


def bound(expr: Expr, ranges: Ranges, extents: Extents | None = None) -> Range | None:
    """Inclusive numeric bounds of an integer expression, or None when a variable is unbounded.
    `extents` gives loop variables' symbolic extents, where a quotient needs them (`_quotient_below`)."""
    if isinstance(expr, Const):
        return int(expr.value), int(expr.value)
    if isinstance(expr, Var):
        r = ranges.get(expr)
        if r is None and isinstance(expr, SizeVar):
            return expr.lo, expr.hi  # its declared range, wherever it appears
        return r
    if isinstance(expr, Select):
        t, f = bound(expr.true_value, ranges, extents), bound(expr.false_value, ranges, extents)
        return None if t is None or f is None else (min(t[0], f[0]), max(t[1], f[1]))
    if not isinstance(expr, Binary):
        return None
    a = bound(expr.a, ranges, extents)
    b = bound(expr.b, ranges, extents)
    out = None if a is None or b is None else _bound_binary(expr.op, a, b)
    if expr.op == Op.FLOORDIV and extents and isinstance(expr.a, Var) and expr.a in extents:
        below = _quotient_below(extents[expr.a], expr.b, ranges)
        if below is not None:
            return (0, below - 1) if out is None else (max(out[0], 0), min(out[1], below - 1))
    return out


def _quotient_below(extent: Expr, divisor: Expr, ranges: Ranges) -> int | None:
    """The c for which a loop of `extent` iterations is c times `divisor` at every value of their
    variables, where the divisor is positive: the loop variable divided by it stays below c. A loop
    fused from 64 column tiles and a symbolic count of row tiles, `(n + 3) // 4 * 128` iterations,
    divided by the row tiles' `(n + 3) // 4 * 2`, gives a column tile below 64, which intervals
    cannot tell (the quotient of the largest iteration by the smallest count is 8191)."""
    whole, part = linear(simplify(extent)), linear(simplify(divisor))
    if not part.terms or part.terms.keys() != whole.terms.keys():
        return None
    ratios = {divmod(whole.terms[t], coef) for t, coef in part.terms.items()}
    if len(ratios) != 1:
        return None
    ((c, remainder),) = ratios
    positive = bound(divisor, ranges)
    if remainder or c <= 0 or whole.constant != c * part.constant or positive is None or positive[0] <= 0:
        return None
    return c


def _bound_binary(op: Op, a: Range, b: Range) -> Range | None:
    if op == Op.ADD:
        return a[0] + b[0], a[1] + b[1]
    if op == Op.SUB:
        return a[0] - b[1], a[1] - b[0]
    if op == Op.MUL:
        p = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
        return min(p), max(p)
    if op == Op.MIN:
        return min(a[0], b[0]), min(a[1], b[1])
    if op == Op.MAX:
        return max(a[0], b[0]), max(a[1], b[1])
    if op in (Op.FLOORDIV, Op.FLOORMOD) and b[0] == b[1] and b[0] > 0:
        c = b[0]
        if op == Op.FLOORDIV:
            return a[0] // c, a[1] // c
        if a[0] // c == a[1] // c:
            return a[0] % c, a[1] % c
        return 0, c - 1
    if b[0] > 0 and op == Op.FLOORDIV and a[0] >= 0:  # a divisor known only by its range
        return a[0] // b[1], a[1] // b[0]
    if b[0] > 0 and op == Op.FLOORMOD:  # a divisor known only by its range (a symbolic tile count)
        return 0, min(b[1] - 1, a[1]) if a[0] >= 0 else b[1] - 1
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
    r = _sym_form(e, inner)
    if r is None and e.dtype in _INDEX_INTS and not free_vars(e) & inner.keys():
        return e, e  # fixed while the inner loops run, whatever its form (`i0 % ((n + 7) // 8)`)
    return r


def _sym_form(e: Expr, inner: Ranges) -> tuple[Expr, Expr] | None:
    if isinstance(e, Select) and e.dtype in _INDEX_INTS:
        t, f = _sym(e.true_value, inner), _sym(e.false_value, inner)
        if t is None or f is None:
            return None
        return Binary(Op.MIN, t[0], f[0]), Binary(Op.MAX, t[1], f[1])
    if not isinstance(e, Binary) or e.dtype not in _INDEX_INTS:
        return None
    a, b = _sym(e.a, inner), _sym(e.b, inner)
    if a is None or b is None:
        return None
    op = e.op
    if op == Op.ADD:
        return Binary(Op.ADD, a[0], b[0]), Binary(Op.ADD, a[1], b[1])
    if op == Op.SUB:
        return Binary(Op.SUB, a[0], b[1]), Binary(Op.SUB, a[1], b[0])
    if op in (Op.MIN, Op.MAX):
        return Binary(op, a[0], b[0]), Binary(op, a[1], b[1])
    if op == Op.MUL:
        return _sym_mul(a, b)
    if op in (Op.FLOORDIV, Op.FLOORMOD) and isinstance(e.b, Const) and int(e.b.value) > 0:
        return _sym_divmod(op, a, int(e.b.value))
    return None


def _sym_mul(a: tuple[Expr, Expr], b: tuple[Expr, Expr]) -> tuple[Expr, Expr] | None:
    if isinstance(a[0], Const) and structural_equal(a[0], a[1]):
        a, b = b, a
    if not (isinstance(b[0], Const) and structural_equal(b[0], b[1])):
        fixed = structural_equal(a[0], a[1]) and structural_equal(b[0], b[1])
        return (Binary(Op.MUL, a[0], b[0]),) * 2 if fixed else None
    c = b[0]
    lo, hi = Binary(Op.MUL, a[0], c), Binary(Op.MUL, a[1], c)
    return (lo, hi) if c.value >= 0 else (hi, lo)


def _sym_divmod(op: Op, a: tuple[Expr, Expr], c: int) -> tuple[Expr, Expr]:
    cc = const(c)
    if op == Op.FLOORDIV:
        return Binary(Op.FLOORDIV, a[0], cc), Binary(Op.FLOORDIV, a[1], cc)
    lo, hi = simplify(a[0]), simplify(a[1])
    if structural_equal(lo, hi):
        return Binary(Op.FLOORMOD, lo, cc), Binary(Op.FLOORMOD, hi, cc)
    span = linear(hi).add(linear(lo), -1)
    if not span.terms and span.constant < c:
        same_period = simplify(Binary(Op.EQ, Binary(Op.FLOORDIV, lo, cc), Binary(Op.FLOORDIV, hi, cc)))
        if structural_equal(same_period, TRUE):
            return Binary(Op.FLOORMOD, lo, cc), Binary(Op.FLOORMOD, hi, cc)
    return const(0), const(c - 1)


def conjuncts(e: Expr) -> list[Expr]:
    """The conditions `e` is the AND of (none for TRUE)."""
    if isinstance(e, Binary) and e.op == Op.AND:
        return conjuncts(e.a) + conjuncts(e.b)
    return [] if structural_equal(e, TRUE) else [e]


def extent_range(extent: int | Expr, ranges: Ranges | None = None) -> Range:
    """The values a loop variable over [0, extent) takes, as numeric bounds: (0, extent - 1), or for a
    symbolic extent (0, its largest value - 1)."""
    if isinstance(extent, int):
        return 0, extent - 1
    b = bound(extent, ranges or {})
    if b is None:
        raise ValueError(f"the extent {extent} is not bounded")
    return 0, b[1] - 1


def largest(dim: int | Expr) -> int:
    """A dimension's largest value: a symbolic one's from its size vars' declared ranges."""
    if isinstance(dim, int):
        return dim
    span = bound(dim, {})
    if span is None:
        raise SymbolicError(f"the dimension {dim} is not bounded by its size vars' ranges")
    return span[1]


def extent_expr(extent: int | Expr) -> Expr:
    """A loop's or a dimension's extent as an expression (a number becomes a constant)."""
    return const(extent) if isinstance(extent, int) else extent


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))
