"""What the operators' type rules check again and again: float arguments of one dtype, and attributes
of the declared kind; each refuses with the reason (OpError) and returns the checked value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

from compiler.graph.ir import FLOAT_DTYPES, Attrs, AttrValue, TensorType
from compiler.graph.op import OpError, check


def float_args(args: Sequence[TensorType], count: int) -> Sequence[TensorType]:
    """`count` float tensors of one dtype."""
    check(len(args) == count, f"takes {count} argument(s), got {len(args)}")
    dtypes = sorted({a.dtype for a in args})
    check(all(d in FLOAT_DTYPES for d in dtypes), f"needs float tensors {FLOAT_DTYPES}, got {dtypes}")
    check(len(dtypes) == 1, f"the arguments must share one dtype, got {dtypes}")
    return args


def _get(attrs: Attrs, key: str) -> AttrValue:
    check(key in attrs, f"missing attribute {key!r}")
    return attrs[key]


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_tuple(value: AttrValue) -> tuple[int, ...] | None:
    if not isinstance(value, tuple):
        return None
    out = tuple(v for v in value if _is_int(v))
    return out if len(out) == len(value) else None


def ints(attrs: Attrs, key: str, length: int, minimum: int) -> tuple[int, ...]:
    """A tuple of `length` ints, each >= minimum."""
    value = _int_tuple(_get(attrs, key))
    if value is None or len(value) != length or any(v < minimum for v in value):
        raise OpError(f"{key} must be {length} ints >= {minimum}, got {attrs[key]!r}")
    return value


def integer(attrs: Attrs, key: str, minimum: int) -> int:
    value = _get(attrs, key)
    if not _is_int(value) or value < minimum:
        raise OpError(f"{key} must be an int >= {minimum}, got {value!r}")
    return value


def flag(attrs: Attrs, key: str) -> bool:
    value = _get(attrs, key)
    if not isinstance(value, bool):
        raise OpError(f"{key} must be a bool, got {value!r}")
    return value


def number(attrs: Attrs, key: str) -> float:
    value = _get(attrs, key)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise OpError(f"{key} must be a number, got {value!r}")
    return float(value)


def axes(attrs: Attrs, key: str, rank: int) -> tuple[int, ...]:
    """Axes of a rank-`rank` tensor: at least one, sorted, unique, each in [0, rank)."""
    value = _int_tuple(_get(attrs, key))
    if not value or list(value) != sorted(set(value)) or value[0] < 0 or value[-1] >= rank:
        raise OpError(f"{key} must be sorted unique axes in [0, {rank}), got {attrs[key]!r}")
    return value
