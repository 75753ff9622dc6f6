"""Powers by the small constant exponents PyTorch's CPU kernel special-cases, computed as it does:
x ** 2 as x * x, x ** 3 as x * x * x, x ** 0.5 as sqrt(x), x ** -0.5 as 1 / sqrt(x), x ** -1 as
1 / x, x ** -2 as 1 / (x * x). llvm.pow is one libm call per vector lane; GPT-2's tanh gelu (x ** 3)
and written-out variances (x ** 2) spent their time there. Runs after layer-norm matching, which
reads the power form."""

from __future__ import annotations

from collections.abc import Callable

from compiler.dtypes import FLOAT_DTYPES
from compiler.graph.ir import Call, Constant, Module, Node, name_supply, rewrite
from compiler.graph.op import call

EXPONENTS = (2.0, 3.0, 0.5, -0.5, -1.0, -2.0)


def expand_powers(module: Module) -> Module:
    fresh = name_supply(module)

    def expand(node: Node, args: tuple[Node, ...]) -> Node | None:
        if not (isinstance(node, Call) and node.op == "power"):
            return None
        x, exponent = args
        if not (isinstance(exponent, Constant) and exponent.data.size == 1) or x.type != node.type:
            return None  # a tensor of exponents, or one that broadcasts x to a larger shape
        e = float(exponent.data.reshape(-1)[0])
        if x.type.dtype not in FLOAT_DTYPES and e not in (2.0, 3.0):
            return None  # an integer's roots and reciprocals are not its powers' (they truncate)
        return _expanded(x, e, node.name, fresh) if e in EXPONENTS else None

    return rewrite(module, expand)


def _expanded(x: Node, e: float, name: str, fresh: Callable[[str], str]) -> Node:
    """x ** e for e in EXPONENTS; the last call keeps the power's name."""

    def op(kind: str, operands: list[Node], last: bool = False) -> Node:
        return call(name if last else fresh(f"{name}_{kind}"), kind, operands)

    if e == 0.5:
        return op("sqrt", [x], last=True)
    if e == -0.5:
        return op("reciprocal", [op("sqrt", [x])], last=True)
    if e == -1.0:
        return op("reciprocal", [x], last=True)
    square = op("multiply", [x, x], last=e == 2.0)
    if e == 2.0:
        return square
    if e == 3.0:
        return op("multiply", [square, x], last=True)
    return op("reciprocal", [square], last=True)
