"""Inputs turned into constants (Relax's BindParams): weights a model took as inputs become part of
it, so the passes can fold and pack them and the compiled model no longer asks for them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from compiler.graph.ir import Constant, GraphError, Module, Node, rewrite


def bind_params(module: Module, params: Mapping[str, object]) -> Module:
    """`module` with each input named in `params` replaced by that value as a constant; the value
    must have the input's shape and dtype (a rank-0 input takes a scalar)."""
    by_name = {n.name: (k, n) for k, n in enumerate(module.inputs)}
    constants: dict[int, Constant] = {}
    for name, value in params.items():
        if name not in by_name:
            raise GraphError(name, "bind_params", f"no input is named {name}; inputs: {', '.join(by_name)}")
        k, node = by_name[name]
        array = np.array(value)  # a copy: the constant must not change when the caller's array does
        if k in module.scalar_inputs and array.shape == ():
            array = array.reshape(1)
        if array.shape != node.type.shape or str(array.dtype) != node.type.dtype:
            raise GraphError(
                name,
                "bind_params",
                f"the input is {node.type.shape} {node.type.dtype}, given {array.shape} {array.dtype}",
            )
        constants[id(node)] = Constant(name, array)

    def bind(node: Node, _: tuple[Node, ...]) -> Node | None:
        return constants.get(id(node))

    bound = rewrite(module, bind)
    kept = [(k, n) for k, n in enumerate(module.inputs) if id(n) not in constants]
    return replace(
        bound,
        inputs=tuple(n for _, n in kept),
        scalar_inputs=frozenset(new for new, (old, _) in enumerate(kept) if old in module.scalar_inputs),
    )
