"""Schedule rules: how the compiler schedules a block/loop function, one rule per module, applied in
the order of a list (`rules.DEFAULT_RULES`), consumers first, in the spirit of MetaSchedule's
schedule rules and TVM's `dlight` default schedules.

The rules take their choices from a `Decisions` object. The default schedule (`default_schedule`)
makes each by a heuristic (`heuristic.py`): what a build uses when it is given no schedule. The
tuner's search space applies the same rules with every choice sampled, so a search explores around
the default and can start from it."""

from compiler.schedule_rules.config import UNROLL_STEPS, RuleConfig
from compiler.schedule_rules.decisions import Decision, Decisions
from compiler.schedule_rules.default import default_schedule
from compiler.schedule_rules.heuristic import Heuristic
from compiler.schedule_rules.rule import BlockRule, RuleContext, ScheduleRule, apply_rules, block_names
from compiler.schedule_rules.rules import DEFAULT_RULES

__all__ = [
    "DEFAULT_RULES",
    "UNROLL_STEPS",
    "BlockRule",
    "Decision",
    "Decisions",
    "Heuristic",
    "RuleConfig",
    "RuleContext",
    "ScheduleRule",
    "apply_rules",
    "block_names",
    "default_schedule",
]
