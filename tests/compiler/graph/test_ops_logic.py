"""Comparisons, boolean logic, where and cast against PyTorch, and their compiled te computes against
their references (ints and bools exactly), on odd and broadcast shapes; integer arithmetic through
the elementwise and reduction operators, wrapping as numpy and PyTorch do."""

import numpy as np
import pytest
import torch

from compiler import graph
from compiler.dtypes import DTYPES, INT_DTYPES, convert, int_range
from compiler.graph import GraphBuilder, run_reference
from tests.compiler.graph.op_check import case, check_op, check_refused, owned_ops, with_torch

rng = np.random.default_rng(7)


def ints(*shape: int, dtype: str = "int64", high: int = 4) -> np.ndarray:
    """Small ranges, so equal elements are common."""
    return rng.integers(-high, high, shape).astype(dtype)


def floats(*shape: int) -> np.ndarray:
    """Whole numbers for half the elements, so that equal elements happen."""
    fraction = np.where(rng.random(shape) < 0.5, rng.standard_normal(shape), 0)
    return (rng.integers(-3, 3, shape) + fraction).astype("float32")


def bools(*shape: int) -> np.ndarray:
    return rng.random(shape) < 0.5


def with_nans(x: np.ndarray) -> np.ndarray:
    """A third of the elements NaN: comparisons with NaN are false, except != (true)."""
    return np.where(rng.random(x.shape) < 0.3, np.nan, x).astype(x.dtype)


COMPARISONS = [
    (name, fn, dtype)
    for name, fn in [
        ("equal", torch.eq),
        ("not_equal", torch.ne),
        ("less", torch.lt),
        ("less_equal", torch.le),
        ("greater", torch.gt),
        ("greater_equal", torch.ge),
    ]
    for dtype in ("float32", "int64", "int32")
]

CASES = [
    *[
        case(name, [arg(3, 1, 7), arg(5, 1)], with_torch(fn), f"{dtype}-broadcast")
        for name, fn, dtype in COMPARISONS
        for arg in [floats if dtype == "float32" else lambda *s, d=dtype: ints(*s, dtype=d)]
    ],
    case("equal", [bools(3, 5), bools(5)], with_torch(torch.eq), "bool"),
    case("not_equal", [bools(2, 9), bools(2, 1)], with_torch(torch.ne), "bool"),
    case("logical_and", [bools(3, 1, 7), bools(5, 1)], with_torch(torch.logical_and), "broadcast"),
    case("logical_or", [bools(3, 5, 7), bools(7)], with_torch(torch.logical_or), "odd"),
    case("logical_xor", [bools(1, 9), bools(4, 1)], with_torch(torch.logical_xor), "broadcast"),
    case("logical_not", [bools(3, 5, 7)], with_torch(torch.logical_not), "odd"),
    case("isnan", [with_nans(floats(3, 5, 7))], with_torch(torch.isnan), "odd"),
    case("not_equal", [with_nans(floats(3, 9)), with_nans(floats(9))], with_torch(torch.ne), "nan"),
    case("equal", [with_nans(floats(3, 9)), with_nans(floats(9))], with_torch(torch.eq), "nan"),
    case("less", [with_nans(floats(3, 9)), with_nans(floats(9))], with_torch(torch.lt), "nan"),
    case(
        "max",
        [bools(3, 5, 7)],
        with_torch(lambda x: x.any(dim=2)),
        "bool-any",
        axes=(2,),
        keepdims=False,
    ),
    case(
        "min",
        [rng.random((3, 5, 7)) < 0.9],
        with_torch(lambda x: x.all(dim=1, keepdim=True)),
        "bool-all",
        axes=(1,),
        keepdims=True,
    ),
    case("where", [bools(3, 1, 7), floats(5, 1), floats(7)], with_torch(torch.where), "float-3-way"),
    case("where", [bools(2, 9), ints(2, 9), ints(1)], with_torch(torch.where), "int64"),
    case("where", [bools(1, 5), bools(3, 1), bools(3, 5)], with_torch(torch.where), "bool"),
    case("add", [ints(3, 5), ints(5)], with_torch(torch.add), "int64"),
    case("subtract", [ints(3, 5, dtype="int32"), ints(3, 1, dtype="int32")], with_torch(torch.sub), "int32"),
    case("multiply", [ints(7, high=50), ints(7, high=50)], with_torch(torch.mul), "int64"),
    case("maximum", [ints(3, 5), ints(5)], with_torch(torch.maximum), "int64"),
    case("minimum", [ints(3, 5, dtype="int32"), ints(5, dtype="int32")], with_torch(torch.minimum), "int32"),
    case("negative", [ints(3, 5)], with_torch(torch.neg), "int64"),
    case("abs", [ints(3, 5, dtype="int32")], with_torch(torch.abs), "int32"),
    case(
        "sum",
        [ints(3, 5, 7)],
        with_torch(lambda x: x.sum(dim=(1,))),
        "int64",
        axes=(1,),
        keepdims=False,
    ),
    case(
        "max",
        [ints(3, 5, 7, dtype="int32")],
        with_torch(lambda x: x.amax(dim=(0, 2), keepdim=True)),
        "int32",
        axes=(0, 2),
        keepdims=True,
    ),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "expected"), CASES)
