"""Elementwise graph operators: unary activations and math, numpy-broadcasting binary arithmetic, and
inference batch_norm. Each reference computes what PyTorch does, to float rounding."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from compiler import te
from compiler.dtypes import INT_DTYPES, convert, is_unsigned
from compiler.graph.ir import FLOAT_DTYPES, Attrs, TensorType
from compiler.graph.op import Pattern, attr_float, check
from compiler.graph.ops.checks import (
    BOOL,
    FLOAT,
    NUMERIC,
    OPTIONAL_FLOAT,
    Kind,
    broadcast_shape,
    float_args,
    one_of,
    register_op,
    same_dtype_args,
)
from compiler.graph.ops.indexing import broadcast_load, compute
from compiler.ir import Expr, apply, binary, const
from compiler.ops import Op

TeFn = Callable[[Expr, Attrs], Expr]
NpFn = Callable[[np.ndarray, Attrs], np.ndarray]
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _unary(
    name: str,
    te_fn: TeFn,
    np_fn: NpFn,
    flops: Callable[[Attrs], int],
    dtypes: Sequence[str] = FLOAT_DTYPES,
    **schema: Kind,
) -> None:
    """Register an elementwise op of one tensor of `dtypes`; `flops` counts per element."""

    def infer_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        (x,) = same_dtype_args(types, 1, dtypes)
        return x

    def compute_(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
        (x,) = inputs
        return compute(x.shape, lambda i: te_fn(x[i], attrs), out)

    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        with np.errstate(all="ignore"):  # inf and nan where PyTorch gives them, without warnings
            return np_fn(arrays[0], attrs)

    def count(types: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
        return out.size * flops(attrs)

    register_op(name, Pattern.ELEMWISE, schema, infer_type, compute_, reference, count)


def _per_element(n: int) -> Callable[[Attrs], int]:
    return lambda attrs: n


def _np_sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _te_abs(x: Expr) -> Expr:
    """fabs for floats; max(x, -x) for signed ints, which wraps at the int's minimum as numpy's abs
    does; an unsigned int is its own magnitude."""
    if is_unsigned(x.dtype):
        return x
    return te.fabs(x) if x.dtype in FLOAT_DTYPES else te.max(x, -x)


def _te_gelu(x: Expr, attrs: Attrs) -> Expr:
    if attrs["approximate"] == "tanh":
        inner = SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))
        return 0.5 * x * (1.0 + te.tanh(inner))
    return 0.5 * x * (1.0 + te.erf(x * (1 / math.sqrt(2))))


def _np_gelu(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    if attrs["approximate"] == "tanh":
        return 0.5 * x * (1 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + np.asarray(Op.ERF.spec.numpy(x / math.sqrt(2))))


def _clip_bounds(attrs: Attrs, dtype: str) -> tuple[Any, Any]:
    """The bounds in `dtype`: for integers the integers within them (min rounded up, max down)."""
    low, high = attrs["min"], attrs["max"]
    if dtype in FLOAT_DTYPES:
        return low, high
    low = None if low is None else int(convert(np.ceil(attr_float(attrs, "min")), dtype))
    high = None if high is None else int(convert(np.floor(attr_float(attrs, "max")), dtype))
    return low, high


def _te_clip(x: Expr, attrs: Attrs) -> Expr:
    """max then min, as torch.clamp: with min > max every element is max."""
    low, high = _clip_bounds(attrs, x.dtype)
    if low is not None:
        x = te.max(x, const(low, x.dtype))
    if high is not None:
        x = te.min(x, const(high, x.dtype))
    return x


def _np_clip(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    low, high = _clip_bounds(attrs, str(x.dtype))
    if low is not None:
        x = np.maximum(x, np.asarray(low, x.dtype))
    if high is not None:
        x = np.minimum(x, np.asarray(high, x.dtype))
    return x


def _te_hardsigmoid(x: Expr, attrs: Attrs) -> Expr:
    linear = attr_float(attrs, "alpha") * x + attr_float(attrs, "beta")
    return te.max(te.min(linear, 1.0), 0.0)


def _np_hardsigmoid(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    linear = attr_float(attrs, "alpha") * x + attr_float(attrs, "beta")
    return np.maximum(np.minimum(linear, 1), 0)


def _te_sign(x: Expr) -> Expr:
    """-1, 0 or 1 (NaN stays NaN, as numpy's sign), branch-free: for floats, x scaled up and clamped to
    [-1, 1] twice, which takes even the smallest subnormal to 1 (one clamp between the scalings keeps
    the two factors from folding into one that overflows, and 0 times inf is NaN)."""
    if is_unsigned(x.dtype):
        return te.min(x, const(1, x.dtype))
    if x.dtype not in FLOAT_DTYPES:
        return te.max(te.min(x, const(1, x.dtype)), const(-1, x.dtype))
    big = 2.0 ** (np.finfo(x.dtype).maxexp - 1)
    for _ in range(2):
        x = te.max(te.min(x * big, 1.0), -1.0)
    return x


def _te_elu(x: Expr, attrs: Attrs) -> Expr:
    """scale (x if x > 0, else alpha (e^(input_scale x) - 1)): ELU, SELU and CELU, as PyTorch's
    aten.elu; without a select (one term is 0 on each side)."""
    alpha, scale, input_scale = (attr_float(attrs, k) for k in ("alpha", "scale", "input_scale"))
    negative = alpha * (te.exp(te.min(x, 0.0) * input_scale) - 1.0)
    return scale * (te.max(x, 0.0) + negative)


def _np_elu(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    alpha, scale, input_scale = (attr_float(attrs, k) for k in ("alpha", "scale", "input_scale"))
    return scale * np.where(x > 0, x, alpha * np.expm1(x * input_scale))


def _te_softplus(x: Expr, attrs: Attrs) -> Expr:
    """log(1 + e^(beta x)) / beta, as max(z, 0) + log(1 + e^-|z|) with z = beta x, which overflows
    nowhere (PyTorch's threshold, past which it returns x, changes nothing in float32 either)."""
    beta = attr_float(attrs, "beta")
    z = x * beta
    return (te.max(z, 0.0) + te.log(1.0 + te.exp(-te.fabs(z)))) * (1.0 / beta)


def _np_softplus(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    beta = attr_float(attrs, "beta")
    return np.logaddexp(0, beta * x) / beta


_unary("relu", lambda x, a: te.max(x, 0.0), lambda x, a: np.maximum(x, 0), _per_element(1))
_unary("sigmoid", lambda x, a: te.sigmoid(x), lambda x, a: _np_sigmoid(x), _per_element(4))
_unary("tanh", lambda x, a: te.tanh(x), lambda x, a: np.tanh(x), _per_element(1))
_unary("exp", lambda x, a: te.exp(x), lambda x, a: np.exp(x), _per_element(1))
_unary("log", lambda x, a: te.log(x), lambda x, a: np.log(x), _per_element(1))
_unary("sqrt", lambda x, a: te.sqrt(x), lambda x, a: np.sqrt(x), _per_element(1))
_unary("erf", lambda x, a: te.erf(x), lambda x, a: np.asarray(Op.ERF.spec.numpy(x)), _per_element(1))
_unary("floor", lambda x, a: te.floor(x), lambda x, a: np.floor(x), _per_element(1))
_unary("ceil", lambda x, a: te.ceil(x), lambda x, a: np.ceil(x), _per_element(1))
_unary("round", lambda x, a: te.round(x), lambda x, a: np.round(x), _per_element(1))  # halves to even
_unary("trunc", lambda x, a: te.trunc(x), lambda x, a: np.trunc(x), _per_element(1))
_unary("sign", lambda x, a: _te_sign(x), lambda x, a: np.sign(x), _per_element(2), NUMERIC)
_unary("expm1", lambda x, a: te.expm1(x), lambda x, a: np.expm1(x), _per_element(8))
_unary("log1p", lambda x, a: te.log1p(x), lambda x, a: np.log1p(x), _per_element(6))
_unary("reciprocal", lambda x, a: 1.0 / x, lambda x, a: 1 / x, _per_element(1))
_unary("elu", _te_elu, _np_elu, _per_element(7), alpha=FLOAT, scale=FLOAT, input_scale=FLOAT)
_unary("softplus", _te_softplus, _np_softplus, _per_element(8), beta=FLOAT)
_unary("negative", lambda x, a: -x, lambda x, a: -x, _per_element(1), NUMERIC)
_unary("abs", lambda x, a: _te_abs(x), lambda x, a: np.abs(x), _per_element(1), NUMERIC)
_unary(
    "bitwise_not",
    lambda x, a: apply(Op.BITWISE_NOT, x),
    lambda x, a: np.asarray(Op.BITWISE_NOT.spec.numpy(x)),
    _per_element(1),
    INT_DTYPES,
)
_unary("silu", lambda x, a: x * te.sigmoid(x), lambda x, a: x * _np_sigmoid(x), _per_element(5))
_unary(
    "hardswish",  # x * relu6(x + 3) / 6, as PyTorch
    lambda x, a: x * te.min(te.max(x + 3.0, 0.0), 6.0) / 6.0,
    lambda x, a: x * np.minimum(np.maximum(x + 3, 0), 6) / 6,
    _per_element(5),
)
_unary("hardsigmoid", _te_hardsigmoid, _np_hardsigmoid, _per_element(4), alpha=FLOAT, beta=FLOAT)
_unary(
    "gelu",
    _te_gelu,
    _np_gelu,
    lambda a: 9 if a["approximate"] == "tanh" else 5,
    approximate=one_of("none", "tanh"),
)
_unary(
    "clip",
    _te_clip,
    _np_clip,
    lambda a: (a["min"] is not None) + (a["max"] is not None),
    NUMERIC,
    min=OPTIONAL_FLOAT,
    max=OPTIONAL_FLOAT,
)
_unary(
    "leaky_relu",  # x where x > 0, else alpha * x, as PyTorch; the compute has no select, which
    # would run lane by lane (a select of loads is a branch), and is exact: one term is 0.
    lambda x, a: te.max(x, 0.0) + attr_float(a, "alpha") * te.min(x, 0.0),
    lambda x, a: np.where(x > 0, x, attr_float(a, "alpha") * x),
    _per_element(4),
    alpha=FLOAT,
)


def _binary(
    name: str,
    te_fn: Callable[[Expr, Expr, Attrs], Expr],
    np_fn: Callable[[np.ndarray, np.ndarray, Attrs], np.ndarray],
    dtypes: Sequence[str],
    flops: int = 1,
    **schema: Kind,
) -> None:
    """Register a numpy-broadcasting op of two tensors of one dtype; `flops` counts per element."""

    def infer_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        a, b = same_dtype_args(types, 2, dtypes)
        return TensorType(broadcast_shape(a.shape, b.shape), a.dtype)

    def compute_(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
        a, b = inputs
        shape = broadcast_shape(a.shape, b.shape)
        return compute(shape, lambda i: te_fn(broadcast_load(a, i), broadcast_load(b, i), attrs), out)

    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        with np.errstate(all="ignore"):  # x / 0 and 0 ** -1 are inf, as in PyTorch
            return np_fn(arrays[0], arrays[1], attrs)

    def count(types: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
        return out.size * flops

    register_op(name, Pattern.BROADCAST, schema, infer_type, compute_, reference, count)


def _traps(b: Expr) -> Expr:
    """Where integer division by `b` traps in hardware: a divisor of 0, or of -1 for a signed type
    (the type's minimum divided by -1 overflows)."""
    zero = binary(Op.EQ, b, const(0, b.dtype))
    return zero if is_unsigned(b.dtype) else te.any(zero, b == const(-1, b.dtype))


def _np_traps(b: np.ndarray) -> np.ndarray:
    return (b == 0) | ((b == -1) if b.dtype.kind == "i" else False)


def _te_divide(a: Expr, b: Expr) -> Expr:
    """a / b; for integers rounded toward zero (C's, ONNX's integer Div), by 0 giving 0 and by -1
    giving -a (wrapping), where hardware traps. The remainder taken off first makes the division
    exact, so the floor division computes it."""
    if a.dtype in FLOAT_DTYPES:
        return a / b
    one = const(1, b.dtype)
    safe = te.select(_traps(b), one, b)
    quotient = (a - te.fmod(a, safe)) // safe
    if not is_unsigned(b.dtype):
        quotient = te.select(b == const(-1, b.dtype), -a, quotient)
    return te.select(b == const(0, b.dtype), const(0, a.dtype), quotient)


def _np_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.divide(a, b)
    safe = np.where(_np_traps(b), np.ones_like(b), b)
    quotient = (a - np.fmod(a, safe)) // safe
    if b.dtype.kind == "i":
        quotient = np.where(b == -1, -a, quotient)
    return np.where(b == 0, np.zeros_like(quotient), quotient).astype(np.result_type(a, b))


# Integer arithmetic wraps, as numpy's and PyTorch's does (power too: `compiler.ops`).
_BINARY: Mapping[str, tuple[Callable[[Expr, Expr], Expr], Callable[..., np.ndarray], Sequence[str]]] = {
    "add": (lambda a, b: a + b, np.add, NUMERIC),
    "subtract": (lambda a, b: a - b, np.subtract, NUMERIC),
    "multiply": (lambda a, b: a * b, np.multiply, NUMERIC),
    "divide": (_te_divide, _np_divide, NUMERIC),
    "power": (te.power, lambda a, b: np.asarray(Op.POW.spec.numpy(a, b)), NUMERIC),
    "maximum": (te.max, np.maximum, NUMERIC),
    "minimum": (te.min, np.minimum, NUMERIC),
}


def _without_attrs(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda a, b, attrs: fn(a, b)


for _name, (_te_fn, _np_fn, _dtypes) in _BINARY.items():
    _binary(_name, _without_attrs(_te_fn), _without_attrs(_np_fn), _dtypes)


# Bits of integers; a shift by an amount outside the type's bits gives 0 (or -1 from a right shift of
# a negative value), as numpy and ONNX's BitShift define it (`compiler.ops`).
def _bits(op: Op) -> None:
    _binary(
        op.spec.name,
        lambda a, b, attrs: apply(op, a, b),
        lambda a, b, attrs: np.asarray(op.spec.numpy(a, b)),
        INT_DTYPES,
    )


for _op in (Op.BITWISE_AND, Op.BITWISE_OR, Op.BITWISE_XOR, Op.SHIFT_LEFT, Op.SHIFT_RIGHT):
    _bits(_op)


def _te_mod(a: Expr, b: Expr, truncated: bool) -> Expr:
    """The remainder with the divisor's sign (Python's, numpy's mod, PyTorch's remainder), or with
    the dividend's (`truncated`: C's fmod, PyTorch's fmod). An integer divisor of 0 gives 0, as
    numpy does, and of -1 gives 0 computed as a remainder by 1: hardware division traps on both
    (`_traps`)."""
    if a.dtype in FLOAT_DTYPES:
        r = te.fmod(a, b)
        if truncated:
            return r
        signs_differ = te.any(te.all(r < 0.0, b > 0.0), te.all(r > 0.0, b < 0.0))
        return te.select(signs_differ, r + b, r)
    safe = te.select(_traps(b), const(1, b.dtype), b)
    return te.fmod(a, safe) if truncated else a % safe


def _np_mod(a: np.ndarray, b: np.ndarray, truncated: bool) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.fmod(a, b) if truncated else np.mod(a, b)
    safe = np.where(_np_traps(b), np.ones_like(b), b)
    return np.fmod(a, safe) if truncated else np.mod(a, safe)


_binary(
    "mod",
    lambda a, b, attrs: _te_mod(a, b, bool(attrs["fmod"])),
    lambda a, b, attrs: _np_mod(a, b, bool(attrs["fmod"])),
    NUMERIC,
    flops=3,
    fmod=BOOL,
)


def _batch_norm_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, *_ = float_args(types, 5)
    check(attr_float(attrs, "epsilon") >= 0, f"epsilon {attrs['epsilon']} is negative")
    check(len(x.shape) >= 2, f"x has shape {x.shape}; expected (N, C, ...)")
    channels = (x.shape[1],)
    for what, t in zip(("scale", "bias", "mean", "var"), types[1:]):
        check(t.shape == channels, f"{what} has shape {t.shape}; expected {channels} (x's channels)")
    return x


def _batch_norm_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    x, scale, bias, mean, var = inputs
    eps = attr_float(attrs, "epsilon")

    def body(i: tuple[Expr, ...]) -> Expr:
        c = i[1]
        return (x[i] - mean[c]) / te.sqrt(var[c] + eps) * scale[c] + bias[c]

    return compute(x.shape, body, out)


def _batch_norm_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, *params = arrays
    shape = (x.shape[1],) + (1,) * (x.ndim - 2)
    scale, bias, mean, var = (p.reshape(shape) for p in params)
    return (x - mean) / np.sqrt(var + attr_float(attrs, "epsilon")) * scale + bias


register_op(
    "batch_norm",
    Pattern.BROADCAST,
    {"epsilon": FLOAT},
    _batch_norm_type,
    _batch_norm_compute,
    _batch_norm_reference,
    lambda types, out, attrs: 6 * out.size,  # as the compute does: sub, add, sqrt, div, mul, add
)
