"""What the operator modules share: attribute schemas and argument checks for the type rules, and
the indexing helpers their te computes build on."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from compiler import te
from compiler.graph.ir import FLOAT_DTYPES, Attrs, AttrValue, TensorType
from compiler.graph.op import check
from compiler.ir import Expr, Var


@dataclass(frozen=True)
class Kind:
    """What an attribute's value must be, and how an error says it."""

    what: str
    accepts: Callable[[AttrValue], bool]


def _is_int(v: AttrValue) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: AttrValue) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


FLOAT = Kind("a number", _is_number)
OPTIONAL_FLOAT = Kind("a number or None", lambda v: v is None or _is_number(v))
INT = Kind("an int", _is_int)
INTS = Kind("a tuple of ints", lambda v: isinstance(v, tuple) and all(_is_int(e) for e in v))


def one_of(*choices: str) -> Kind:
    return Kind(" or ".join(repr(c) for c in choices), lambda v: v in choices)


def check_attrs(attrs: Attrs, schema: Mapping[str, Kind]) -> None:
    """Exactly the attributes of `schema`, each of its kind: the frontends normalize every attribute,
    so a missing or extra one is a frontend bug to report, not a default to guess."""
    check(set(attrs) == set(schema), f"takes attributes {sorted(schema)}, got {sorted(attrs)}")
    for key, kind in schema.items():
        check(kind.accepts(attrs[key]), f"attribute {key}={attrs[key]!r} must be {kind.what}")


def float_args(types: Sequence[TensorType], count: int | None) -> str:
    """`count` arguments (at least one when None), all float of one dtype, which is returned."""
    if count is None:
        check(len(types) >= 1, "takes at least one argument, got none")
    else:
        check(len(types) == count, f"takes {count} argument(s), got {len(types)}")
    for k, t in enumerate(types):
        check(t.dtype in FLOAT_DTYPES, f"argument {k} has dtype {t.dtype}; expected float32 or float64")
    dtypes = sorted({t.dtype for t in types})
    check(len(dtypes) == 1, f"arguments mix dtypes {dtypes}")
    return types[0].dtype


def check_axis(axis: int, rank: int) -> None:
    check(0 <= axis < rank, f"axis {axis} is out of range for rank {rank}")


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcasting: align trailing axes; each pair is equal or has a 1."""
    rank = max(len(a), len(b))
    pa, pb = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    check(
        all(x == y or 1 in (x, y) for x, y in zip(pa, pb)),
        f"shapes {tuple(a)} and {tuple(b)} do not broadcast",
    )
    return tuple(max(x, y) for x, y in zip(pa, pb))


def compute(shape: Sequence[int], fn: Callable[[tuple[Var, ...]], Expr], name: str) -> te.Tensor:
    """`te.compute` for any rank: `fn` gets the output index as one tuple, axes named i0, i1, ..."""
    names = [f"i{d}" for d in range(len(shape))]
    return te.compute(shape, lambda *index: fn(index), name=name, axis_names=names)


def broadcast_load(t: te.Tensor, index: Sequence[Expr]) -> Expr:
    """`t` at the output element `index` under numpy broadcasting: t's axes are the trailing output
    axes, and a size-1 axis of t is read at 0."""
    tail = index[len(index) - len(t.shape) :]
    return t[tuple(0 if n == 1 else i for n, i in zip(t.shape, tail))]
