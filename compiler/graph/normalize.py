"""Normalizations written out as graph operators, shared by the frontends: the mean over axes and x
minus it, the biased variance, (x - mean) / sqrt(var + eps), and a per-channel affine map. Instance
norm, group norm, variance and LayerNormalization's statistics outputs are built from these; the
fused `layer_norm` operator stays the one for layer norm itself."""

from __future__ import annotations

import numpy as np

from compiler.graph.builder import GraphBuilder
from compiler.graph.ir import Node


def centered(b: GraphBuilder, name: str, x: Node, axes: tuple[int, ...]) -> tuple[Node, Node]:
    """The mean of x over `axes` (kept as size-1 axes), and x minus it."""
    mean = b.call("mean", [x], name=name, axes=axes, keepdims=True)
    return mean, b.call("subtract", [x, mean], name=name)


def squares(b: GraphBuilder, name: str, x: Node) -> Node:
    return b.call("multiply", [x, x], name=name)


def biased_variance(b: GraphBuilder, name: str, deviations: Node, axes: tuple[int, ...]) -> Node:
    """The mean of the squared deviations over `axes` (kept), as the norms divide by n."""
    return b.call("mean", [squares(b, name, deviations)], name=name, axes=axes, keepdims=True)


def root(b: GraphBuilder, name: str, var: Node, eps: float) -> Node:
    """sqrt(var + eps)."""
    shifted = b.call("add", [var, b.constant(f"{name}_eps", np.full(1, eps, var.type.dtype))], name=name)
    return b.call("sqrt", [shifted], name=name)


def normalized(b: GraphBuilder, name: str, x: Node, axes: tuple[int, ...], eps: float) -> Node:
    """(x - mean) / sqrt(var + eps) over `axes`."""
    _, deviations = centered(b, name, x, axes)
    spread = root(b, name, biased_variance(b, name, deviations, axes), eps)
    return b.call("divide", [deviations, spread], name=name)


def affine(b: GraphBuilder, name: str, x: Node, scale: Node | None, bias: Node | None, axis: int) -> Node:
    """x * scale + bias with the (n,) scale and bias along `axis` (either may be None)."""
    for param, op in ((scale, "multiply"), (bias, "add")):
        if param is not None:
            shape = (param.type.shape[0],) + (1,) * (len(x.type.shape) - axis - 1)
            along = b.call("reshape", [param], name=f"{name}_{op}", shape=shape)
            x = b.call(op, [x, along], name=name)
    return x
