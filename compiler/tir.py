"""TVM's `tvm.tir` namespace as the MLC course uses it (`tvm.tir.Schedule(MyModule)`): the same
objects as `compiler`'s own names."""

from compiler.ir import IRModule, PrimFunc
from compiler.schedule import BlockRV, LoopRV, Schedule, ScheduleError

__all__ = ["BlockRV", "IRModule", "LoopRV", "PrimFunc", "Schedule", "ScheduleError"]
