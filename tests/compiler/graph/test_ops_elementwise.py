"""The elementwise graph operators (unary, broadcasting binary, batch_norm) against PyTorch, and
their compiled te computes against their references, on odd and degenerate shapes."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from compiler.graph import OPS, Pattern
from compiler.graph.ir import Attrs, TensorType
from tests.compiler.graph.op_check import case, check_op, check_refused, owned_ops, with_torch

rng = np.random.default_rng(0)


def normal(*shape: int, dtype: str = "float32") -> np.ndarray:
    """Wide enough to cross every kink (hardswish's +-3, clip's bounds) and saturate sigmoid."""
    return (rng.standard_normal(shape) * 4).astype(dtype)


def positive(*shape: int, dtype: str = "float32") -> np.ndarray:
    return (rng.random(shape) * 3 + 0.1).astype(dtype)


# Each special value, and the subnormals that scaling must not lose.
SIGNED_SPECIALS = np.array(
    [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, -1e-45, 1.2e-38, 3e38, -3e38, 1.0, -2.5], "float32"
)

# Relative accuracy near 0 is what expm1 and log1p are for; then the edges of their ranges.
EXPM1_INPUTS = np.concatenate(
    [normal(40) * 1e-6, normal(40), [0.0, -0.0, 89.0, -200.0, np.inf, -np.inf]], dtype="float32"
)
LOG1P_INPUTS = np.concatenate(
    [normal(40) * 1e-6, positive(40) * 10, [0.0, -0.0, -1.0, 3e38, np.inf]], dtype="float32"
)

UNARY = [
    case("relu", [normal(3, 5, 7)], with_torch(F.relu), "odd"),
    case("relu", [normal(1, 1)], with_torch(F.relu), "ones"),
    case("sigmoid", [normal(3, 5, 7) * 10], with_torch(torch.sigmoid), "saturating"),
    case("tanh", [normal(3, 5, 7)], with_torch(torch.tanh), "odd"),
    case("exp", [normal(3, 5, 7)], with_torch(torch.exp), "odd"),
    case("log", [positive(3, 5, 7)], with_torch(torch.log), "odd"),
    case("sqrt", [positive(3, 5, 7)], with_torch(torch.sqrt), "odd"),
    case("erf", [normal(3, 5, 7) / 2], with_torch(torch.erf), "odd"),
    case("erf", [normal(2, 3, dtype="float64")], with_torch(torch.erf), "float64"),
    case("negative", [normal(3, 5, 7)], with_torch(torch.neg), "odd"),
    case("abs", [normal(3, 5, 7)], with_torch(torch.abs), "odd"),
    case("silu", [normal(3, 5, 7)], with_torch(F.silu), "odd"),
    case("hardswish", [normal(3, 5, 7)], with_torch(F.hardswish), "odd"),
    case(
        "hardsigmoid",
        [normal(3, 5, 7)],
        with_torch(F.hardsigmoid),
        "torch",
        alpha=1 / 6,
        beta=0.5,
    ),
    case(
        "hardsigmoid",
        [normal(1, 1)],
        lambda x: np.clip(0.2 * x + 0.5, 0, 1),
        "onnx-default",
        alpha=0.2,
        beta=0.5,
    ),
    case("gelu", [normal(3, 5, 7)], with_torch(F.gelu), "erf", approximate="none"),
    case(
        "gelu",
        [normal(3, 5, 7)],
        with_torch(lambda x: F.gelu(x, approximate="tanh")),
        "tanh",
        approximate="tanh",
    ),
    case(
        "gelu",
        [normal(2, 9, dtype="float64")],
        with_torch(F.gelu),
        "float64",
        approximate="none",
    ),
    case(
        "clip",
        [normal(3, 5, 7)],
        with_torch(lambda x: torch.clamp(x, -1.5, 2.0)),
        "both",
        min=-1.5,
        max=2.0,
    ),
    case("clip", [normal(3, 5, 7)], with_torch(lambda x: torch.clamp(x, min=0)), "min", min=0, max=None),
    case(
        "clip",
        [np.arange(-7, 8, dtype="int64").reshape(3, 5)],
        lambda x: np.clip(x, -2, 3),  # the integers within [-2.5, 3.5]
        "int64",
        min=-2.5,
        max=3.5,
    ),
    case(
        "clip",
        [np.array([-(2**31), -1, 0, 2**31 - 1], dtype="int32")],
        lambda x: np.clip(x, -(2**31), 5),  # a bound beyond int32 saturates
        "int32-saturated",
        min=-1e12,
        max=5,
    ),
    case(
        "clip",
        [normal(3, 5, 7)],
        with_torch(lambda x: torch.clamp(x, max=6.0)),
        "max",
        min=None,
        max=6.0,
    ),
    case(
        "clip",
        [normal(3, 5)],
        with_torch(lambda x: torch.clamp(x, 1.0, -1.0)),
        "min-above-max",
        min=1.0,
        max=-1.0,
    ),
    case("floor", [normal(3, 5, 7)], with_torch(torch.floor), "odd"),
    case("ceil", [normal(3, 5, 7)], with_torch(torch.ceil), "odd"),
    case("round", [np.arange(-7, 8, dtype="float32").reshape(3, 5) / 2], with_torch(torch.round), "halves"),
    case("trunc", [normal(3, 5, 7)], with_torch(torch.trunc), "odd"),
    case("sign", [SIGNED_SPECIALS], lambda x: np.sign(x), "specials"),  # NaN stays NaN, as numpy's
    case("sign", [normal(3, 5, 7)], with_torch(torch.sign), "odd"),
    case("sign", [np.array([-(2**63), -5, 0, 7, 2**63 - 1], "int64")], with_torch(torch.sign), "int64"),
    case("expm1", [EXPM1_INPUTS], with_torch(torch.expm1), "tiny-to-overflow"),
    case("expm1", [normal(2, 9, dtype="float64") * 1e-9], with_torch(torch.expm1), "float64-tiny"),
    case("log1p", [LOG1P_INPUTS], with_torch(torch.log1p), "tiny-to-inf"),
    case("reciprocal", [normal(3, 5, 7)], with_torch(torch.reciprocal), "odd"),
    case(
        "elu",
        [normal(3, 5, 7)],
        with_torch(lambda x: F.elu(x, 0.7)),
        "elu",
        alpha=0.7,
        scale=1.0,
        input_scale=1.0,
    ),
    case(
        "elu",
        [normal(3, 5, 7)],
        with_torch(F.selu),
        "selu",
        alpha=1.6732632423543772,
        scale=1.0507009873554805,
        input_scale=1.0,
    ),
    case(
        "elu",
        [normal(2, 9, dtype="float64")],
        with_torch(lambda x: F.celu(x, 0.5)),
        "celu-float64",
        alpha=0.5,
        scale=1.0,
        input_scale=2.0,
    ),
    case("softplus", [normal(3, 5, 7) * 10], with_torch(F.softplus), "wide", beta=1.0),
    case("softplus", [normal(3, 5)], with_torch(lambda x: F.softplus(x, beta=2.5)), "beta", beta=2.5),
    case(
        "leaky_relu",
        [normal(3, 5, 7)],
        with_torch(lambda x: F.leaky_relu(x, 0.1)),
        "odd",
        alpha=0.1,
    ),
]

BINARY_TORCH = {
    "add": torch.add,
    "subtract": torch.sub,
    "multiply": torch.mul,
    "divide": torch.div,
    "power": torch.pow,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}


def binary_inputs(op: str, *shapes: tuple[int, ...], dtype: str = "float32") -> list[np.ndarray]:
    """power on positive bases: a negative base's fractional power is nan on both sides."""
    base = positive(*shapes[0], dtype=dtype) if op == "power" else normal(*shapes[0], dtype=dtype)
    return [base, normal(*shapes[1], dtype=dtype) / (2 if op == "power" else 1)]


