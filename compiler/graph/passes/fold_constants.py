"""Constant folding: a call whose arguments are all constants becomes the constant it computes (with
the operator's numpy reference), e.g. the transposed weight of a Linear layer or a reshaped bias."""

from __future__ import annotations

import numpy as np

from compiler.graph.ir import Call, Constant, Module, Node, rewrite
from compiler.graph.op import OPS

# Folding must not blow a small constant up into a large one (a broadcast_to of a scalar to an
# activation's shape): the result may exceed its inputs by at most this many bytes.
GROWTH_BYTES = 1 << 16


def fold_constants(module: Module) -> Module:
    def fold(node: Node, args: tuple[Node, ...]) -> Node | None:
        if not isinstance(node, Call) or not args or not all(isinstance(a, Constant) for a in args):
            return None
        if node.type.nbytes > sum(a.type.nbytes for a in args) + GROWTH_BYTES:
            return None
        data = OPS[node.op].reference([a.data for a in args if isinstance(a, Constant)], node.attrs)
        array = np.ascontiguousarray(data, dtype=node.type.dtype).reshape(node.type.shape)
        return Constant(node.name, array)

    return rewrite(module, fold)
