"""What the operators' te computes share: a compute over an output index tuple of any rank, and
numpy-broadcast loads."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compiler import te
from compiler.ir import Expr, Var


def compute(shape: Sequence[int], fn: Callable[[tuple[Var, ...]], Expr], name: str) -> te.Tensor:
    """`te.compute` for any rank: `fn` gets the output index as one tuple, axes named i0, i1, ..."""
    names = [f"i{d}" for d in range(len(shape))]
    return te.compute(shape, lambda *index: fn(index), name=name, axis_names=names)


def broadcast_load(t: te.Tensor, index: Sequence[Expr]) -> Expr:
    """`t` at the output element `index` under numpy broadcasting: t's axes are the trailing output
    axes, and a size-1 axis of t is read at 0."""
    tail = index[len(index) - len(t.shape) :]
    return t[tuple(0 if n == 1 else i for n, i in zip(t.shape, tail))]
