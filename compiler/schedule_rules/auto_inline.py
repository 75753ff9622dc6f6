"""Auto-inline: an elementwise intermediate is inlined into its consumers, where the decisions let
it (the default keeps a math call that several blocks read: a softmax's exp). A select that guards
its operands' indices (a padding's `1 <= i < 57 ? x[i - 1] : 0`) stays a block of its own: inlined,
its guard would move into the consumer's innermost loop. A select on data (a `where` of a mask)
guards nothing and is inlined like any other: a ViT's safe softmax wrote its where to a buffer the
size of the attention scores, then copied it to the output's view."""

from __future__ import annotations

from compiler.ir import Expr, Load, Select, Var
from compiler.schedule import Schedule
from compiler.schedule_rules.analysis import block_of
from compiler.schedule_rules.rule import BlockRule, RuleContext, attempt
from compiler.visit import walk_expr


class AutoInline(BlockRule):
    def apply_to(self, sch: Schedule, name: str, ctx: RuleContext) -> None:
        block = block_of(sch.func, name)
        guards = any(isinstance(e, Select) and guards_indices(e.cond) for e in walk_expr(block.body.value))
        if block.is_reduction or guards or block.body.buffer in sch.func.params:
            return
        if ctx.decide.inline(sch.func, name):
            attempt(sch.compute_inline, sch.get_block(name))


def guards_indices(cond: Expr) -> bool:
    """Whether a variable appears in `cond` outside the indices of a load: the condition tests
    where the block is, not what it read."""
    if isinstance(cond, Var):
        return True
    return not isinstance(cond, Load) and any(guards_indices(c) for c in cond.children())
