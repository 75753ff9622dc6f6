"""A reduction with less spatial parallelism than the machine has cores (a batch-1 row sum, the norm
of one long vector, a dot product) runs on one core however long it is. This rule factors its
reduction into one partial result per core (`rfactor`, MetaSchedule's AddRFactor): the partials run
as a parallel loop, each accumulating in a local buffer the code generator keeps in registers, and a
small write-back block combines them. On two cores of a Zen 4 a sum of 2^20 floats took 47 us,
26 us so, and a dot product of 2^20, whose product the loop vectorizer left scalar into the output,
888 us, 49 us so (`python -m bench rfactor`, bench/results/2026-11-28.md)."""

from __future__ import annotations

import math

from compiler.interpret import reduction_parts
from compiler.schedule import Schedule
from compiler.schedule.tree import find_block, loops_above
from compiler.schedule_rules.analysis import loop_kinds
from compiler.schedule_rules.rule import BlockRule, RuleContext

# The shortest reduction worth a parallel region: a sum of 2^16 floats gained 1.16x, one of 2^15
# broke even (0.99x): shorter, starting the thread team costs what the second core saves.
MIN_REDUCTION = 1 << 15


class AddRFactor(BlockRule):
    def apply_to(self, sch: Schedule, name: str, ctx: RuleContext) -> None:
        parts = _parts(sch, name, ctx.cfg.cores)
        if parts is None or not ctx.decide.rfactor(sch):
            return
        block = sch.get_block(name)
        loops = sch.get_loops(block)
        spatial = loop_kinds(sch.func, name).count("S")
        reduction = loops[spatial:]
        k = sch.fuse(*reduction) if len(reduction) > 1 else reduction[0]
        outer, _ = sch.split(k, [parts, None])
        rf = sch.rfactor(outer, 0)
        rf_loops = sch.get_loops(rf)
        sch.reorder(rf_loops[spatial], *rf_loops[:spatial])
        sch.parallel(rf_loops[spatial])
        local = sch.cache_write(rf, 0, "local")
        sch.reverse_compute_at(local, rf_loops[spatial])
        ctx.placed |= {rf.name, local.name}


def _parts(sch: Schedule, name: str, cores: int) -> int | None:
    """How many partial results the block's reduction splits into (the largest divisor of its
    extent up to `cores`), or None where the rule does not apply: a te-form reduction (spatial loops,
    then reduction loops, an init), with fewer spatial iterations than cores, long enough."""
    path, block = find_block(sch.func.body, name)  # read from the IR: no query enters the trace
    if block.init is None or reduction_parts(block) is None or cores < 2:
        return None
    kinds = loop_kinds(sch.func, name)
    spatial = kinds.count("S")
    if "-" in kinds or "R" in kinds[:spatial] or spatial == len(kinds):
        return None
    extents = [lp.extent for _, lp in loops_above(sch.func.body, path)]
    iterations, reduction = math.prod(extents[:spatial]), math.prod(extents[spatial:])
    if iterations >= cores or reduction < MIN_REDUCTION:
        return None
    return max((d for d in range(2, cores + 1) if reduction % d == 0), default=None)
