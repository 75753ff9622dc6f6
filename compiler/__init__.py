"""The tensor-program core: compute definitions, the block/loop IR, schedules, traces and LLVM build."""

from compiler import te
from compiler.build import Kernel, build
from compiler.ir import PrimFunc
from compiler.schedule import BlockRV, LoopRV, Schedule, ScheduleError, Trace, TraceError
from compiler.target import Hardware, Target, host_hardware

__all__ = [
    "BlockRV",
    "Hardware",
    "Kernel",
    "LoopRV",
    "PrimFunc",
    "Schedule",
    "ScheduleError",
    "Target",
    "Trace",
    "TraceError",
    "build",
    "host_hardware",
    "te",
]
