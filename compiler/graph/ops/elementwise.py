"""Elementwise graph operators: unary activations and math, numpy-broadcasting binary arithmetic, and
inference batch_norm. Each reference computes what PyTorch does, to float rounding."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from compiler import te
from compiler.dtypes import convert
from compiler.graph.ir import FLOAT_DTYPES, Attrs, TensorType
from compiler.graph.op import Pattern, attr_float, check
from compiler.graph.ops.checks import (
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
from compiler.ir import Expr, const
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
    """fabs for floats; max(x, -x) for ints, which wraps at the int's minimum as numpy's abs does."""
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


_unary("relu", lambda x, a: te.max(x, 0.0), lambda x, a: np.maximum(x, 0), _per_element(1))
_unary("sigmoid", lambda x, a: te.sigmoid(x), lambda x, a: _np_sigmoid(x), _per_element(4))
_unary("tanh", lambda x, a: te.tanh(x), lambda x, a: np.tanh(x), _per_element(1))
_unary("exp", lambda x, a: te.exp(x), lambda x, a: np.exp(x), _per_element(1))
_unary("log", lambda x, a: te.log(x), lambda x, a: np.log(x), _per_element(1))
_unary("sqrt", lambda x, a: te.sqrt(x), lambda x, a: np.sqrt(x), _per_element(1))
_unary("erf", lambda x, a: te.erf(x), lambda x, a: np.asarray(Op.ERF.spec.numpy(x)), _per_element(1))
_unary("negative", lambda x, a: -x, lambda x, a: -x, _per_element(1), NUMERIC)
_unary("abs", lambda x, a: _te_abs(x), lambda x, a: np.abs(x), _per_element(1), NUMERIC)
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
    name: str, te_fn: Callable[[Expr, Expr], Expr], np_fn: Callable[..., np.ndarray], dtypes: Sequence[str]
) -> None:
    def infer_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        a, b = same_dtype_args(types, 2, dtypes)
        return TensorType(broadcast_shape(a.shape, b.shape), a.dtype)

    def compute_(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
        a, b = inputs
        shape = broadcast_shape(a.shape, b.shape)
        return compute(shape, lambda i: te_fn(broadcast_load(a, i), broadcast_load(b, i)), out)

    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        with np.errstate(all="ignore"):  # x / 0 and 0 ** -1 are inf, as in PyTorch
            return np_fn(*arrays)

    def count(types: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
        return out.size

    register_op(name, Pattern.BROADCAST, {}, infer_type, compute_, reference, count)


# Integer arithmetic wraps, as numpy's and PyTorch's does; division and power are on floats only.
_BINARY: Mapping[str, tuple[Callable[[Expr, Expr], Expr], Callable[..., np.ndarray], Sequence[str]]] = {
    "add": (lambda a, b: a + b, np.add, NUMERIC),
    "subtract": (lambda a, b: a - b, np.subtract, NUMERIC),
    "multiply": (lambda a, b: a * b, np.multiply, NUMERIC),
    "divide": (lambda a, b: a / b, np.divide, FLOAT_DTYPES),
    "power": (te.power, np.power, FLOAT_DTYPES),
    "maximum": (te.max, np.maximum, NUMERIC),
    "minimum": (te.min, np.minimum, NUMERIC),
}
for _name, (_te_fn, _np_fn, _dtypes) in _BINARY.items():
    _binary(_name, _te_fn, _np_fn, _dtypes)


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
