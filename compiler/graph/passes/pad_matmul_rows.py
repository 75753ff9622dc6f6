"""A matmul over a row count with no small divisor (a ViT's 197 tokens: a prime), a dense layer or
attention's batched products, is computed over its rows padded with zeros to a multiple of 8, then
sliced back. The register tile of a matmul takes
several rows at a time only where they divide the row count, so 197 rows ran one at a time: the
(197 x 768) @ (768 x 3072) layer with its gelu took 44.4 ms untuned on a Zen 4's two cores, 9.9 ms
padded to 200, the pad and the slice included (bench/results/2026-11-28.md). Runs before the
weights are packed, which then pack the padded layer's as any other."""

from __future__ import annotations

from compiler.graph.ir import Call, Module, Node, name_supply, rewrite
from compiler.graph.op import call

ROWS = 8  # padded to a multiple of this
MIN_ROWS = 16  # fewer rows: a batch-1 style layer, whose tiles run along the columns


def pad_matmul_rows(module: Module) -> Module:
    fresh = name_supply(module)

    def pad(node: Node, args: tuple[Node, ...]) -> Node | None:
        if not (isinstance(node, Call) and node.op == "matmul"):
            return None
        x, w = args
        shape = x.type.shape
        if len(shape) < 2 or len(w.type.shape) > len(shape) or not awkward(shape[-2]):
            return None  # a vector, or a weight that broadcasts x to more dimensions
        rank, extra = len(shape), -shape[-2] % ROWS
        pads = (0,) * rank + (0,) * (rank - 2) + (extra, 0)
        padded = call(fresh(f"{node.name}_pad"), "pad", [x], {"pads": pads, "value": 0.0})
        product = call(fresh(f"{node.name}_rows"), "matmul", [padded, w], node.attrs)
        out = node.type.shape
        window = {"begin": (0,) * rank, "end": out, "strides": (1,) * rank}
        return call(node.name, "slice", [product], window)

    return rewrite(module, pad)


def awkward(rows: int) -> bool:
    """Whether `rows` has no divisor from 4 to ROWS: a register tile would take fewer than 4 rows."""
    return rows >= MIN_ROWS and not any(rows % d == 0 for d in range(4, ROWS + 1))
