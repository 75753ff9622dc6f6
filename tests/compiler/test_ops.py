"""Every op of the vocabulary, end to end: nodes check operand dtypes, the op prints, folds like numpy,
compiles to scalar and to vector code that computes what numpy computes, survives serialization, is
counted by its feature column, and (where the expression language has it) parses to the same thing.

Adding an op to compiler.ops needs no change here unless its operands need a special domain."""

import numpy as np
import pytest

from compiler import Schedule, build, te
from compiler.dtypes import FLOAT_DTYPES, INT_DTYPES, int_range
from compiler.ir import IRError, Unary, Var, apply, binary, const
from compiler.ops import BY_NAME, BY_SYNTAX, Op
from compiler.serialize import from_json, to_json
from compiler.workloads import workload_from_spec
from tests.machines import AVX512
from tuner.search.features import FEATURE_NAMES, extract_features

N = 80  # a multiple of the vector tile below: a guarded tail would keep the loop scalar
# Operand domains where an op is not defined everywhere.
POSITIVE = {Op.LOG, Op.SQRT, Op.POW}  # pow: a negative base has no real power
NONZERO_DIVISOR = {Op.DIV, Op.FLOORDIV, Op.FLOORMOD, Op.FMOD}


def operand_dtype(op: Op) -> str:
    return op.spec.operands[0]


def inputs(op: Op, rng: np.random.Generator) -> list[np.ndarray]:
    """Arrays of the stored dtype (bool operands come from comparisons `x > 0`)."""
    dtype = operand_dtype(op)
    stored = "float32" if dtype == "bool" else dtype
    out = []
    for k in range(op.spec.arity):
        if dtype in FLOAT_DTYPES:
            x = rng.standard_normal(N).astype(stored) * 3
        else:
            x = rng.integers(-20, 20, N).astype(stored)
        if op in POSITIVE:
            x = np.abs(x) + 0.5
        if op in NONZERO_DIVISOR and k == 1:
            x = np.where(x == 0, 3, x).astype(stored)
        out.append(x)
    return out


def kernel_func(op: Op) -> tuple[object, list[te.Tensor], te.Tensor]:
    dtype = operand_dtype(op)
    stored = "float32" if dtype == "bool" else dtype
    args = [te.placeholder((N,), stored, f"X{k}") for k in range(op.spec.arity)]

    def body(i: Var) -> object:
        operands = [x[i] > 0.0 if dtype == "bool" else x[i] for x in args]
        value = apply(op, *operands)
        return te.select(value, 1.0, 0.0) if value.dtype == "bool" else value

    out = te.compute((N,), body, name="Y")
    return te.create_prim_func([*args, out], name=f"op_{op.spec.name}"), args, out


def reference(op: Op, xs: list[np.ndarray]) -> np.ndarray:
    operands = [x > 0 for x in xs] if operand_dtype(op) == "bool" else xs
    with np.errstate(all="ignore"):
        value = np.asarray(op.spec.numpy(*operands))
    return value.astype(np.float32) if value.dtype == bool else value


def run(func: object, xs: list[np.ndarray]) -> np.ndarray:
    kernel = build(func)
    y = np.full(N, np.nan if xs[0].dtype.kind == "f" else 0, dtype=reference_dtype(func))
    kernel(*xs, y)
    return y


def reference_dtype(func: object) -> str:
    return func.params[-1].dtype


@pytest.mark.parametrize("op", list(Op), ids=lambda op: op.spec.name)
def test_op_is_complete_everywhere(op: Op):
    spec = op.spec
    assert BY_NAME[spec.name] is op
    xs = inputs(op, np.random.default_rng(0))
    expected = reference(op, xs)
    func, _, _ = kernel_func(op)

    # Prints with its symbol, or as T.name(...).
    assert (spec.symbol or f"T.{spec.name}(") in func.script()

    # Compiles: scalar code, and vector code, compute what numpy computes.
    sch = Schedule(func)
    (i,) = sch.get_loops(sch.get_block("Y"))
    _, inner = sch.split(i, [None, 16])
    sch.vectorize(inner)
    for variant in (func, sch.func):
        np.testing.assert_allclose(run(variant, xs), expected, rtol=1e-5, atol=1e-6)
    if spec.vectorizes and operand_dtype(op) in FLOAT_DTYPES:
        assert "x float>" in build(sch.func).compiled.llvm_ir

    # Folds like numpy on constants.
    values = [x[3].item() if operand_dtype(op) != "bool" else bool(x[3] > 0) for x in xs]
    operands = [const(v, operand_dtype(op)) for v in values]
    folded = op.fold(*values)
    assert folded == pytest.approx(reference(op, [x[3:4] for x in xs])[0], rel=1e-5)
    assert apply(op, *operands).dtype == op.result_dtype(operand_dtype(op))

    # Survives serialization.
    assert from_json(to_json(func)) == func

    # Counted by its feature column.
    column = FEATURE_NAMES.index(op.feature(operand_dtype(op)))
    assert extract_features(func, AVX512)[:, column].max() > 0


