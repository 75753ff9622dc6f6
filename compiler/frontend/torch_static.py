"""Folding what a torch.export program computes from constants alone, by running the ATen operator in
PyTorch itself: the position ids (`arange`), causal masks (`triu`, `full`), and the comparisons and
casts on buffers that real models compute from their static shapes cost nothing at run time, and
need no converter of ours. Float arithmetic on weights stays a graph call (the graph's constant
folding computes it, with the graph's own reference), unless no converter exists for it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

# Placeholders whose values the program holds.
CONSTANT_INPUTS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)

aten = torch.ops.aten

# Operators that read only their tensor inputs' shapes and dtypes (static here), not their values.
SHAPE_ONLY = frozenset(
    {
        aten.full_like.default,
        aten.zeros_like.default,
        aten.ones_like.default,
        aten.empty_like.default,
        aten.new_full.default,
        aten.new_zeros.default,
        aten.new_ones.default,
        aten.new_empty.default,
        aten.sym_size.int,
    }
)


def constant_nodes(program: ExportedProgram) -> set[torch.fx.Node]:
    """The nodes whose values do not depend on the user's inputs."""
    kinds = {spec.arg.name: spec.kind for spec in program.graph_signature.input_specs}
    known: set[torch.fx.Node] = set()
    for node in program.graph.nodes:
        if node.op == "placeholder":
            if kinds.get(node.name) in CONSTANT_INPUTS:
                known.add(node)
        elif node.op == "call_function" and (
            node.target in SHAPE_ONLY or all(a in known for a in node.all_input_nodes)
        ):
            known.add(node)
    return known


def folds(node: torch.fx.Node, known: set[torch.fx.Node], converted: Callable[[object], bool]) -> bool:
    """Whether `node` is computed at import: its inputs are all known, and either it has no
    converter or none of its tensor inputs is a float tensor (shape arithmetic, not weights)."""
    if node.op != "call_function" or node not in known:
        return False
    if not converted(node.target):
        return True
    return not any(_is_float_tensor(a) for a in node.all_input_nodes)


class ConstantValues:
    """The values of known nodes, each computed once when first asked for (with the known nodes it
    depends on, in program order: no recursion, however long the chain)."""

    def __init__(self, program: ExportedProgram, known: set[torch.fx.Node]) -> None:
        self.known = known
        self.order = {n: k for k, n in enumerate(program.graph.nodes)}
        self.values: dict[torch.fx.Node, Any] = {}
        for spec in program.graph_signature.input_specs:
            if spec.kind in CONSTANT_INPUTS and spec.target is not None:
                tensor = program.state_dict.get(spec.target, program.constants.get(spec.target))
                self.values[_placeholder(program, spec.arg.name)] = tensor

    def __getitem__(self, node: torch.fx.Node) -> Any:
        if node not in self.values:
            for n in sorted(self._missing(node), key=self.order.__getitem__):
                self.values[n] = _evaluate(n, self.values)
        return self.values[node]

    def _missing(self, node: torch.fx.Node) -> set[torch.fx.Node]:
        missing: set[torch.fx.Node] = set()
        pending = [node]
        while pending:
            n = pending.pop()
            if n in self.values or n in missing:
                continue
            assert n in self.known, f"{n.name} depends on the model's inputs"
            missing.add(n)
            if n.target not in SHAPE_ONLY:
                pending.extend(n.all_input_nodes)
        return missing


def _placeholder(program: ExportedProgram, name: str) -> torch.fx.Node:
    return next(n for n in program.graph.nodes if n.op == "placeholder" and n.name == name)


def _evaluate(node: torch.fx.Node, values: Mapping[torch.fx.Node, Any]) -> Any:
    """`node`'s value, its operator run eagerly on the values of its inputs (on zeros of their
    shapes, for an operator that reads only shapes)."""

    def value(n: torch.fx.Node) -> Any:
        if node.target in SHAPE_ONLY and n not in values:
            example = n.meta["val"]
            return torch.zeros(example.shape, dtype=example.dtype)
        return values[n]

    args = torch.fx.node.map_arg(node.args, value)
    kwargs = torch.fx.node.map_arg(node.kwargs, value)
    with torch.no_grad():
        return node.target(*args, **kwargs)  # type: ignore[operator]


def _is_float_tensor(node: torch.fx.Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.dtype.is_floating_point
