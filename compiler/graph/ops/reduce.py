"""Reductions over axes: sum, mean, max, min (keepdims or not), and the normalizations built on
them, softmax, log_softmax (numerically stable: the max is subtracted first) and layer_norm."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from compiler import te, topi
from compiler.graph.ir import Attrs, TensorType
from compiler.graph.op import OpDef, Pattern, attr_float, attr_int, attr_ints, check, register
from compiler.graph.ops.checks import axes, flag, float_args, integer, number
from compiler.ir import Expr

NumpyReduce = Callable[..., np.ndarray]


def _reduce_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Reducing every axis without keepdims gives shape (1,): the graph level has no rank-0 tensors."""
    (x,) = float_args(args, 1)
    reduced = axes(attrs, "axes", len(x.shape))
    return TensorType(topi.reduced_shape(x.shape, reduced, flag(attrs, "keepdims")), x.dtype)


def _axes_keepdims(attrs: Attrs) -> tuple[tuple[int, ...], bool]:
    return attr_ints(attrs, "axes"), bool(attrs["keepdims"])


def _reduction(name: str, combine: topi.Combine, numpy: NumpyReduce) -> OpDef:
    def compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
        return topi.reduce(inputs[0], *_axes_keepdims(attrs), combine, out)

    def reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        reduced, keepdims = _axes_keepdims(attrs)
        shape = topi.reduced_shape(inputs[0].shape, reduced, keepdims)
        return numpy(inputs[0], axis=reduced, keepdims=keepdims).reshape(shape)

    return OpDef(name, Pattern.REDUCTION, _reduce_type, compute, reference, _input_size)


def _input_size(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    return args[0].size


for _name, _combine, _numpy in (("sum", te.sum, np.sum), ("max", te.max, np.max), ("min", te.min, np.min)):
    register(_reduction(_name, _combine, _numpy))


def _mean_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    """The sum block, then one multiply by 1/n per output."""
    (x,) = inputs
    reduced, keepdims = _axes_keepdims(attrs)
    total = topi.reduce(x, reduced, keepdims, te.sum, f"{name}_sum")
    scale = 1.0 / math.prod(x.shape[a] for a in reduced)
    return te.compute(total.shape, lambda *i: total[i] * scale, name=name)


def _mean_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    reduced, keepdims = _axes_keepdims(attrs)
    shape = topi.reduced_shape(inputs[0].shape, reduced, keepdims)
    return np.mean(inputs[0], axis=reduced, keepdims=keepdims).reshape(shape)


def _mean_flops(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    return args[0].size + out.size


register(OpDef("mean", Pattern.REDUCTION, _reduce_type, _mean_compute, _mean_reference, _mean_flops))


def _softmax_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = float_args(args, 1)
    axis = integer(attrs, "axis", 0)
    check(axis < len(x.shape), f"axis {axis} is out of range for shape {x.shape}")
    return x


def _five_per_element(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    """max, subtract, exp, sum, divide (or their log_softmax and layer_norm analogues)."""
    return 5 * args[0].size


def _softmax_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    return topi.softmax(inputs[0], attr_int(attrs, "axis"), name, prefix=name)


def _softmax_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return topi.softmax_numpy(inputs[0], attr_int(attrs, "axis"))


register(
    OpDef(
        "softmax", Pattern.REDUCTION, _softmax_type, _softmax_compute, _softmax_reference, _five_per_element
    )
)


def _log_softmax_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    """x - max - log(sum(exp(x - max))): the max block, the sum of exponentials, the output."""
    (x,) = inputs
    reduced = (attr_int(attrs, "axis"),)

    def at(idx: Sequence[Expr]) -> tuple[Expr | int, ...]:
        return topi.reduced_index(idx, reduced)

    maxelem = topi.reduce(x, reduced, False, te.max, f"{name}_maxelem")
    expsum = topi.reduce_of(
        x, lambda i: te.exp(x[tuple(i)] - maxelem[at(i)]), reduced, False, te.sum, f"{name}_expsum"
    )
    return te.compute(x.shape, lambda *i: x[i] - maxelem[at(i)] - te.log(expsum[at(i)]), name=name)


def _log_softmax_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    axis = attr_int(attrs, "axis")
    shifted = inputs[0] - inputs[0].max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


register(
    OpDef(
        "log_softmax",
        Pattern.REDUCTION,
        _softmax_type,
        _log_softmax_compute,
        _log_softmax_reference,
        _five_per_element,
    )
)


def _layer_norm_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, gamma, beta = float_args(args, 3)
    rank = len(x.shape)
    normalized = axes(attrs, "axes", rank)
    check(
        normalized == tuple(range(rank - len(normalized), rank)),
        f"axes {normalized} must be the trailing axes",
    )
    number(attrs, "epsilon")
    want = tuple(x.shape[a] for a in normalized)
    check(
        gamma.shape == want and beta.shape == want,
        f"gamma and beta must have shape {want}, got {gamma.shape}, {beta.shape}",
    )
    return x


def _layer_norm_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    """Three blocks: the sum (the mean is sum * 1/n where it is read), the sum of squared deviations
    (the variance, E[(x - mean)^2]), and (x - mean) / sqrt(var + eps) * gamma + beta."""
    x, gamma, beta = inputs
    normalized, eps = attr_ints(attrs, "axes"), attr_float(attrs, "epsilon")
    scale = 1.0 / math.prod(gamma.shape)

    def at(idx: Sequence[Expr]) -> tuple[Expr | int, ...]:
        return topi.reduced_index(idx, normalized)

    total = topi.reduce(x, normalized, False, te.sum, f"{name}_sum")

    def centered(i: Sequence[Expr]) -> Expr:
        return x[tuple(i)] - total[at(i)] * scale

    squares = topi.reduce_of(
        x, lambda i: centered(i) * centered(i), normalized, False, te.sum, f"{name}_sqsum"
    )
    trailing = len(gamma.shape)
    return te.compute(
        x.shape,
        lambda *i: (
            centered(i) / te.sqrt(squares[at(i)] * scale + eps) * gamma[i[-trailing:]] + beta[i[-trailing:]]
        ),
        name=name,
    )


def _layer_norm_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, gamma, beta = inputs
    normalized, eps = attr_ints(attrs, "axes"), attr_float(attrs, "epsilon")
    centered = x - x.mean(axis=normalized, keepdims=True)
    variance = (centered * centered).mean(axis=normalized, keepdims=True)
    return centered / np.sqrt(variance + eps) * gamma + beta


register(
    OpDef(
        "layer_norm",
        Pattern.REDUCTION,
        _layer_norm_type,
        _layer_norm_compute,
        _layer_norm_reference,
        _five_per_element,
    )
)