@pytest.mark.parametrize("syntax", sorted(BY_SYNTAX), ids=str)
def test_ops_of_the_expression_language_parse_to_themselves(syntax: str):
    op = BY_SYNTAX[syntax]
    names = [f"X{k}" for k in range(op.spec.arity)]
    loads = [f"{n}[i]" for n in names]
    text = f"{syntax}({', '.join(loads)})" if syntax.isidentifier() else f" {syntax} ".join(loads)
    wl = workload_from_spec({"expr": f"Y[i] = {text}", "inputs": {n: [N] for n in names}})
    xs = inputs(op, np.random.default_rng(1))
    np.testing.assert_allclose(wl.reference(*xs)[0], reference(op, xs), rtol=1e-6)
    ops_in_program = {e.op for e in _nodes(wl.func) if hasattr(e, "op")}
    assert op in ops_in_program


def _nodes(func):
    from compiler.visit import walk_expr, walk_stmt

    for s in walk_stmt(func.body):
        if hasattr(s, "body") and hasattr(s.body, "value"):
            yield from walk_expr(s.body.value)


def test_nodes_check_their_op_and_operand_dtypes():
    i, x = Var("i"), Var("x", "float32")
    with pytest.raises(IRError, match=r"floordiv takes int8 or int16 .* or uint64 operands"):
        binary(Op.FLOORDIV, x, x)
    with pytest.raises(IRError, match="div takes float32 or float64"):
        binary(Op.DIV, i, i)
    with pytest.raises(IRError, match="operand dtypes differ"):
        binary(Op.ADD, i, x)
    with pytest.raises(IRError, match="not an op of 2"):
        binary(Op.EXP, x, x)
    with pytest.raises(IRError, match="not an op of 2"):
        binary("fma", x, x)  # type: ignore[arg-type]
    with pytest.raises(IRError, match="exp takes float32 or float64"):
        Unary(Op.EXP, i)


@pytest.mark.parametrize("reduce", [te.max, te.min], ids=["max", "min"])
def test_long_min_max_reductions_build_and_propagate_nan_like_numpy(reduce):
    """A scalar max/min reduction of 128 steps (a softmax row) once aborted LLVM's loop vectorizer."""
    rows, cols = 3, 128
    a = te.placeholder((rows, cols), "float32", "A")
    k = te.reduce_axis((0, cols), "k")
    out = te.compute((rows,), lambda i: reduce(a[i, k], axis=k), name="R")
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    x[1, 7] = np.nan
    y = np.zeros(rows, np.float32)
    build(te.create_prim_func([a, out]))(x, y)
    expected = x.max(axis=1) if reduce is te.max else x.min(axis=1)
    np.testing.assert_array_equal(y, expected)


INT_OPS = [op for op in Op if "int8" in op.spec.operands]


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", INT_OPS, ids=lambda op: op.spec.name)
def test_integer_ops_wrap_and_compare_by_their_sign_like_numpy(op: Op, dtype: str):
    """Every integer op on every integer type, scalar and vector, on values spanning the type's whole
    range: arithmetic wraps, an unsigned type compares and divides as unsigned, as numpy computes."""
    rng = np.random.default_rng(abs(hash((op.spec.name, dtype))) % 2**32)
    low, high = int_range(dtype)
    xs = [rng.integers(low, high, N, dtype=dtype, endpoint=True) for _ in range(op.spec.arity)]
    xs[0][:6] = [low, high, 0, 1, high - 1, low + 1]
    if op in NONZERO_DIVISOR:
        xs[1] = np.where(xs[1] == 0, 7, xs[1]).astype(dtype)
        if low < 0:  # low // -1 overflows: undefined in LLVM, as in C
            xs[1] = np.where((xs[0] == low) & (xs[1] == -1), 3, xs[1]).astype(dtype)
    args = [te.placeholder((N,), dtype, f"X{k}") for k in range(op.spec.arity)]
    out = te.compute((N,), lambda i: apply(op, *(x[i] for x in args)), name="Y")
    func = te.create_prim_func([*args, out])
    with np.errstate(all="ignore"):
        expected = np.asarray(op.spec.numpy(*xs))
    sch = Schedule(func)
    (i,) = sch.get_loops(sch.get_block("Y"))
    sch.vectorize(sch.split(i, [None, 16])[1])
    for variant in (func, sch.func):
        y = np.zeros(N, expected.dtype)
        build(variant)(*xs, y)
        np.testing.assert_array_equal(y, expected)
    for k in range(6):
        folded = op.fold(*(x[k].item() for x in xs))
        assert const(folded, out.dtype).value == expected[k].item()
