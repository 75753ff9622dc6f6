"""simplify: random index expressions keep their value under every assignment within the ranges, are
canonical (a second simplify changes nothing), and a sum comes out in one form however it was
nested (terms in the order they first appear)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.arith import bound, linear, simplify, symbolic_range
from compiler.ir import Binary, Const, Expr, Select, SizeVar, Var, const
from compiler.ops import Op

VARS = {Var("i"): (0, 7), Var("j"): (0, 31), Var("k"): (0, 2)}
OPS = (Op.ADD, Op.SUB, Op.MUL, Op.FLOORDIV, Op.FLOORMOD, Op.MIN, Op.MAX)


def evaluate(e: Expr, env: dict[Var, int]) -> int:
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return env[e]
    assert isinstance(e, Binary)
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    return {
        Op.ADD: lambda: a + b,
        Op.SUB: lambda: a - b,
        Op.MUL: lambda: a * b,
        Op.FLOORDIV: lambda: a // b,
        Op.FLOORMOD: lambda: a % b,
        Op.MIN: lambda: min(a, b),
        Op.MAX: lambda: max(a, b),
    }[e.op]()


def expressions(depth: int = 4) -> st.SearchStrategy[Expr]:
    leaves = st.one_of(st.sampled_from(list(VARS)), st.integers(-9, 40).map(const))

    def extend(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        # Divisors are positive constants, as in the index expressions schedules make.
        div = st.tuples(st.sampled_from([Op.FLOORDIV, Op.FLOORMOD]), children, st.integers(1, 12).map(const))
        other = st.tuples(
            st.sampled_from([op for op in OPS if op not in (Op.FLOORDIV, Op.FLOORMOD)]), children, children
        )
        return st.one_of(div, other).map(lambda t: Binary(t[0], t[1], t[2]))

    return st.recursive(leaves, extend, max_leaves=2**depth)


ASSIGNMENTS = st.fixed_dictionaries({v: st.integers(lo, hi) for v, (lo, hi) in VARS.items()})


@settings(max_examples=300, deadline=None)
@given(expr=expressions(), env=ASSIGNMENTS, with_ranges=st.booleans())
def test_simplify_keeps_the_value_and_is_canonical(expr, env, with_ranges):
    ranges = VARS if with_ranges else None
    out = simplify(expr, ranges)
    assert evaluate(out, env) == evaluate(expr, env)
    assert simplify(out, ranges) == out


def test_sums_are_canonical_however_they_are_nested():
    i, j, k = VARS
    left = ((i * 32 + j) * 2 + 1) - j
    right = i * 16 * 4 + ((j + (k - k)) + 1)
    assert (
        simplify(left)
        == simplify(right)
        == Binary(Op.ADD, Binary(Op.ADD, Binary(Op.MUL, i, const(64)), j), const(1))
    )
    assert simplify((i + k) * (j + 1)) == Binary(Op.MUL, Binary(Op.ADD, i, k), Binary(Op.ADD, j, const(1)))
    assert simplify(((i * 4 + k) // 4) * 4 + j - (i * 4 + k) // 4 * 4, VARS) == j  # k // 4 == 0 in range


def test_int32_constants_keep_their_type():
    two, three = Const(2, "int32"), Const(3, "int32")
    assert simplify(Binary(Op.ADD, two, three)) == Const(5, "int32")
    assert simplify(Binary(Op.MUL, Binary(Op.ADD, two, three), two)) == Const(10, "int32")


def test_a_division_left_over_from_a_sum_folds_in_the_same_pass():
    """(2 + i//2)//2 leaves (i//2)//2 beside the constant: it must come out as i//4 + 1 at once, or a
    second simplify would change the result (hypothesis found this)."""
    i = Var("i")
    half = Binary(Op.FLOORDIV, i, const(2))
    out = simplify(Binary(Op.FLOORDIV, Binary(Op.ADD, const(2), half), const(2)))
    assert out == Binary(Op.ADD, Binary(Op.FLOORDIV, i, const(4)), const(1))
    assert simplify(out) == out


def test_the_range_of_a_select_of_indices_spans_both_sides():
    """A Winograd transform reads its window at `y * 2 + select(e == 0, 0, 2)`: compute_at needs the
    rows that read may touch, the union of the sides' ranges."""
    y, e = Var("y"), Var("e")
    column = Select(Binary(Op.EQ, e, const(0)), const(0), const(2))
    lo, hi = symbolic_range(Binary(Op.ADD, Binary(Op.MUL, y, const(2)), column), {e: (0, 3)})
    assert lo == Binary(Op.MUL, y, const(2)) and hi == Binary(Op.ADD, Binary(Op.MUL, y, const(2)), const(2))


def test_a_split_fused_loops_row_major_offset_is_linear_in_it():
    """y * 56 + x, with y and x a fused loop's `f // 56` and `f % 56` and f split by 16: the offset
    must come out as f itself, or the vectorized loop's lanes are gathered one by one."""
    f0, f1, c = Var("f0"), Var("f1"), Var("c")
    f = f0 * 16 + f1
    y, x = Binary(Op.FLOORDIV, f, const(56)), Binary(Op.FLOORMOD, f, const(56))
    ranges = {f0: (0, 195), f1: (0, 15), c: (0, 63)}
    assert simplify((c * 56 + y) * 56 + x, ranges) == simplify(c * 3136 + f0 * 16 + f1)
    assert simplify(y * 168 + x * 3 + 1, ranges) == simplify(f0 * 48 + f1 * 3 + 1)


@settings(max_examples=200, deadline=None)
@given(
    coefs=st.lists(st.integers(-20, 20), min_size=4, max_size=4),
    scale=st.integers(-3, 3),
    c=st.integers(2, 12),
    env=ASSIGNMENTS,
)
def test_a_quotient_and_remainder_recombine_into_what_they_divide(coefs, scale, c, env):
    """Of a sum of loop variables (a fused loop, split), whatever the divisor and the ranges."""
    i, j, k = VARS
    inner = i * coefs[0] + j * coefs[1] + k * coefs[2] + coefs[3]
    quotient, remainder = Binary(Op.FLOORDIV, inner, const(c)), Binary(Op.FLOORMOD, inner, const(c))
    divided = quotient * (scale * c) + remainder * scale
    expr = divided + i * 2 + j
    out = simplify(expr, VARS)
    assert evaluate(out, env) == evaluate(expr, env)
    assert simplify(out, VARS) == out
    recombined = linear(simplify(inner * scale + i * 2 + j, VARS))
    assert (linear(out).terms, linear(out).constant) == (recombined.terms, recombined.constant)


@settings(max_examples=200, deadline=None)
@given(st.integers(-50, 50), st.integers(0, 60), st.integers(1, 9), st.integers(0, 9), st.integers(0, 10**6))
def test_a_remainder_by_a_divisor_known_by_its_range_is_bounded_soundly(lo, span, d_lo, d_span, pick):
    """x % d with d anywhere in [d_lo, d_hi] (a symbolic tile count), and x // d for x >= 0: every
    value lies in the bound."""
    x, d = Var("x"), Var("d")
    ranges = {x: (lo, lo + span), d: (d_lo, d_lo + d_span)}
    b = bound(Binary(Op.FLOORMOD, x, d), ranges)
    assert b is not None
    xv = lo + pick % (span + 1)
    dv = d_lo + pick % (d_span + 1)
    assert b[0] <= xv % dv <= b[1]
    if lo >= 0:
        q = bound(Binary(Op.FLOORDIV, x, d), ranges)
        assert q is not None and q[0] <= xv // dv <= q[1]


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 8), st.integers(1, 6), st.integers(1, 70), st.integers(1, 4))
def test_a_fused_loop_divided_by_its_symbolic_factor_stays_below_the_other(tile, factor, hi, scale):
    """A loop of `count * factor` iterations (count = (n + tile - 1) // tile * scale, a symbolic tile
    count) divided by `count` is below `factor` at every n of the range, and the bound says so."""
    n, f = SizeVar("n", lo=1, hi=hi), Var("f")
    count = simplify(
        Binary(Op.MUL, Binary(Op.FLOORDIV, Binary(Op.ADD, n, const(tile - 1)), const(tile)), const(scale))
    )
    extent = simplify(Binary(Op.MUL, count, const(factor)))
    ranges = {f: (0, bound(extent, {})[1] - 1)}
    assert bound(Binary(Op.FLOORDIV, f, count), ranges, {f: extent}) == (0, factor - 1)
    other = bound(  # no factor of the loop: intervals only, and sound
        Binary(Op.FLOORDIV, f, Binary(Op.ADD, count, const(1))), ranges, {f: extent}
    )
    counts = [(m + tile - 1) // tile * scale for m in range(1, hi + 1)]
    assert other is not None and other[1] >= max((c * factor - 1) // (c + 1) for c in counts)