def test_op_matches_torch_and_compiles_to_its_reference(op, inputs, attrs, expected) -> None:
    check_op(op, inputs, attrs, expected)


TORCH_DTYPES = ("float32", "float64", "int32", "int64", "bool")
CASTS = [(src, dst) for src in DTYPES for dst in DTYPES if src != dst]


def cast_input(dtype: str) -> np.ndarray:
    """Values each conversion treats specially: fractions of both signs, zeros, and for floats
    values beyond int32's range (int64's, infinities and NaN are `test_float_to_int_is_saturated`'s);
    the narrow and unsigned integers over their whole range."""
    if dtype == "bool":
        return bools(3, 5, 7)
    if dtype in ("int32", "int64"):
        return ints(3, 5, 7, dtype=dtype, high=2**31 - 1)
    if dtype in INT_DTYPES:
        low, high = int_range(dtype)
        return rng.integers(low, high, (3, 5, 7), dtype=dtype, endpoint=True)
    return (rng.standard_normal((3, 5, 7)) * 3).astype(dtype)


@pytest.mark.parametrize(("src", "dst"), CASTS, ids=[f"{s}-{d}" for s, d in CASTS])
def test_cast_matches_torch(src: str, dst: str) -> None:
    """Against PyTorch where it has both types; otherwise against `convert` (numpy's astype, with
    floats saturated into the integer's range, NaN as 0)."""
    x = cast_input(src)
    if src in TORCH_DTYPES and dst in TORCH_DTYPES:
        check_op("cast", [x], {"dtype": dst}, with_torch(lambda t: t.to(getattr(torch, dst))))
    else:
        check_op("cast", [x], {"dtype": dst}, lambda a: convert(a, dst))


def test_float_to_int_is_saturated_and_nan_is_zero() -> None:
    """Where C, LLVM's fptosi and numpy leave it undefined, the graph defines it (LLVM's fptosi.sat)."""
    special = [np.nan, np.inf, -np.inf, 3e9, -3e9, 1e19, -1e19, 2.5, -2.5, 0.0, -0.0]
    for dtype in ("float32", "float64"):
        x = np.array(special * 3, dtype)[:31]  # a vector body and a tail
        for dst in INT_DTYPES:
            check_op("cast", [x], {"dtype": dst}, lambda a, d=dst: convert(a, d))
    assert convert(np.array([np.nan, 3e9, -1e19, 2.9], np.float32), "int32").tolist() == [
        0,
        2**31 - 1,
        -(2**31),
        2,
    ]


