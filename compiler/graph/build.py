"""`graph.build`: compile every kernel of a fused module and return the executor.

A kernel is compiled with the schedule the caller gives for it (`schedules`: the tuner's best record,
a hand-written schedule), or else with the default schedule of the compiler's rules. The build knows
nothing of tuning: applying a database's records is the tuner's job (`tuner.build_model`), as TVM's
`relax.build` knows nothing of MetaSchedule."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import overload

from compiler.build import compile_kernel, load
from compiler.graph.dynamic_model import DynamicModel
from compiler.graph.executor import CompiledModel, KernelSource
from compiler.graph.forward import symbol
from compiler.graph.ir import Call, CallTIR, Module
from compiler.graph.memory_plan import views
from compiler.graph.passes import optimize
from compiler.graph.passes.tasks import hand_scheduled
from compiler.graph.shape_family import ShapeFamily
from compiler.ir import PrimFunc
from compiler.schedule_rules import default_schedule
from compiler.target import Target

# Gives a kernel's scheduled form, or None for the default schedule.
ScheduleSource = Callable[[PrimFunc], PrimFunc | None]


@overload
def build(
    module: Module, *, target: Target | None = None, schedules: ScheduleSource | None = None
) -> CompiledModel: ...


@overload
def build(
    module: ShapeFamily, *, target: Target | None = None, schedules: ScheduleSource | None = None
) -> DynamicModel: ...


def build(
    module: Module | ShapeFamily, *, target: Target | None = None, schedules: ScheduleSource | None = None
) -> CompiledModel | DynamicModel:
    """The compiled model, for `target` (this machine by default). A module that still holds operator
    calls is optimized first. `schedules` is asked for each kernel a forward pass runs, as the fused
    module names it; a kernel it gives none for gets the default schedule. A shape family gives one
    callable for all its sizes, each compiled so on its first call (`DynamicModel`)."""
    if isinstance(module, ShapeFamily):
        return DynamicModel(module, lambda m: build(m, target=target, schedules=schedules))
    if any(isinstance(n, Call) for n in module.nodes()):
        module = optimize(module)
    target = target or Target.host()
    kernels = {}
    sources = []
    for name, func in kernel_funcs(module).items():
        start = time.perf_counter()
        given = schedules(func) if schedules is not None else None
        if given is None and hand_scheduled(func):
            given = func
        scheduled = replace(given or default_schedule(func, target).func, name=symbol(name))
        kernels[name] = load(compile_kernel(scheduled, target, pic=True))
        origin = "given" if given is not None else "default"
        sources.append(KernelSource(name, origin, time.perf_counter() - start))
    return CompiledModel(module, kernels, sources, target)


def kernel_funcs(module: Module) -> dict[str, PrimFunc]:
    """The functions a forward pass runs: not those whose every call is a view (a reshape)."""
    aliases = views(module)
    used = {n.func for n in module.nodes() if isinstance(n, CallTIR) and id(n) not in aliases}
    return {name: f for name, f in module.funcs.items() if name in used}
