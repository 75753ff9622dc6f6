"""Operators on masks and dtypes: comparisons (numbers in, bools out), boolean logic, `where` (a
select under numpy broadcasting) and `cast` between the graph's dtypes. The masks, position ids and
token ids of real model exports are computed with these."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from compiler import te
from compiler.dtypes import convert
from compiler.graph.ir import DTYPES, Attrs, TensorType
from compiler.graph.op import Pattern, check
from compiler.graph.ops.checks import (
    NUMERIC,
    broadcast_shape,
    float_args,
    one_of,
    register_op,
    same_dtype_args,
)
from compiler.graph.ops.indexing import broadcast_load, compute
from compiler.ir import Expr, binary
from compiler.ops import Op

BOOL_ONLY = ("bool",)


def _per_element(types: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    return out.size


def _as_number(x: Expr) -> Expr:
    """A bool as an int32 0 or 1, for the comparisons the IR defines on numbers only."""
    return te.cast("int32", x) if x.dtype == "bool" else x


def _compare(name: str, op: Op, np_fn: Callable[..., np.ndarray], allowed: Sequence[str]) -> None:
    def infer_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        a, b = same_dtype_args(types, 2, allowed)
        return TensorType(broadcast_shape(a.shape, b.shape), "bool")

    def compute_(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
        a, b = inputs
        shape = broadcast_shape(a.shape, b.shape)

        def body(i: tuple[Expr, ...]) -> Expr:
            return binary(op, _as_number(broadcast_load(a, i)), _as_number(broadcast_load(b, i)))

        return compute(shape, body, out)

    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        return np.asarray(np_fn(*arrays))

    register_op(name, Pattern.BROADCAST, {}, infer_type, compute_, reference, _per_element)


_COMPARISONS: Mapping[str, tuple[Op, Callable[..., np.ndarray], Sequence[str]]] = {
    "equal": (Op.EQ, np.equal, DTYPES),
    "not_equal": (Op.NE, np.not_equal, DTYPES),
    "less": (Op.LT, np.less, NUMERIC),
    "less_equal": (Op.LE, np.less_equal, NUMERIC),
    "greater": (Op.GT, np.greater, NUMERIC),
    "greater_equal": (Op.GE, np.greater_equal, NUMERIC),
    # On bools, xor is inequality.
    "logical_xor": (Op.NE, np.logical_xor, BOOL_ONLY),
}
for _name, (_op, _np_fn, _allowed) in _COMPARISONS.items():
    _compare(_name, _op, _np_fn, _allowed)


def _logic(name: str, op: Op, np_fn: Callable[..., np.ndarray]) -> None:
    def infer_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        a, b = same_dtype_args(types, 2, BOOL_ONLY)
        return TensorType(broadcast_shape(a.shape, b.shape), "bool")

    def compute_(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
        a, b = inputs
        shape = broadcast_shape(a.shape, b.shape)
        return compute(shape, lambda i: binary(op, broadcast_load(a, i), broadcast_load(b, i)), out)

    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        return np.asarray(np_fn(*arrays))

    register_op(name, Pattern.BROADCAST, {}, infer_type, compute_, reference, _per_element)


_logic("logical_and", Op.AND, np.logical_and)
_logic("logical_or", Op.OR, np.logical_or)


def _not_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = same_dtype_args(types, 1, BOOL_ONLY)
    return x


def _not_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    (x,) = inputs
    return compute(x.shape, lambda i: te.not_(x[i]), out)


register_op(
    "logical_not",
    Pattern.ELEMWISE,
    {},
    _not_type,
    _not_compute,
    lambda arrays, attrs: np.logical_not(arrays[0]),
    _per_element,
)


def _isnan_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = float_args(types, 1)
    return TensorType(x.shape, "bool")


def _isnan_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    (x,) = inputs
    return compute(x.shape, lambda i: binary(Op.NE, x[i], x[i]), out)  # only NaN is unequal to itself


register_op(
    "isnan",
    Pattern.ELEMWISE,
    {},
    _isnan_type,
    _isnan_compute,
    lambda arrays, attrs: np.isnan(arrays[0]),
    _per_element,
)


# where -----------------------------------------------------------------------------------------


def _where_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    check(len(types) == 3, f"takes 3 arguments (condition, x, y), got {len(types)}")
    cond, x, y = types
    check(cond.dtype == "bool", f"the condition has dtype {cond.dtype}; expected bool")
    same_dtype_args([x, y], 2)
    return TensorType(broadcast_shape(cond.shape, broadcast_shape(x.shape, y.shape)), x.dtype)


def _where_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    cond, x, y = inputs
    shape = broadcast_shape(cond.shape, broadcast_shape(x.shape, y.shape))

    def body(i: tuple[Expr, ...]) -> Expr:
        return te.select(broadcast_load(cond, i), broadcast_load(x, i), broadcast_load(y, i))

    return compute(shape, body, out)


register_op(
    "where",
    Pattern.BROADCAST,
    {},
    _where_type,
    _where_compute,
    lambda arrays, attrs: np.where(*arrays),
    _per_element,
)


# cast ------------------------------------------------------------------------------------------


def _cast_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = same_dtype_args(types, 1)
    return TensorType(x.shape, str(attrs["dtype"]))


def _cast_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    (x,) = inputs
    dtype = str(attrs["dtype"])
    return compute(x.shape, lambda i: te.cast(dtype, x[i]), out)


register_op(
    "cast",  # a float becomes an int by truncation, saturated, NaN as 0: `compiler.dtypes.convert`
    Pattern.ELEMWISE,
    {"dtype": one_of(*DTYPES)},
    _cast_type,
    _cast_compute,
    lambda arrays, attrs: convert(arrays[0], str(attrs["dtype"])),
    _per_element,
)
