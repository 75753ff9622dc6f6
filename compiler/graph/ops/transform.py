"""Injective graph operators: each output element is one input element (or a constant), moved.
They compute nothing, so their flops are 0; fusion folds them into their neighbours' index
expressions."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence

import numpy as np

from compiler import te
from compiler.dtypes import convert
from compiler.graph.ir import INDEX_DTYPES, Attrs, TensorType
from compiler.graph.op import Compute, InferType, Pattern, Reference, attr_float, attr_int, attr_ints, check
from compiler.graph.ops.checks import (
    FLOAT,
    INT,
    INTS,
    NUMERIC,
    Schema,
    broadcast_shape,
    check_axis,
    register_op,
    same_dtype_args,
)
from compiler.graph.ops.indexing import broadcast_load, compute
from compiler.ir import Expr, const


def _injective(name: str, schema: Schema, infer: InferType, comp: Compute, ref: Reference) -> None:
    register_op(name, Pattern.INJECTIVE, schema, infer, comp, ref, lambda types, out, attrs: 0)


def _shape_attr(attrs: Attrs, key: str) -> tuple[int, ...]:
    shape = attr_ints(attrs, key)
    check(len(shape) >= 1 and all(d >= 1 for d in shape), f"{key} {shape} must be positive sizes")
    return shape


# reshape ---------------------------------------------------------------------------------------


def _reshape_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    same_dtype_args(types, 1)
    shape = _shape_attr(attrs, "shape")
    (x,) = types
    check(math.prod(shape) == x.size, f"cannot reshape {x.shape} ({x.size} elements) to {shape}")
    return TensorType(shape, x.dtype)


def reshape_groups(src: Sequence[int], dst: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """The axes of two shapes of one size, in the fewest groups of consecutive axes with equal
    products, size-1 axes left out: (2, 3, 1, 4) -> (6, 4) is [([0, 1], [0]), ([3], [1])]. Axes
    alone in their group on both sides map one to one, without division or modulo."""
    s = [k for k, n in enumerate(src) if n > 1]
    d = [k for k, n in enumerate(dst) if n > 1]
    groups: list[tuple[list[int], list[int]]] = []
    a = b = 0
    while a < len(s):
        ga, gb = [s[a]], [d[b]]
        pa, pb = src[s[a]], dst[d[b]]
        a, b = a + 1, b + 1
        while pa != pb:
            if pa < pb:
                ga.append(s[a])
                pa, a = pa * src[s[a]], a + 1
            else:
                gb.append(d[b])
                pb, b = pb * dst[d[b]], b + 1
        groups.append((ga, gb))
    return groups


def _strides(shape: Sequence[int]) -> list[int]:
    return [math.prod(shape[k + 1 :]) for k in range(len(shape))]


def _reshape_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    (x,) = inputs
    shape = attr_ints(attrs, "shape")
    groups = reshape_groups(x.shape, shape)

    def body(i: tuple[Expr, ...]) -> Expr:
        index: list[Expr] = [const(0)] * len(x.shape)
        for src, dst in groups:
            dst_sizes, src_sizes = [shape[k] for k in dst], [x.shape[k] for k in src]
            linear = functools.reduce(operator.add, (i[k] * st for k, st in zip(dst, _strides(dst_sizes))))
            size = math.prod(src_sizes)
            for k, n, st in zip(src, src_sizes, _strides(src_sizes)):
                j = linear // st if st > 1 else linear
                index[k] = j % n if st * n < size else j
        return x[tuple(index)]

    return compute(shape, body, out)


def _reshape_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return arrays[0].reshape(attr_ints(attrs, "shape"))


_injective("reshape", {"shape": INTS}, _reshape_type, _reshape_compute, _reshape_reference)


# transpose -------------------------------------------------------------------------------------


def _transpose_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = same_dtype_args(types, 1)
    axes = attr_ints(attrs, "axes")
    check(
        sorted(axes) == list(range(len(x.shape))),
        f"axes {axes} are not a permutation of the {len(x.shape)} axes of {x.shape}",
    )
    return TensorType(tuple(x.shape[a] for a in axes), x.dtype)


def _transpose_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    (x,) = inputs
    axes = attr_ints(attrs, "axes")
    source = [axes.index(a) for a in range(len(axes))]  # the output axis each input axis moved to
    return compute([x.shape[a] for a in axes], lambda i: x[tuple(i[k] for k in source)], out)


_injective(
    "transpose",
    {"axes": INTS},
    _transpose_type,
    _transpose_compute,
    lambda arrays, attrs: np.transpose(arrays[0], attr_ints(attrs, "axes")),
)


# concat ----------------------------------------------------------------------------------------


def _concat_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    dtype = same_dtype_args(types, None)[0].dtype
    axis = attr_int(attrs, "axis")
    first = types[0].shape
    check_axis(axis, len(first))
    for k, t in enumerate(types):
        same = len(t.shape) == len(first) and all(
            n == m for d, (n, m) in enumerate(zip(t.shape, first)) if d != axis
        )
        check(same, f"argument {k} has shape {t.shape}; expected {first} but for axis {axis}")
    size = sum(t.shape[axis] for t in types)
    return TensorType(first[:axis] + (size,) + first[axis + 1 :], dtype)


def _concat_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    """Nested selects on the concatenation axis: the last input, unless before its offset, ..."""
    axis = attr_int(attrs, "axis")
    offsets = [0]
    for t in inputs:
        offsets.append(offsets[-1] + t.shape[axis])
    shape = inputs[0].shape[:axis] + (offsets[-1],) + inputs[0].shape[axis + 1 :]

    def body(i: tuple[Expr, ...]) -> Expr:
        def part(k: int) -> Expr:
            return inputs[k][i[:axis] + (i[axis] - offsets[k],) + i[axis + 1 :]]

        value = part(len(inputs) - 1)
        for k in reversed(range(len(inputs) - 1)):
            value = te.select(i[axis] < offsets[k + 1], part(k), value)
        return value

    return compute(shape, body, out)


_injective(
    "concat",
    {"axis": INT},
    _concat_type,
    _concat_compute,
    lambda arrays, attrs: np.concatenate(arrays, axis=attr_int(attrs, "axis")),
)


# slice -----------------------------------------------------------------------------------------


def _slice_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = same_dtype_args(types, 1)
    begin, end, strides = (attr_ints(attrs, k) for k in ("begin", "end", "strides"))
    rank = len(x.shape)
    check(
        len(begin) == len(end) == len(strides) == rank,
        f"begin {begin}, end {end} and strides {strides} must each have {rank} entries",
    )
    for d, (b, e, s, n) in enumerate(zip(begin, end, strides, x.shape)):
        check(0 <= b < e <= n, f"axis {d}: range [{b}, {e}) is empty or outside [0, {n})")
        check(s >= 1, f"axis {d}: stride {s} must be positive")
    shape = tuple(-(-(e - b) // s) for b, e, s in zip(begin, end, strides))
    return TensorType(shape, x.dtype)


def _slice_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    (x,) = inputs
    begin, end, strides = (attr_ints(attrs, k) for k in ("begin", "end", "strides"))
    shape = [-(-(e - b) // s) for b, e, s in zip(begin, end, strides)]
    return compute(shape, lambda i: x[tuple(b + k * s for b, k, s in zip(begin, i, strides))], out)


def _slice_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    begin, end, strides = (attr_ints(attrs, k) for k in ("begin", "end", "strides"))
    return arrays[0][tuple(slice(b, e, s) for b, e, s in zip(begin, end, strides))]


_injective(
    "slice",
    {"begin": INTS, "end": INTS, "strides": INTS},
    _slice_type,
    _slice_compute,
    _slice_reference,
)


# pad -------------------------------------------------------------------------------------------


def _pads(attrs: Attrs, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    pads = attr_ints(attrs, "pads")
    return pads[:rank], pads[rank:]


def _pad_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = same_dtype_args(types, 1, NUMERIC)
    pads = attr_ints(attrs, "pads")
    rank = len(x.shape)
    check(len(pads) == 2 * rank, f"pads {pads} must have 2 * rank = {2 * rank} entries")
    check(all(p >= 0 for p in pads), f"pads {pads} must be non-negative")
    before, after = _pads(attrs, rank)
    return TensorType(tuple(n + b + a for n, b, a in zip(x.shape, before, after)), x.dtype)


def _pad_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    (x,) = inputs
    before, after = _pads(attrs, len(x.shape))
    shape = [n + b + a for n, b, a in zip(x.shape, before, after)]

    def body(i: tuple[Expr, ...]) -> Expr:
        inside = [i[d] >= b for d, b in enumerate(before) if b > 0]
        inside += [i[d] < b + n for d, (b, n, a) in enumerate(zip(before, x.shape, after)) if a > 0]
        value = x[tuple(k - b for k, b in zip(i, before))]
        fill = const(convert(attr_float(attrs, "value"), x.dtype).item(), x.dtype)
        return te.select(te.all(*inside), value, fill) if inside else value

    return compute(shape, body, out)


def _pad_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = arrays
    before, after = _pads(attrs, x.ndim)
    fill = convert(attr_float(attrs, "value"), str(x.dtype))
    return np.pad(x, list(zip(before, after)), constant_values=fill)


_injective("pad", {"pads": INTS, "value": FLOAT}, _pad_type, _pad_compute, _pad_reference)


def _wrapped(index: Expr, size: int) -> Expr:
    """An index read modulo `size`: negative counts from the end (numpy, ONNX, PyTorch), and one
    out of range (an error there) reads some element of the axis, never outside the tensor."""
    position = te.cast("int64", index) if index.dtype != "int64" else index
    return position % size


def _wrapped_array(indices: np.ndarray, size: int) -> np.ndarray:
    return np.mod(indices.astype(np.int64), size)


# take ------------------------------------------------------------------------------------------


def _take_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    check(len(types) == 2, f"takes 2 arguments (data, indices), got {len(types)}")
    data, indices = types
    same_dtype_args([data], 1)
    check(indices.dtype in INDEX_DTYPES, f"indices have dtype {indices.dtype}; expected int32 or int64")
    axis = attr_int(attrs, "axis")
    check_axis(axis, len(data.shape))
    return TensorType(data.shape[:axis] + indices.shape + data.shape[axis + 1 :], data.dtype)


def _take_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    """Indices wrap modulo the axis size (`_wrapped`)."""
    data, indices = inputs
    axis = attr_int(attrs, "axis")
    q = len(indices.shape)
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1 :]

    def body(i: tuple[Expr, ...]) -> Expr:
        return data[i[:axis] + (_wrapped(indices[i[axis : axis + q]], data.shape[axis]),) + i[axis + q :]]

    return compute(shape, body, out)


def _take_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, indices = arrays
    axis = attr_int(attrs, "axis")
    return np.take(data, _wrapped_array(indices, data.shape[axis]), axis)


_injective(
    "take",
    {"axis": INT},
    _take_type,
    _take_compute,
    lambda arrays, attrs: np.take(
        arrays[0],
        _wrapped_array(arrays[1], arrays[0].shape[attr_int(attrs, "axis")]),
        attr_int(attrs, "axis"),
    ),
)


# gather_elements -------------------------------------------------------------------------------


def _gather_elements_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    check(len(types) == 2, f"takes 2 arguments (data, indices), got {len(types)}")
    data, indices = types
    check(indices.dtype in INDEX_DTYPES, f"indices have dtype {indices.dtype}; expected int32 or int64")
    check(
        len(indices.shape) == len(data.shape),
        f"indices {indices.shape} must have data's rank {len(data.shape)}",
    )
    axis = attr_int(attrs, "axis")
    check_axis(axis, len(data.shape))
    others = [k for k in range(len(data.shape)) if k != axis]
    check(
        all(indices.shape[k] <= data.shape[k] for k in others),
        f"indices {indices.shape} exceed data {data.shape} off axis {axis}",
    )
    return TensorType(indices.shape, data.dtype)


def _gather_elements_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    data, indices = inputs
    axis = attr_int(attrs, "axis")

    def body(i: tuple[Expr, ...]) -> Expr:
        return data[i[:axis] + (_wrapped(indices[i], data.shape[axis]),) + i[axis + 1 :]]

    return compute(indices.shape, body, out)


def _gather_elements_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, indices = arrays
    axis = attr_int(attrs, "axis")
    window = data[tuple(slice(0, n) if k != axis else slice(None) for k, n in enumerate(indices.shape))]
    return np.take_along_axis(window, _wrapped_array(indices, data.shape[axis]), axis)


_injective(
    "gather_elements",  # ONNX GatherElements, torch.gather: out[i] = data[i with axis -> indices[i]]
    {"axis": INT},
    _gather_elements_type,
    _gather_elements_compute,
    _gather_elements_reference,
)


# gather_nd -------------------------------------------------------------------------------------


def _gather_nd_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    check(len(types) >= 2, f"takes data and at least one index tensor, got {len(types)} arguments")
    data, *indices = types
    axis = attr_int(attrs, "axis")
    check(
        axis >= 0 and axis + len(indices) <= len(data.shape),
        f"{len(indices)} index tensors from axis {axis} exceed data's rank {len(data.shape)}",
    )
    for t in indices:
        check(t.dtype in INDEX_DTYPES, f"indices have dtype {t.dtype}; expected int32 or int64")
    shape = functools.reduce(broadcast_shape, [t.shape for t in indices])
    return TensorType(data.shape[:axis] + shape + data.shape[axis + len(indices) :], data.dtype)


def _gather_nd_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    data, *indices = inputs
    axis = attr_int(attrs, "axis")
    k = len(indices)
    shape = functools.reduce(broadcast_shape, [t.shape for t in indices])
    q = len(shape)

    def body(i: tuple[Expr, ...]) -> Expr:
        point = i[axis : axis + q]
        taken = tuple(_wrapped(broadcast_load(t, point), data.shape[axis + j]) for j, t in enumerate(indices))
        return data[i[:axis] + taken + i[axis + q :]]

    return compute(data.shape[:axis] + shape + data.shape[axis + k :], body, out)


def _gather_nd_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, *indices = arrays
    axis = attr_int(attrs, "axis")
    taken = tuple(_wrapped_array(t, data.shape[axis + j]) for j, t in enumerate(indices))
    return data[(slice(None),) * axis + taken]


_injective(
    "gather_nd",  # torch's x[:, i, j] (aten.index) and ONNX GatherND: index tensors broadcast together
    {"axis": INT},
    _gather_nd_type,
    _gather_nd_compute,
    _gather_nd_reference,
)


# broadcast_to ----------------------------------------------------------------------------------


def _broadcast_to_type(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = same_dtype_args(types, 1)
    shape = _shape_attr(attrs, "shape")
    tail = shape[len(shape) - len(x.shape) :]
    check(
        len(shape) >= len(x.shape) and all(n in (1, m) for n, m in zip(x.shape, tail)),
        f"cannot broadcast {x.shape} to {shape}",
    )
    return TensorType(shape, x.dtype)


def _broadcast_to_compute(inputs: Sequence[te.Tensor], attrs: Attrs, out: str) -> te.Tensor:
    (x,) = inputs
    return compute(attr_ints(attrs, "shape"), lambda i: broadcast_load(x, i), out)


_injective(
    "broadcast_to",
    {"shape": INTS},
    _broadcast_to_type,
    _broadcast_to_compute,
    lambda arrays, attrs: np.broadcast_to(arrays[0], attr_ints(attrs, "shape")),
)
