"""Auto-unroll: the whole function's unroll budget, one of the allowed steps, as
`pragma_auto_unroll_max_step` on the root block (compiler.auto_unroll applies it when lowering)."""

from __future__ import annotations

from compiler.auto_unroll import AUTO_UNROLL_MAX_STEP
from compiler.schedule import Schedule
from compiler.schedule_rules.decisions import Decisions
from compiler.schedule_rules.rule import RuleContext, ScheduleRule


class AutoUnroll(ScheduleRule):
    def apply(self, sch: Schedule, ctx: RuleContext) -> None:
        annotate_unroll(sch, ctx.decide, ctx.unroll_steps)


def annotate_unroll(sch: Schedule, decide: Decisions, steps: tuple[int, ...]) -> None:
    """The auto-unroll budget of the whole function, on the root block, one of `steps`."""
    probs = [1.0] * len(steps)
    chosen = sch.sample_categorical(list(steps), probs, decision=decide.unroll(steps))
    sch.annotate(sch.get_block("root"), AUTO_UNROLL_MAX_STEP, chosen)
