"""A matmul over awkward extents, a dense layer or attention's batched products, is computed over
operands padded with zeros, then sliced back:

- rows with no divisor from 4 to 8 (a ViT's 197 tokens, a prime) are padded to a multiple of 8:
  the register tile takes several rows at a time only where they divide the row count, so 197 rows
  ran one at a time. The (197 x 768) @ (768 x 3072) layer with its gelu took 44.4 ms untuned on a
  Zen 4's two cores, 9.9 ms padded to 200, the pad and the slice included;
- columns above a whole-row vector (128) with no divisor from 8 to 64 (attention's 197 x 197
  scores) are padded to a multiple of 16, the vector tile's lanes: the tile must divide the columns,
  so 197 of them ran one lane at a time (bench/results/2026-11-28.md).

A constant weight is padded here, so the packing pass that runs next packs it as any other."""

from __future__ import annotations

import numpy as np

from compiler.graph.ir import Call, Constant, Module, Node, name_supply, rewrite
from compiler.graph.op import call

ROWS = 8  # padded to a multiple of this
MIN_ROWS = 16  # fewer rows: a batch-1 style layer, whose tiles run along the columns
LANES = 16  # columns padded to a multiple of this
WHOLE_ROW = 128  # columns up to this vectorize whole, whatever their count


def pad_matmul(module: Module) -> Module:
    fresh = name_supply(module)

    def pad(node: Node, args: tuple[Node, ...]) -> Node | None:
        if not (isinstance(node, Call) and node.op == "matmul"):
            return None
        x, w = args
        if len(x.type.shape) < 2 or not 2 <= len(w.type.shape) <= len(x.type.shape):
            return None  # a vector, or a weight that broadcasts x to more dimensions
        rows = -x.type.shape[-2] % ROWS if awkward_rows(x.type.shape[-2]) else 0
        cols = -w.type.shape[-1] % LANES if awkward_columns(w.type.shape[-1]) else 0
        if not rows and not cols:
            return None
        if rows:
            x = _padded(x, -2, rows, fresh(f"{node.name}_pad"))
        if cols:
            w = _padded(w, -1, cols, fresh(f"{node.name}_pad_columns"))
        product = call(fresh(f"{node.name}_padded"), "matmul", [x, w], node.attrs)
        out = node.type.shape
        window = {"begin": (0,) * len(out), "end": out, "strides": (1,) * len(out)}
        return call(node.name, "slice", [product], window)

    return rewrite(module, pad)


def _padded(node: Node, axis: int, extra: int, name: str) -> Node:
    """`node` with `extra` zeros after the end of `axis`: a constant padded now, else a pad call."""
    rank = len(node.type.shape)
    after = [0] * rank
    after[axis] = extra
    if isinstance(node, Constant):
        return Constant(name, np.pad(node.data, [(0, a) for a in after]))
    return call(name, "pad", [node], {"pads": (0,) * rank + tuple(after), "value": 0.0})


def awkward_rows(rows: int) -> bool:
    """Whether `rows` has no divisor from 4 to ROWS: a register tile would take fewer than 4 rows."""
    return rows >= MIN_ROWS and not any(rows % d == 0 for d in range(4, ROWS + 1))


def awkward_columns(cols: int) -> bool:
    """Whether the vector tile could take only a few lanes of `cols`: too many columns to vectorize
    whole, none of the tiles from half a vector to four dividing them."""
    return cols > WHOLE_ROW and not any(cols % d == 0 for d in range(LANES // 2, 4 * LANES + 1))
