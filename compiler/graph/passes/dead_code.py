"""Dead-code elimination: calls that compute nothing new (a reshape to the same shape, an identity
permutation, a slice of everything) are dropped, and so are PrimFuncs no call uses. Nodes no output
depends on are never part of a module's dataflow (`Module.nodes`), so they vanish on their own."""

from __future__ import annotations

from dataclasses import replace

from compiler.graph.ir import Call, CallTIR, Module, Node, rewrite
from compiler.graph.op import attr_ints


def eliminate_dead_code(module: Module) -> Module:
    def drop_no_op(node: Node, args: tuple[Node, ...]) -> Node | None:
        return args[0] if isinstance(node, Call) and _is_no_op(node, args) else None

    module = rewrite(module, drop_no_op)
    called = {n.func for n in module.nodes() if isinstance(n, CallTIR)}
    funcs = {name: f for name, f in module.funcs.items() if name in called}
    return replace(module, funcs=funcs)


def _is_no_op(node: Call, args: tuple[Node, ...]) -> bool:
    if len(args) != 1 or args[0].type != node.type:
        return False
    if node.op in ("reshape", "broadcast_to", "slice", "concat"):
        return True  # same type in and out: the same elements in the same places
    if node.op == "transpose":
        axes = attr_ints(node.attrs, "axes")
        return axes == tuple(range(len(axes)))
    return node.op == "pad" and not any(attr_ints(node.attrs, "pads"))
