"""Reductions over axes: sum, mean, max, min (keepdims or not), argmax and argmin, and the
normalizations built on them, softmax, log_softmax (numerically stable: the max is subtracted first)
and layer_norm; and cumsum."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from compiler import te, topi
from compiler.dtypes import FLOAT_DTYPES, INT_DTYPES
from compiler.graph.ir import DTYPES, Attrs, TensorType
from compiler.graph.op import Pattern, attr_float, attr_int, attr_ints, check
from compiler.graph.ops.checks import (
    BOOL,
    FLOAT,
    INT,
    INTS,
    NUMERIC,
    check_axes,
    check_axis,
    float_args,
    register_op,
    same_dtype_args,
)
from compiler.ir import Expr, const

NumpyReduce = Callable[..., np.ndarray]


def _reduced_type(x: TensorType, attrs: Attrs) -> TensorType:
    """Reducing every axis without keepdims gives shape (1,): the graph level has no rank-0 tensors.
    Sums, maxima and minima of ints are ints (a sum wraps, as numpy's does); a mean is of floats."""
    reduced, keepdims = _axes_keepdims(attrs)
    check_axes(reduced, len(x.shape))
    return TensorType(topi.reduced_shape(x.shape, reduced, keepdims), x.dtype)


def _axes_keepdims(attrs: Attrs) -> tuple[tuple[int, ...], bool]:
    return attr_ints(attrs, "axes"), bool(attrs["keepdims"])


_REDUCE = {"axes": INTS, "keepdims": BOOL}


def _reduction(name: str, combine: topi.Combine, numpy: NumpyReduce, types: Sequence[str]) -> None:
    def infer_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
        (x,) = same_dtype_args(args, 1, types)
        return _reduced_type(x, attrs)

    def compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
        (x,) = inputs
        if x.dtype != "bool":
            return topi.reduce(x, *_axes_keepdims(attrs), combine, out)
        # any (max) and all (min) of bools: over 0 and 1, then back to bools
        numbers = topi.reduce_of(
            x, lambda i: te.cast("int32", x[tuple(i)]), *_axes_keepdims(attrs), combine, f"{out}_int"
        )
        return te.compute(numbers.shape, lambda *i: te.cast("bool", numbers[i]), name=out)

    def reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        reduced, keepdims = _axes_keepdims(attrs)
        shape = topi.reduced_shape(inputs[0].shape, reduced, keepdims)
        out = numpy(inputs[0], axis=reduced, keepdims=keepdims).reshape(shape)
        return out.astype(inputs[0].dtype, copy=False)  # numpy sums int32 as int64

    register_op(name, Pattern.REDUCTION, _REDUCE, infer_type, compute, reference, _input_size)


def _input_size(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    return args[0].size


_reduction("sum", te.sum, np.sum, NUMERIC)
_reduction("prod", te.prod, np.prod, NUMERIC)
_reduction("max", te.max, np.max, DTYPES)  # of bools: any
_reduction("min", te.min, np.min, DTYPES)  # of bools: all


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


def _mean_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = float_args(args, 1)
    return _reduced_type(x, attrs)


register_op("mean", Pattern.REDUCTION, _REDUCE, _mean_type, _mean_compute, _mean_reference, _mean_flops)


def _arg_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = same_dtype_args(args, 1, (*FLOAT_DTYPES, *INT_DTYPES))
    axis = attr_int(attrs, "axis")
    check_axis(axis, len(x.shape))
    return TensorType(topi.reduced_shape(x.shape, (axis,), bool(attrs["keepdims"])), "int64")


def _arg_compute(extreme: topi.Combine) -> Callable[[Sequence[te.Tensor], Attrs, str], te.Tensor]:
    def compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
        """Two blocks: the row's extreme, then the least (or, with select_last_index, the greatest)
        position holding it. A NaN is the extreme of its row, as in numpy and PyTorch: max and min
        carry it, and the position of the first NaN is what a NaN equals."""
        (x,) = inputs
        axis, last = attr_int(attrs, "axis"), bool(attrs["select_last_index"])
        value = topi.reduce(x, (axis,), False, extreme, f"{name}_extreme")

        def position(i: list[Expr]) -> Expr:
            at = x[tuple(i)]
            hit = te.all(at == value[topi.reduced_index(i, (axis,))])
            if x.dtype in FLOAT_DTYPES:
                hit = te.any(hit, at != at)
            return te.select(hit, i[axis], const(-1 if last else x.shape[axis], "int64"))

        return topi.reduce_of(x, position, (axis,), bool(attrs["keepdims"]), te.max if last else te.min, name)

    return compute


def _arg_reference(numpy: NumpyReduce) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    def reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        (x,) = inputs
        axis = attr_int(attrs, "axis")
        if attrs["select_last_index"]:
            out = x.shape[axis] - 1 - numpy(np.flip(x, axis), axis=axis)
        else:
            out = numpy(x, axis=axis)
        shape = topi.reduced_shape(x.shape, (axis,), bool(attrs["keepdims"]))
        return np.asarray(out, np.int64).reshape(shape)

    return reference


for _name, _extreme, _numpy in (("argmax", te.max, np.argmax), ("argmin", te.min, np.argmin)):
    register_op(
        _name,
        Pattern.REDUCTION,
        {"axis": INT, "keepdims": BOOL, "select_last_index": BOOL},
        _arg_type,
        _arg_compute(_extreme),
        _arg_reference(_numpy),
        lambda args, out, attrs: 3 * args[0].size,
    )


def _softmax_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = float_args(args, 1)
    check_axis(attr_int(attrs, "axis"), len(x.shape))
    return x


def _five_per_element(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    """max, subtract, exp, sum, divide (or their log_softmax and layer_norm analogues)."""
    return 5 * args[0].size


def _softmax_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    return topi.softmax(inputs[0], attr_int(attrs, "axis"), name, prefix=name)


def _softmax_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return topi.softmax_numpy(inputs[0], attr_int(attrs, "axis"))


register_op(
    "softmax",
    Pattern.REDUCTION,
    {"axis": INT},
    _softmax_type,
    _softmax_compute,
    _softmax_reference,
    _five_per_element,
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


register_op(
    "log_softmax",
    Pattern.REDUCTION,
    {"axis": INT},
    _softmax_type,
    _log_softmax_compute,
    _log_softmax_reference,
    _five_per_element,
)


def _layer_norm_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, gamma, beta = float_args(args, 3)
    rank = len(x.shape)
    normalized = attr_ints(attrs, "axes")
    check_axes(normalized, rank)
    check(
        normalized == tuple(range(rank - len(normalized), rank)),
        f"axes {normalized} must be the trailing axes",
    )
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


register_op(
    "layer_norm",
    Pattern.REDUCTION,
    {"axes": INTS, "epsilon": FLOAT},
    _layer_norm_type,
    _layer_norm_compute,
    _layer_norm_reference,
    _five_per_element,
)


def _cumsum_type(args: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = same_dtype_args(args, 1, NUMERIC)
    check_axis(attr_int(attrs, "axis"), len(x.shape))
    return x


def _cumsum_compute(inputs: Sequence[te.Tensor], attrs: Attrs, name: str) -> te.Tensor:
    """Each output element is the sum of the elements of its row up to it (before it when
    `exclusive`, from the end when `reverse`): a reduction over the whole row that selects its
    part, quadratic in the row's length. Cumulative sums in models run over a sequence's positions
    (position ids from a mask), a few hundred long, where this costs microseconds; a scan would need
    a schedule of its own."""
    (x,) = inputs
    axis = attr_int(attrs, "axis")
    k = te.reduce_axis((0, x.shape[axis]), "k")
    zero = const(0, x.dtype)

    def body(*i: Expr) -> Expr:
        taken = _cumsum_taken(k, i[axis], bool(attrs["exclusive"]), bool(attrs["reverse"]))
        return te.sum(te.select(taken, x[i[:axis] + (k,) + i[axis + 1 :]], zero), axis=k)

    return te.compute(x.shape, body, name=name)


def _cumsum_taken(k: Expr, i: Expr, exclusive: bool, reverse: bool) -> Expr:
    if reverse:
        return k > i if exclusive else k >= i
    return k < i if exclusive else k <= i


def _cumsum_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = inputs
    axis = attr_int(attrs, "axis")
    if attrs["reverse"]:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if attrs["exclusive"]:  # shifted by one, 0 first
        out = np.roll(out, 1, axis)
        out[(slice(None),) * axis + (0,)] = 0
    return np.flip(out, axis) if attrs["reverse"] else out


def _cumsum_flops(args: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    return out.size * args[0].shape[attr_int(attrs, "axis")]


register_op(
    "cumsum",
    Pattern.REDUCTION,
    {"axis": INT, "exclusive": BOOL, "reverse": BOOL},
    _cumsum_type,
    _cumsum_compute,
    _cumsum_reference,
    _cumsum_flops,
)