def bit_inputs() -> list[np.ndarray]:
    """Values of both signs and shift amounts within int32's bits (test_ops_logic has those outside)."""
    values = np.random.default_rng(5).integers(-(2**31), 2**31 - 1, (3, 1, 7)).astype("int32")
    return [values, np.array([[0], [1], [7], [31], [16]], "int32")]


def int_power_inputs() -> list[np.ndarray]:
    """Bases of both signs to exponents up to 70: the larger powers wrap, as PyTorch's do."""
    bases = np.array([[-7, -2, -1, 0, 1, 2, 3, 13]], "int64")
    return [bases, np.array([[0], [1], [5], [31], [63], [70]], "int64")]


BINARY = [
    case(op, binary_inputs(op, (2, 1, 5), (3, 1)), with_torch(fn), "broadcast")
    for op, fn in BINARY_TORCH.items()
] + [
    case("add", binary_inputs("add", (3, 5, 7), (3, 5, 7)), with_torch(torch.add), "same"),
    case("add", binary_inputs("add", (1, 1), (1, 1)), with_torch(torch.add), "ones"),
    case("multiply", binary_inputs("multiply", (1,), (3, 5)), with_torch(torch.mul), "scalar"),
    case("subtract", binary_inputs("subtract", (3, 5), (2, 1, 1)), with_torch(torch.sub), "rank"),
    case(
        "divide",
        binary_inputs("divide", (4, 1), (1, 3), dtype="float64"),
        with_torch(torch.div),
        "float64",
    ),
    *[
        case(op, bit_inputs(), with_torch(fn), "int32-broadcast")
        for op, fn in {
            "bitwise_and": torch.bitwise_and,
            "bitwise_or": torch.bitwise_or,
            "bitwise_xor": torch.bitwise_xor,
            "shift_left": torch.bitwise_left_shift,
            "shift_right": torch.bitwise_right_shift,
        }.items()
    ],
    case("bitwise_not", bit_inputs()[:1], with_torch(torch.bitwise_not), "int32"),
    case("power", int_power_inputs(), with_torch(torch.pow), "int64-wrapping"),
]


def batch_norm_inputs(*shape: int) -> list[np.ndarray]:
    c = shape[1]
    return [normal(*shape), normal(c), normal(c), normal(c), positive(c)]


