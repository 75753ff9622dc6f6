"""A constant that holds one value everywhere, as an operand of a broadcasting operator, becomes one
element that the operator broadcasts.

torch.export writes the safe softmax of `scaled_dot_product_attention` as
`where(row all -inf, full_like(scores, 0), softmax(scores))`, and `full_like` of an activation is
a constant of the activation's whole shape: in ViT-base twelve (1, 12, 197, 197) tensors of zeros,
22 MB of the model, each read in full by its softmax kernel at every call. One element computes the
same where the other operands still give the output its shape; elsewhere the operand stays whole.
"""

from __future__ import annotations

import numpy as np

from compiler.graph.ir import Call, Constant, Module, Node, name_supply, rewrite
from compiler.graph.op import OPS, Pattern, call

SMALL_BYTES = 64  # a constant this small is left as it is


def shrink_uniform_constants(module: Module) -> Module:
    fresh = name_supply(module)

    def shrink(node: Node, args: tuple[Node, ...]) -> Node | None:
        if not (isinstance(node, Call) and OPS[node.op].pattern == Pattern.BROADCAST):
            return None
        shrunk = tuple(
            Constant(fresh(f"{a.name}_one"), a.data.reshape(-1)[:1].reshape((1,) * a.data.ndim))
            if isinstance(a, Constant) and uniform(a.data)
            else a
            for a in args
        )
        if shrunk == args:
            return None
        out = call(node.name, node.op, shrunk, node.attrs)
        return out if out.type == node.type else None

    return rewrite(module, shrink)


def uniform(data: np.ndarray) -> bool:
    """Whether `data` is larger than SMALL_BYTES and every element equals the first (NaN never does)."""
    return data.nbytes > SMALL_BYTES and bool(np.all(data == data.reshape(-1)[0]))
