"""Run a module of graph operators with their numpy references: the graph level's ground truth,
against which the frontends (vs the framework) and the compiled executor (vs this) are checked. An
extern call runs its registered function, which is its own reference."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.graph import extern
from compiler.graph.ir import Call, CallDPSPacked, Constant, GraphError, Input, Module, Node
from compiler.graph.op import OPS


def run_reference(module: Module, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs of `module` on `inputs`, computed op by op in numpy (before fusion only). Inputs
    and outputs have the shapes the model's caller sees (rank 0 for its scalars)."""
    if len(inputs) != len(module.inputs):
        raise ValueError(f"the module takes {len(module.inputs)} inputs, got {len(inputs)}")
    inputs = [_held(module, k, np.asarray(a)) for k, a in enumerate(inputs)]
    values: dict[int, np.ndarray] = {}
    for node in module.nodes():
        values[id(node)] = _evaluate(node, values, module, inputs)
    return [
        values[id(o)].reshape(()) if k in module.scalar_outputs else values[id(o)]
        for k, o in enumerate(module.outputs)
    ]


def _held(module: Module, k: int, array: np.ndarray) -> np.ndarray:
    """Input `k` as the graph holds it: a rank-0 input as shape (1,)."""
    if k not in module.scalar_inputs:
        return array
    if array.shape != ():
        raise ValueError(f"input {module.inputs[k].name}: expected shape (), got {array.shape}")
    return array.reshape(1)


def _evaluate(
    node: Node, values: dict[int, np.ndarray], module: Module, inputs: Sequence[np.ndarray]
) -> np.ndarray:
    if isinstance(node, Input):
        array = np.asarray(inputs[module.inputs.index(node)])
        if array.shape != node.type.shape:
            raise ValueError(f"input {node.name}: expected shape {node.type.shape}, got {array.shape}")
        return array.astype(node.type.dtype, copy=False)
    if isinstance(node, Constant):
        return node.data
    if isinstance(node, Call):
        out = OPS[node.op].reference([values[id(a)] for a in node.args], node.attrs)
        return np.asarray(out, dtype=node.type.dtype).reshape(node.type.shape)
    if isinstance(node, CallDPSPacked):
        return extern.call(node, [values[id(a)] for a in node.args])
    raise GraphError(
        node.name, type(node).__name__, "only graph operators have a numpy reference; run it before fusion"
    )
