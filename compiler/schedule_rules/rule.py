"""A schedule rule and how a list of them is applied, in the spirit of MetaSchedule's schedule rules
and PostOrderApply: each rule in turn, each block-level rule over the blocks consumers first,
skipping the blocks an earlier rule has placed.

Rules make their choices through a `Decisions` object (sampled: the tuner's space; heuristic: the
default schedule), so one list of rules serves both. A rule whose primitive refuses on a block skips
that step (`attempt`); a rule that cannot schedule at all raises ScheduleError."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ParamSpec

from compiler.schedule import Schedule, ScheduleError
from compiler.schedule_rules.config import RuleConfig
from compiler.schedule_rules.decisions import Decisions

P = ParamSpec("P")


@dataclass
class RuleContext:
    """What the rules of one application share: the machine's bounds, who decides, the blocks already
    placed (later rules leave them alone), and the auto-unroll budgets left to choose from (a rule may
    narrow them: the Winograd rule's transforms compile too slowly unrolled deep)."""

    cfg: RuleConfig
    decide: Decisions
    placed: set[str] = field(default_factory=set)
    unroll_steps: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        self.unroll_steps = self.unroll_steps or self.cfg.unroll_steps


class ScheduleRule(ABC):
    """One way of scheduling a function, applied to the whole function."""

    @abstractmethod
    def apply(self, sch: Schedule, ctx: RuleContext) -> None:
        """Schedule what the rule recognises in `sch`, recording the blocks it placed in `ctx`."""


class BlockRule(ScheduleRule):
    """A rule applied to each block no earlier rule placed, consumers first. The blocks are listed
    when the rule starts: the blocks a rule creates (a cache, an init) are the rule's to place."""

    def apply(self, sch: Schedule, ctx: RuleContext) -> None:
        for name in reversed(block_names(sch)):
            if name not in ctx.placed:
                self.apply_to(sch, name, ctx)

    @abstractmethod
    def apply_to(self, sch: Schedule, name: str, ctx: RuleContext) -> None:
        """The rule on the block `name`, if it recognises it."""


def apply_rules(sch: Schedule, rules: Sequence[ScheduleRule], ctx: RuleContext) -> None:
    """The rules, in order, with the choices `ctx.decide` makes."""
    for rule in rules:
        rule.apply(sch, ctx)


def block_names(sch: Schedule) -> list[str]:
    return [b.name for b in sch.get_child_blocks(sch.get_block("root"))]


def attempt(primitive: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> bool:
    """Apply a primitive (a bound Schedule method) if it is legal here; a refusing primitive leaves the
    schedule unchanged."""
    try:
        primitive(*args, **kwargs)
    except ScheduleError:
        return False
    return True