def torch_batch_norm(eps: float):
    return with_torch(lambda x, s, b, m, v: F.batch_norm(x, m, v, s, b, training=False, eps=eps))


def mod_inputs(dtype: str) -> list[np.ndarray]:
    """Every sign pairing, and for ints a divisor of 0 and of -1 beside the int's minimum."""
    if dtype.startswith("float"):
        return [normal(4, 6, dtype=dtype) * 3, np.array([[2.5], [-1.5], [0.75], [-3.0]], dtype)]
    low = np.iinfo(dtype).min
    a = np.array([[7, -7, 0, low, 5, -9], [3, -3, low, 1, -1, 8]], dtype)
    return [a, np.array([[2, -3, 0, -1, 5, 4]], dtype)]


MOD = [
    case("mod", mod_inputs("float32"), with_torch(torch.remainder), "float-remainder", fmod=False),
    case("mod", mod_inputs("float64"), with_torch(torch.fmod), "float-fmod", fmod=True),
    case("mod", mod_inputs("int64"), lambda a, b: _np_safe_mod(a, b, np.mod), "int64-floor", fmod=False),
    case("mod", mod_inputs("int32"), lambda a, b: _np_safe_mod(a, b, np.fmod), "int32-fmod", fmod=True),
]


def _np_safe_mod(a: np.ndarray, b: np.ndarray, fn) -> np.ndarray:
    """numpy's result, with 0 where the divisor is 0 or -1 (where numpy's int minimum overflows)."""
    with np.errstate(all="ignore"):
        return np.where((b == 0) | (b == -1), 0, fn(a, np.where(b == 0, 1, b))).astype(a.dtype)


BATCH_NORM = [
    case("batch_norm", batch_norm_inputs(2, 3, 5, 7), torch_batch_norm(1e-5), "nchw", epsilon=1e-5),
    case("batch_norm", batch_norm_inputs(5, 3), torch_batch_norm(1e-3), "nc", epsilon=1e-3),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "expected"), UNARY + BINARY + MOD + BATCH_NORM)
def test_op_computes_what_pytorch_does(op, inputs, attrs, expected):
    check_op(op, inputs, attrs, expected)


def test_every_elementwise_op_is_checked():
    checked = {p.values[0] for p in UNARY + BINARY + MOD + BATCH_NORM}
    assert checked == owned_ops("compiler.graph.ops.elementwise")


def test_patterns_and_flops():
    t = TensorType((2, 3, 5), "float32")
    for name in owned_ops("compiler.graph.ops.elementwise"):
        assert OPS[name].pattern in (Pattern.ELEMWISE, Pattern.BROADCAST)
    assert OPS["relu"].pattern == Pattern.ELEMWISE and OPS["add"].pattern == Pattern.BROADCAST
    assert OPS["add"].flops([t, t], t, Attrs()) == 30
    gelu = Attrs.of({"approximate": "tanh"})
    assert OPS["gelu"].flops([t], t, gelu) > OPS["gelu"].flops([t], t, Attrs.of({"approximate": "none"})) > 30


F32, F64, I32 = "float32", "float64", "int32"


@pytest.mark.parametrize(
    ("op", "args", "attrs", "reason"),
    [
        ("relu", [((3,), I32)], {}, "argument 0 has dtype int32"),
        ("relu", [((3,), F32), ((3,), F32)], {}, "takes 1 argument"),
        ("exp", [((3,), F32)], {"alpha": 1.0}, r"unexpected attribute 'alpha' \(takes \[\]\)"),
        (
            "gelu",
            [((3,), F32)],
            {"approximate": "fast"},
            "attribute approximate='fast' must be 'none' or 'tanh'",
        ),
        ("leaky_relu", [((3,), F32)], {}, r"missing attribute 'alpha' \(takes \['alpha'\]\)"),
        ("leaky_relu", [((3,), F32)], {"alpha": True}, "attribute alpha=True must be a number"),
        ("clip", [((3,), F32)], {"min": "0", "max": None}, "attribute min='0' must be a number or None"),
        ("add", [((2, 3), F32), ((4,), F32)], {}, r"shapes \(2, 3\) and \(4,\) do not broadcast"),
        ("add", [((2, 3), F32), ((2, 3), F64)], {}, "arguments mix dtypes"),
        ("power", [((2, 3), "bool"), ((2, 3), "bool")], {}, "dtype bool"),
        ("batch_norm", [((3,), F32)] * 5, {"epsilon": 1e-5}, r"x has shape \(3,\)"),
        (
            "batch_norm",
            [((2, 3, 4), F32), ((3,), F32), ((3,), F32), ((4,), F32), ((3,), F32)],
            {"epsilon": 1e-5},
            r"mean has shape \(4,\); expected \(3,\)",
        ),
        ("batch_norm", [((2, 3), F32)] + [((3,), F32)] * 4, {"epsilon": -1.0}, "epsilon -1.0 is negative"),
    ],
)
def test_bad_arguments_are_refused_naming_node_and_op(op, args, attrs, reason):
    check_refused(op, args, attrs, reason)
