"""The rewrite both weight-packing passes make: a call whose second argument is a constant becomes
a call of the packed op on the same data and the constant packed once, at compile time."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from compiler.graph.ir import Call, Constant, Module, Node, name_supply, rewrite
from compiler.graph.op import call


def pack_weights(
    module: Module,
    packable: Callable[[Call], bool],
    op: str,
    pack: Callable[[np.ndarray], np.ndarray],
    kept_attrs: Sequence[str] = (),
) -> Module:
    """Each call `packable` accepts (its weights, args[1], a Constant) as a call of `op` on
    (args[0], pack(weights)), keeping the attributes `kept_attrs`. The packed constant is named
    after the weights and the op."""
    fresh = name_supply(module)
    suffix = op.rsplit("_", 1)[-1]

    def replace(node: Node, args: tuple[Node, ...]) -> Node | None:
        if not (isinstance(node, Call) and packable(node)):
            return None
        x, weight = args
        assert isinstance(weight, Constant)
        packed = Constant(fresh(f"{weight.name}_{suffix}"), pack(weight.data))
        return call(node.name, op, [x, packed], {k: node.attrs[k] for k in kept_attrs})

    return rewrite(module, replace)
