"""Search spaces: a function that applies stochastic primitives to a fresh Schedule.

A space is any `ScheduleFn` (the MLC course's `stochastic_schedule_mm` is one). `rule_space` builds
the default one from the compiler's schedule rules (`compiler.schedule_rules`, in the spirit of
MetaSchedule's PostOrderApply) with every choice sampled (`Sampled`): the same rules the default
schedule applies with heuristic choices, so the search explores around the untuned program.

Structural choices (which variant of a rule) are drawn from the schedule's seeded generator, so the
trace records the resulting instructions; values (tile sizes, unroll, compute location) are sampling
instructions whose decisions the search mutates. A primitive that refuses is skipped: the trace holds
only what succeeded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compiler import Schedule
from compiler.ir import PrimFunc
from compiler.schedule_rules import (
    DEFAULT_RULES,
    Decision,
    RuleConfig,
    RuleContext,
    ScheduleRule,
    apply_rules,
)

ScheduleFn = Callable[[Schedule], None]


class Sampled:
    """Every choice drawn at random from the schedule's generator: the search space."""

    def inline(self, func: PrimFunc, name: str) -> bool:
        return True

    def write_level(self, sch: Schedule) -> int:
        return sch.rng.randrange(3)

    def packed_reads(self, func: PrimFunc, name: str, kinds: list[str]) -> list[int]:
        """No input: a panel's worth depends on tiles that other decisions sample, and a sampled choice
        to pack lost to not packing in the search (paired by seed, bench/results/2026-11-25-a.md).
        Packing reaches the search through the default schedule it starts from."""
        return []

    def vectorize_follower(self) -> bool:
        return False

    def tiles(self, func: PrimFunc, name: str, kinds: list[str]) -> list[Decision]:
        return [None] * len(kinds)

    def outer_order(self, func: PrimFunc, name: str, kinds: list[str]) -> list[int]:
        return list(range(kinds.count("S")))

    def compute_location(self, func: PrimFunc, name: str) -> int | None:
        return None

    def vector_tile(self, extent: int) -> Decision:
        return None

    def winograd_tiles(self, func: PrimFunc, name: str) -> list[Decision]:
        return [None, None, None]

    def intrinsic_tiles(self, func: PrimFunc, name: str) -> list[Decision]:
        return [None, None]

    def parallel_loops(self, extents: list[int], reduction_inside: bool) -> int:
        return len(extents)

    def unroll(self, steps: tuple[int, ...]) -> int | None:
        return None

    def dot_rows(self, rows: int) -> Decision:
        return None

    def rfactor(self, sch: Schedule) -> bool:
        return sch.rng.random() < 0.5


SAMPLED = Sampled()


def rule_space(cfg: RuleConfig, rules: Sequence[ScheduleRule] = DEFAULT_RULES) -> ScheduleFn:
    """The default space generator for CPU: the rules, as one ScheduleFn, for the machine `cfg`
    describes (`RuleConfig.for_target`), every choice sampled."""

    def apply(sch: Schedule) -> None:
        apply_rules(sch, rules, RuleContext(cfg, SAMPLED))

    return apply