def test_integer_arithmetic_wraps() -> None:
    big = np.array([2**31 - 1, -(2**31), 2**30], np.int32)
    check_op("add", [big, np.array([1, -1, 2**30], np.int32)], {}, np.add)
    check_op("multiply", [big, np.array([2, 2, 4], np.int32)], {}, np.multiply)
    check_op("abs", [big], {}, np.abs)


def full_range(dtype: str, *shape: int) -> np.ndarray:
    """Values over an integer type's whole range, its extremes, 0, 1 and (signed) -1 among them."""
    low, high = int_range(dtype)
    x = rng.integers(low, high, shape, dtype=dtype, endpoint=True)
    x.flat[:5] = [low, high, 0, 1, -1 if low < 0 else 2]
    return x


def truncated_division(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's integer division (ONNX's Div), by 0 giving 0 and by -1 giving -a, wrapping: in Python's
    exact integers."""
    low, high = int_range(str(a.dtype))
    a, b = np.broadcast_arrays(a, b)

    def divide(x: int, y: int) -> int:
        q = 0 if y == 0 else abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        return (q - low) % (high - low + 1) + low

    return np.array([divide(int(x), int(y)) for x, y in zip(a.flat, b.flat)], a.dtype).reshape(a.shape)


def shifted(left: bool):
    """x << n or x >> n in Python's integers, wrapped into the type; an amount outside the type's bits
    gives 0, or -1 from a right shift of a negative value (numpy's and ONNX's BitShift)."""

    def shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        low, high = int_range(str(a.dtype))
        bits = 8 * a.dtype.itemsize
        a, b = np.broadcast_arrays(a, b)

        def one(x: int, n: int) -> int:
            if not 0 <= n < bits:
                return 0 if left or x >= 0 else -1
            return ((x << n if left else x >> n) - low) % (high - low + 1) + low

        return np.array([one(int(x), int(n)) for x, n in zip(a.flat, b.flat)], a.dtype).reshape(a.shape)

    return shift


INT_ARITHMETIC = [
    ("bitwise_and", np.bitwise_and),
    ("bitwise_or", np.bitwise_or),
    ("bitwise_xor", np.bitwise_xor),
    ("shift_left", shifted(left=True)),
    ("shift_right", shifted(left=False)),
    ("add", np.add),
    ("subtract", np.subtract),
    ("multiply", np.multiply),
    ("maximum", np.maximum),
    ("minimum", np.minimum),
    ("divide", truncated_division),
    ("less", np.less),
    ("greater_equal", np.greater_equal),
    ("equal", np.equal),
]


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize(("op", "fn"), INT_ARITHMETIC, ids=[name for name, _ in INT_ARITHMETIC])
def test_integer_arithmetic_of_every_width_and_sign(op: str, fn, dtype: str) -> None:
    """Over each type's whole range, broadcast: wrapping as numpy does, unsigned compared as unsigned."""
    a, b = full_range(dtype, 3, 1, 9), full_range(dtype, 5, 1)
    b.flat[:5] = [0, 1, 3, high := int_range(dtype)[1], -1 if dtype.startswith("int") else high - 1]
    if op.startswith("shift"):  # amounts in the type's bits, and a few outside
        b = np.array([0, 1, 5, 8 * b.dtype.itemsize - 1, 8 * b.dtype.itemsize], dtype).reshape(5, 1)
    with np.errstate(all="ignore"):
        check_op(op, [a, b], {}, fn)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_unary_ops_and_remainders_of_every_width_and_sign(dtype: str) -> None:
    """abs and sign of an unsigned type are the value and min(x, 1); a remainder by 0 is 0."""
    x, y = full_range(dtype, 4, 11), full_range(dtype, 4, 11)
    y.flat[:3] = [0, 1, 7]
    with np.errstate(all="ignore"):
        check_op("abs", [x], {}, np.abs)
        check_op("negative", [x], {}, np.negative)
        check_op("sign", [x], {}, np.sign)
        check_op("bitwise_not", [x], {}, np.invert)
        check_op("mod", [x, y], {"fmod": False}, lambda a, b: np.where(b == 0, 0, np.mod(a, b)))
        check_op("mod", [x, y], {"fmod": True}, lambda a, b: np.where(b == 0, 0, np.fmod(a, b)))
        check_op("sum", [x], {"axes": (1,), "keepdims": False}, lambda a: a.sum(axis=1, dtype=dtype))
        check_op("max", [x], {"axes": (0,), "keepdims": True}, lambda a: a.max(axis=0, keepdims=True))
        check_op("min", [x], {"axes": (1,), "keepdims": False}, lambda a: a.min(axis=1))


