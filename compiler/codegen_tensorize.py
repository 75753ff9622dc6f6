"""Code generation of a tensorized loop nest: the intrinsic's implementation in place of the loops.

The nest is matched again here, on the lowered program, because only now does every buffer have
the shape it is allocated with (compaction shrinks staged panels and accumulators), which fixes the
strides the implementation is given; and because a script may carry the annotation without the
schedule's check. Anything that does not match fails the build with the reason, never runs loops
the intrinsic does not compute.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.ir import BufferStore, For
from compiler.tensor_intrin import TENSORIZE, IntrinsicError, Operand, TensorIntrin, match, nest_of

if TYPE_CHECKING:
    from compiler.codegen import CodeGen


def is_tensorized(loop: For) -> bool:
    return any(key == TENSORIZE for key, _ in loop.annotations)


def emit_tensorized(cg: CodeGen, loop: For) -> None:
    name = str(dict(loop.annotations)[TENSORIZE])
    intrin = TensorIntrin.get(name)
    missing = intrin.features - cg.target.feature_set
    if missing:
        raise IntrinsicError(
            f"{name} needs the CPU feature(s) {sorted(missing)}, which {cg.target.mcpu} lacks"
        )
    loops, store = nest_of(loop, f"loop {loop.var.name} tensorized with {name}")
    if not isinstance(store, BufferStore):
        raise IntrinsicError(f"loop {loop.var.name}: a block survived lowering")
    regions = match(intrin, loops, store)
    operands = [
        Operand(
            regions[param].buffer.name,
            cg.address(regions[param].buffer, regions[param].base),
            regions[param].strides(),
        )
        for param in intrin.desc.params
    ]
    intrin.impl(cg, operands)
