"""Auto-inline: an elementwise intermediate without a select is inlined into its consumers, where the
decisions let it (the default keeps a math call that several blocks read: a softmax's exp)."""

from __future__ import annotations

from compiler.ir import Select
from compiler.schedule import Schedule
from compiler.schedule_rules.analysis import block_of
from compiler.schedule_rules.rule import BlockRule, RuleContext, attempt
from compiler.visit import walk_expr


class AutoInline(BlockRule):
    def apply_to(self, sch: Schedule, name: str, ctx: RuleContext) -> None:
        block = block_of(sch.func, name)
        has_select = any(isinstance(e, Select) for e in walk_expr(block.body.value))
        if block.is_reduction or has_select or block.body.buffer in sch.func.params:
            return
        if ctx.decide.inline(sch.func, name):
            attempt(sch.compute_inline, sch.get_block(name))
