"""Batch-norm folding: inference batch norm is a per-channel affine map, so after a conv2d whose
output nothing else reads it folds into the conv's weights and a bias; anywhere else it becomes a
multiply and an add (which fuse into whatever precedes them). Run constant folding afterwards: the
new weights are calls on constants until then."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compiler.graph.ir import Call, Constant, Module, Node, name_supply, rewrite
from compiler.graph.op import attr_float, call


def fold_batch_norm(module: Module) -> Module:
    users = module.users()
    fresh = name_supply(module)

    def fold(node: Node, args: tuple[Node, ...]) -> Node | None:
        if not isinstance(node, Call) or node.op != "batch_norm":
            return None
        x, *stats = args
        if not all(isinstance(s, Constant) for s in stats):
            return None
        scale, shift = _affine(
            [s.data for s in stats if isinstance(s, Constant)], attr_float(node.attrs, "epsilon")
        )
        old_conv, old_bias = _conv_and_bias(node.args[0])
        if (
            old_conv is not None
            and _sole_user(users, node.args[0])
            and (old_bias is None or _sole_user(users, old_conv))
        ):
            conv, bias = _conv_and_bias(x)
            assert conv is not None
            return _into_conv(node, conv, bias, scale, shift, fresh)
        return _as_multiply_add(node, x, scale, shift, fresh)

    return rewrite(module, fold)


def _affine(stats: list[np.ndarray], epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """batch_norm(x) = x * scale + shift, per channel."""
    gamma, beta, mean, var = (s.astype(np.float64) for s in stats)
    scale = gamma / np.sqrt(var + epsilon)
    return scale, beta - mean * scale


def _conv_and_bias(x: Node) -> tuple[Call | None, Constant | None]:
    """`x` as conv2d(...) or conv2d(...) + constant bias, else (None, None)."""
    if isinstance(x, Call) and x.op == "conv2d" and isinstance(x.args[1], Constant):
        return x, None
    if isinstance(x, Call) and x.op == "add":
        conv, bias = x.args
        is_conv = isinstance(conv, Call) and conv.op == "conv2d" and isinstance(conv.args[1], Constant)
        if is_conv and isinstance(bias, Constant) and bias.type.shape in ((conv.type.shape[1], 1, 1), (1,)):
            assert isinstance(conv, Call)
            return conv, bias
    return None, None


def _sole_user(users: dict[int, list[Node]], node: Node) -> bool:
    return len(users[id(node)]) == 1


def _into_conv(
    bn: Call,
    conv: Call,
    bias: Constant | None,
    scale: np.ndarray,
    shift: np.ndarray,
    fresh: Callable[[str], str],
) -> Node:
    x, weight = conv.args
    assert isinstance(weight, Constant)
    dtype = weight.data.dtype
    channels = weight.type.shape[0]
    new_weight = (weight.data * scale.reshape(-1, 1, 1, 1)).astype(dtype)
    old_bias = np.zeros(channels) if bias is None else np.broadcast_to(bias.data.reshape(-1), (channels,))
    new_bias = (old_bias * scale + shift).astype(dtype).reshape(channels, 1, 1)
    folded = call(conv.name, "conv2d", [x, Constant(fresh(f"{bn.name}_weight"), new_weight)], conv.attrs)
    return call(bn.name, "add", [folded, Constant(fresh(f"{bn.name}_bias"), new_bias)])


def _as_multiply_add(
    bn: Call, x: Node, scale: np.ndarray, shift: np.ndarray, fresh: Callable[[str], str]
) -> Node:
    dtype = x.type.dtype
    per_channel = (x.type.shape[1],) + (1,) * (len(x.type.shape) - 2)
    scaled = call(
        fresh(f"{bn.name}_scale"),
        "multiply",
        [x, Constant(fresh(f"{bn.name}_s"), scale.astype(dtype).reshape(per_channel))],
    )
    return call(
        bn.name, "add", [scaled, Constant(fresh(f"{bn.name}_b"), shift.astype(dtype).reshape(per_channel))]
    )
