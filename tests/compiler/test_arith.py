"""simplify: random index expressions keep their value under every assignment within the ranges, are
canonical (a second simplify changes nothing), and a sum comes out in one form however it was
nested (terms in the order they first appear)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.arith import simplify
from compiler.ir import Binary, Const, Expr, Var, const

VARS = {Var("i"): (0, 7), Var("j"): (0, 31), Var("k"): (0, 2)}
OPS = ("add", "sub", "mul", "floordiv", "floormod", "min", "max")


def evaluate(e: Expr, env: dict[Var, int]) -> int:
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return env[e]
    assert isinstance(e, Binary)
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    return {
        "add": lambda: a + b,
        "sub": lambda: a - b,
        "mul": lambda: a * b,
        "floordiv": lambda: a // b,
        "floormod": lambda: a % b,
        "min": lambda: min(a, b),
        "max": lambda: max(a, b),
    }[e.op]()


def expressions(depth: int = 4) -> st.SearchStrategy[Expr]:
    leaves = st.one_of(st.sampled_from(list(VARS)), st.integers(-9, 40).map(const))

    def extend(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        # Divisors are positive constants, as in the index expressions schedules make.
        div = st.tuples(st.sampled_from(["floordiv", "floormod"]), children, st.integers(1, 12).map(const))
        other = st.tuples(st.sampled_from([op for op in OPS if "floor" not in op]), children, children)
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
        == Binary("add", Binary("add", Binary("mul", i, const(64)), j), const(1))
    )
    assert simplify((i + k) * (j + 1)) == Binary("mul", Binary("add", i, k), Binary("add", j, const(1)))
    assert simplify(((i * 4 + k) // 4) * 4 + j - (i * 4 + k) // 4 * 4, VARS) == j  # k // 4 == 0 in range


def test_int32_constants_keep_their_type():
    two, three = Const(2, "int32"), Const(3, "int32")
    assert simplify(Binary("add", two, three)) == Const(5, "int32")
    assert simplify(Binary("mul", Binary("add", two, three), two)) == Const(10, "int32")
