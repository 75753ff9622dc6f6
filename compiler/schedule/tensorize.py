"""tensorize: declare that a loop nest computes what a tensor intrinsic describes, so that the code
generator emits the intrinsic there (`compiler.tensor_intrin`, `compiler.codegen_tensorize`).

The nest keeps its loops and its block: every analysis (compaction, region inference, the
interpreter, the printer) still sees the computation, and only code generation replaces it. The
match is checked here so a schedule that cannot be tensorized fails at the primitive, with the
reason; the layout an implementation needs is checked at the build, once buffers are compacted.
"""

from __future__ import annotations

from compiler.ir import TRUE, Block, PrimFunc, structural_equal
from compiler.schedule.errors import ScheduleError, check
from compiler.schedule.loop_transform import annotate_loop
from compiler.schedule.tree import find_loop, loops_above
from compiler.tensor_intrin import TENSORIZE, IntrinsicError, TensorIntrin, flatten, match, nest_of


def tensorize(func: PrimFunc, loop_name: str, intrin_name: str) -> PrimFunc:
    where = f"tensorize({loop_name!r}, {intrin_name!r})"
    path, loop = find_loop(func.body, loop_name)
    try:
        intrin = TensorIntrin.get(intrin_name)
        loops, block = nest_of(loop, where)
    except IntrinsicError as e:
        raise ScheduleError(str(e)) from None
    check(isinstance(block, Block), f"{where}: the nest must end in a block")
    assert isinstance(block, Block)
    check(
        block.init is None,
        f"{where}: block {block.name!r} has an init; decompose_reduction first, so the nest is the update",
    )
    check(
        structural_equal(block.predicate, TRUE),
        f"{where}: block {block.name!r} is guarded (a split that leaves a remainder); the nest must be whole",
    )
    busy = [lp.var.name for lp in loops if lp.kind in ("parallel", "vectorized")]
    check(not busy, f"{where}: loop(s) {busy} are parallel or vectorized; the intrinsic replaces them")
    try:
        match(intrin, loops, flatten(block), [lp for _, lp in loops_above(func.body, path)])
    except IntrinsicError as e:
        raise ScheduleError(f"{where}: {e}") from None
    return annotate_loop(func, loop_name, TENSORIZE, intrin_name)
