"""Schedules: primitives that transform a PrimFunc, recorded in replayable traces."""

from compiler.schedule.errors import ScheduleError, TraceError
from compiler.schedule.instruction import Instruction, InstructionKind
from compiler.schedule.rv import BlockRV, IntRV, LoopRV
from compiler.schedule.schedule import Schedule
from compiler.schedule.trace import Trace

__all__ = [
    "BlockRV",
    "Instruction",
    "InstructionKind",
    "IntRV",
    "LoopRV",
    "Schedule",
    "ScheduleError",
    "Trace",
    "TraceError",
]
