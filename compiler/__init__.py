"""The tensor-program core: compute definitions, the block/loop IR, schedules, traces and LLVM build."""

from compiler import nd, te, tir
from compiler.build import Kernel, build
from compiler.ir import IRModule, PrimFunc
from compiler.library import Library, cpu
from compiler.schedule import BlockRV, LoopRV, Schedule, ScheduleError, Trace, TraceError
from compiler.target import Hardware, Target, host_hardware

__all__ = [
    "BlockRV",
    "Hardware",
    "IRModule",
    "Kernel",
    "Library",
    "LoopRV",
    "PrimFunc",
    "Schedule",
    "ScheduleError",
    "Target",
    "Trace",
    "TraceError",
    "build",
    "cpu",
    "host_hardware",
    "nd",
    "te",
    "tir",
]
