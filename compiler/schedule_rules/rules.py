"""The default list of schedule rules for CPU targets, in the order they apply. Adding a rule is its
module in this package, one entry here, and its test."""

from __future__ import annotations

from compiler.schedule_rules.add_rfactor import AddRFactor
from compiler.schedule_rules.auto_inline import AutoInline
from compiler.schedule_rules.dot_rows import DotRows
from compiler.schedule_rules.multi_level_tiling import MultiLevelTiling
from compiler.schedule_rules.parallel_vectorize import ParallelVectorize
from compiler.schedule_rules.rule import ScheduleRule
from compiler.schedule_rules.tensorize_vnni import TensorizeVNNI
from compiler.schedule_rules.unroll import AutoUnroll
from compiler.schedule_rules.winograd_tiling import WinogradTiling

DEFAULT_RULES: tuple[ScheduleRule, ...] = (
    AutoInline(),
    AddRFactor(),
    DotRows(),
    WinogradTiling(),
    TensorizeVNNI(),
    MultiLevelTiling(),
    ParallelVectorize(),
    AutoUnroll(),
)
