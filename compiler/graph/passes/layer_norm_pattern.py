"""Layer normalization written out, as ONNX exports before opset 17 and hand-written models give it,
becomes one `layer_norm` call:

    mean = mean(x, axes, keepdims=True);  d = x - mean
    var = mean(d ** 2, axes, keepdims=True)   (or d * d)
    y = d / sqrt(var + eps)   [* gamma + beta]

Written out it is five kernels (two reductions, and the subtraction read by both the variance and the
division, which no fusion rule may merge); as one operator it is one. Constants must be folded first:
the exponent, epsilon, gamma and beta are recognized only as constants."""

from __future__ import annotations

import numpy as np

from compiler.graph.ir import Call, Constant, Module, Node, name_supply, rewrite, with_args
from compiler.graph.op import attr_ints, call


def match_layer_norm(module: Module) -> Module:
    fresh = name_supply(module)
    users = module.users()

    def replace(node: Node, args: tuple[Node, ...]) -> Node | None:
        if not isinstance(node, Call) or node.op not in ("add", "divide"):
            return None
        if node.op == "divide" and _scaled_and_shifted(node, users):
            return None  # matched at the add, with its gamma and beta
        rebuilt = with_args(node, args)
        assert isinstance(rebuilt, Call)
        found = _match(rebuilt)
        if found is None:
            return None
        x, axes, epsilon, gamma, beta = found
        shape = tuple(x.type.shape[a] for a in axes)
        dtype = x.type.dtype
        gamma_node = Constant(
            fresh(f"{node.name}_gamma"), np.ascontiguousarray(np.broadcast_to(gamma, shape), dtype)
        )
        beta_node = Constant(
            fresh(f"{node.name}_beta"), np.ascontiguousarray(np.broadcast_to(beta, shape), dtype)
        )
        return call(node.name, "layer_norm", [x, gamma_node, beta_node], {"axes": axes, "epsilon": epsilon})

    return rewrite(module, replace)


Match = tuple[Node, tuple[int, ...], float, np.ndarray, np.ndarray]


def _match(root: Call) -> Match | None:
    """x, axes, epsilon, gamma, beta when `root` ends a written-out layer norm."""
    gamma, beta = np.ones(1), np.zeros(1)
    node: Node = root
    if root.op == "add":
        scaled, shift = root.args
        if not (isinstance(shift, Constant) and _is(scaled, "multiply")):
            return None
        assert isinstance(scaled, Call)
        normalized, scale = scaled.args
        if not isinstance(scale, Constant):
            return None
        node, gamma, beta = normalized, scale.data, shift.data
    if not _is(node, "divide"):
        return None
    assert isinstance(node, Call)
    centered, std = node.args
    x_axes = _centered(centered)
    variance_eps = _sqrt_of_sum(std)
    if x_axes is None or variance_eps is None:
        return None
    (x, axes), (variance, epsilon) = x_axes, variance_eps
    if not _is_variance(variance, centered, axes) or not _trailing(axes, len(x.type.shape)):
        return None
    shape = tuple(x.type.shape[a] for a in axes)
    if not (_fits(gamma, shape) and _fits(beta, shape)):
        return None
    return x, axes, epsilon, gamma, beta


def _scaled_and_shifted(node: Node, users: dict[int, list[Node]]) -> bool:
    """node's only use is `node * constant`, whose only use is `+ constant`."""
    (scaled, *more) = users[id(node)] or [node]
    if more or not _is(scaled, "multiply") or not any(isinstance(a, Constant) for a in scaled.args):
        return False
    (shifted, *more) = users[id(scaled)] or [scaled]
    return not more and _is(shifted, "add") and any(isinstance(a, Constant) for a in shifted.args)


def _is(node: Node, op: str) -> bool:
    return isinstance(node, Call) and node.op == op


def _centered(node: Node) -> tuple[Node, tuple[int, ...]] | None:
    """(x, axes) when node is x - mean(x, axes, keepdims=True)."""
    if not _is(node, "subtract"):
        return None
    x, mean = node.args
    if not (_is(mean, "mean") and mean.args[0] is x and isinstance(mean, Call) and mean.attrs["keepdims"]):
        return None
    return x, attr_ints(mean.attrs, "axes")


def _sqrt_of_sum(node: Node) -> tuple[Node, float] | None:
    """(v, eps) when node is sqrt(v + eps) with a scalar constant eps."""
    if not _is(node, "sqrt") or not _is(node.args[0], "add"):
        return None
    variance, eps = node.args[0].args
    if not isinstance(eps, Constant) or eps.data.size != 1:
        return None
    return variance, float(eps.data.reshape(-1)[0])


def _is_variance(node: Node, centered: Node, axes: tuple[int, ...]) -> bool:
    """node is mean(d ** 2 or d * d, axes, keepdims=True) of the same centered d."""
    if not (isinstance(node, Call) and node.op == "mean" and attr_ints(node.attrs, "axes") == axes):
        return False
    square = node.args[0]
    if _is(square, "multiply"):
        return square.args[0] is centered and square.args[1] is centered
    if _is(square, "power"):
        base, exponent = square.args
        return base is centered and isinstance(exponent, Constant) and bool(np.all(exponent.data == 2))
    return False


def _trailing(axes: tuple[int, ...], rank: int) -> bool:
    return axes == tuple(range(rank - len(axes), rank))


def _fits(values: np.ndarray, shape: tuple[int, ...]) -> bool:
    """`values` broadcast to `shape` without growing past it (a per-feature or a scalar constant)."""
    try:
        return np.broadcast_shapes(values.shape, shape) == shape
    except ValueError:
        return False
