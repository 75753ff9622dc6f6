"""A matmul whose columns are awkward for the vector tile, attention's 197 x 197 scores, is computed
over its right operand padded with zeros, then sliced back: columns above a whole-row vector (128)
with no divisor from 8 to 64 are padded to a multiple of 16, the vector tile's lanes. The tile must
divide the columns, so 197 of them ran one lane at a time (bench/results/2026-11-28.md).

Awkward rows are no longer padded here: the tiling rule covers them with a guarded last tile
(`schedule_rules.analysis.row_cover`), which keeps the matmul's epilogues in its kernel where the
padding's slice split them off (ViT-base, 2026-12-04: 5.9 ms of its 88 in slices).

A constant weight is padded here, so the packing pass that runs next packs it as any other."""

from __future__ import annotations

import numpy as np

from compiler.graph.ir import Call, Constant, Module, Node, name_supply, rewrite
from compiler.graph.op import call

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
        cols = -w.type.shape[-1] % LANES if awkward_columns(w.type.shape[-1]) else 0
        if not cols:
            return None
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


def awkward_columns(cols: int) -> bool:
    """Whether the vector tile could take only a few lanes of `cols`: too many columns to vectorize
    whole, none of the tiles from half a vector to four dividing them."""
    return cols > WHOLE_ROW and not any(cols % d == 0 for d in range(LANES // 2, 4 * LANES + 1))