def test_a_mask_computation_end_to_end() -> None:
    """Token ids and an attention mask in, as a Hugging Face model takes them: the additive mask and
    the position ids come out of one compiled model, exactly as numpy computes them."""
    b = GraphBuilder()
    ids = b.input("input_ids", [2, 11], "int64")
    mask = b.input("attention_mask", [2, 11], "int64")
    scores = b.input("scores", [2, 4, 11, 11], "float32")
    keep = b.call(
        "logical_and",
        [b.call("cast", [mask], dtype="bool"), b.call("not_equal", [ids, b.constant("pad", np.array([1]))])],
    )
    fill = b.constant("fill", np.array([-3.4e38], np.float32))
    masked = b.call("where", [b.call("reshape", [keep], shape=(2, 1, 1, 11)), scores, fill])
    count = b.call("sum", [b.call("cast", [keep], dtype="int64")], axes=(1,), keepdims=False)
    module = b.module([masked, count, keep])
    args = [
        ints(2, 11, high=3),
        rng.integers(0, 2, (2, 11)),
        rng.standard_normal((2, 4, 11, 11)).astype("float32"),
    ]
    want = run_reference(module, args)
    got = graph.build(module)(*args)
    for g, w in zip(got, want):
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)
    keep_np = (args[1] != 0) & (args[0] != 1)
    np.testing.assert_array_equal(want[2], keep_np)
    np.testing.assert_array_equal(want[1], keep_np.sum(axis=1))


@pytest.mark.parametrize(
    ("op", "args", "attrs", "reason"),
    [
        ("less", [((3,), "bool"), ((3,), "bool")], {}, "argument 0 has dtype bool"),
        ("equal", [((3,), "int64"), ((3,), "int32")], {}, "arguments mix dtypes"),
        ("logical_and", [((3,), "int64"), ((3,), "int64")], {}, "expected bool"),
        ("logical_not", [((3,), "float32")], {}, "expected bool"),
        ("isnan", [((3,), "int64")], {}, "argument 0 has dtype int64"),
        (
            "where",
            [((3,), "int64"), ((3,), "float32"), ((3,), "float32")],
            {},
            "the condition has dtype int64",
        ),
        ("where", [((3,), "bool"), ((3,), "float32"), ((3,), "int64")], {}, "arguments mix dtypes"),
        ("where", [((3,), "bool"), ((4,), "float32"), ((3,), "float32")], {}, "do not broadcast"),
        ("cast", [((3,), "float32")], {"dtype": "float8_e4m3fn"}, "attribute dtype='float8_e4m3fn' must be"),
        ("exp", [((3,), "int32")], {}, "argument 0 has dtype int32"),
        ("add", [((3,), "bool"), ((3,), "bool")], {}, "argument 0 has dtype bool"),
    ],
)
def test_bad_arguments_are_refused(op: str, args, attrs, reason: str) -> None:
    check_refused(op, args, attrs, reason)


def test_this_module_covers_the_logic_operators() -> None:
    tested = {c.values[0] for c in CASES} | {"cast"}
    assert owned_ops("compiler.graph.ops.logic") <= tested
