"""Schedules: primitives that transform a PrimFunc, recorded in replayable traces."""

from compiler.schedule.errors import ScheduleError
from compiler.schedule.schedule import BlockRV, IntRV, LoopRV, Schedule
from compiler.schedule.trace import Instruction, Trace, TraceError

__all__ = ["BlockRV", "Instruction", "IntRV", "LoopRV", "Schedule", "ScheduleError", "Trace", "TraceError"]
