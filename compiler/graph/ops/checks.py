"""What the operators' type rules check: every operator declares exactly its attributes and their
kinds (a schema), checked in one place before its type rule runs, and the argument checks the type
rules share. Each refusal is an OpError that names what it refuses and why."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from compiler import topi
from compiler.graph.ir import DTYPES, FLOAT_DTYPES, NUMERIC_DTYPES, Attrs, AttrValue, TensorType
from compiler.graph.op import Compute, Flops, InferType, OpDef, Pattern, Reference, attr_ints, check, register


@dataclass(frozen=True)
class Kind:
    """What an attribute's value must be, and how a refusal says it."""

    what: str
    accepts: Callable[[AttrValue], bool]


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: AttrValue) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_ints(v: AttrValue) -> TypeGuard[tuple[int, ...]]:
    return isinstance(v, tuple) and all(_is_int(e) for e in v)


FLOAT = Kind("a number", _is_number)
OPTIONAL_FLOAT = Kind("a number or None", lambda v: v is None or _is_number(v))
INT = Kind("an int", _is_int)
BOOL = Kind("a bool", lambda v: isinstance(v, bool))
INTS = Kind("a tuple of ints", _is_ints)


def one_of(*choices: str) -> Kind:
    return Kind(" or ".join(repr(c) for c in choices), lambda v: v in choices)


def at_least(minimum: int) -> Kind:
    """An int >= minimum."""
    return Kind(f"an int >= {minimum}", lambda v: _is_int(v) and v >= minimum)


def ints(length: int, minimum: int) -> Kind:
    """A tuple of `length` ints, each >= minimum (strides, paddings, kernel sizes)."""
    return Kind(
        f"{length} ints >= {minimum}",
        lambda v: _is_ints(v) and len(v) == length and all(e >= minimum for e in v),
    )


Schema = Mapping[str, Kind]
WINDOW_SCHEMA: Schema = {"strides": ints(2, 1), "padding": ints(4, 0), "dilation": ints(2, 1)}


def window_attrs(attrs: Attrs) -> topi.Window:
    """The strides, padding and dilation of a conv whose attributes `WINDOW_SCHEMA` checked."""
    (sh, sw), (t, left, b, r), (dh, dw) = (attr_ints(attrs, k) for k in ("strides", "padding", "dilation"))
    return (sh, sw), (t, left, b, r), (dh, dw)


def conv_output_hw(height: int, width: int, R: int, S: int, window: topi.Window) -> tuple[int, int]:
    """The output extents of an R x S filter over the window; refused when it does not fit."""
    oh, ow = topi.conv_out_hw(height, width, (R, S), window)
    check(oh >= 1 and ow >= 1, f"the kernel ({R}x{S}) does not fit the padded input")
    return oh, ow


def check_attrs(attrs: Attrs, schema: Schema) -> None:
    """Exactly the attributes of `schema`, each of its kind: the frontends normalize every attribute,
    so a missing or extra one is a frontend bug to report, not a default to guess."""
    for key in schema:
        check(key in attrs, f"missing attribute {key!r} (takes {sorted(schema)})")
    for key in sorted(attrs):
        check(key in schema, f"unexpected attribute {key!r} (takes {sorted(schema)})")
    for key, kind in schema.items():
        check(kind.accepts(attrs[key]), f"attribute {key}={attrs[key]!r} must be {kind.what}")


def register_op(
    name: str,
    pattern: Pattern,
    schema: Schema,
    infer_type: InferType,
    compute: Compute,
    reference: Reference,
    flops: Flops,
) -> OpDef:
    """Register an operator whose type rule `infer_type` runs once its attributes match `schema`
    (so it reads them unchecked, with `attr_int` and friends)."""

    @functools.wraps(infer_type)
    def checked(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        check_attrs(attrs, schema)
        return infer_type(types, attrs)

    return register(OpDef(name, pattern, checked, compute, reference, flops))


def float_args(types: Sequence[TensorType], count: int | None) -> Sequence[TensorType]:
    """`count` arguments (at least one when None), all float of one dtype; returns them."""
    return same_dtype_args(types, count, FLOAT_DTYPES)


def same_dtype_args(
    types: Sequence[TensorType], count: int | None, allowed: Sequence[str] = DTYPES
) -> Sequence[TensorType]:
    """`count` arguments (at least one when None), all of one dtype among `allowed`; returns them."""
    if count is None:
        check(len(types) >= 1, "takes at least one argument, got none")
    else:
        check(len(types) == count, f"takes {count} argument(s), got {len(types)}")
    for k, t in enumerate(types):
        check(t.dtype in allowed, f"argument {k} has dtype {t.dtype}; expected {' or '.join(allowed)}")
    dtypes = sorted({t.dtype for t in types})
    check(len(dtypes) == 1, f"arguments mix dtypes {dtypes}")
    return types


NUMERIC = NUMERIC_DTYPES  # what arithmetic takes: floats and ints


def check_axis(axis: int, rank: int) -> None:
    check(0 <= axis < rank, f"axis {axis} is out of range for rank {rank}")


def check_axes(axes: tuple[int, ...], rank: int) -> None:
    """Axes of a rank-`rank` tensor: at least one, sorted, unique, each in [0, rank)."""
    check(
        bool(axes) and list(axes) == sorted(set(axes)) and axes[0] >= 0 and axes[-1] < rank,
        f"axes {axes} must be sorted unique axes in [0, {rank})",
    )


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcasting: align trailing axes; each pair is equal or has a 1."""
    rank = max(len(a), len(b))
    pa, pb = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    check(
        all(x == y or 1 in (x, y) for x, y in zip(pa, pb)),
        f"shapes {tuple(a)} and {tuple(b)} do not broadcast",
    )
    return tuple(max(x, y) for x, y in zip(pa, pb))
