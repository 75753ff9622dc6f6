"""`graph.build`: compile every kernel of a fused module and return the executor.

A kernel is compiled with the schedule the caller gives for it (`schedules`: the tuner's best record,
a hand-written schedule), or else with the default schedule of the compiler's rules. The build knows
nothing of tuning: applying a database's records is the tuner's job (`tuner.build_model`), as TVM's
`relax.build` knows nothing of MetaSchedule."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import overload

from compiler.buckets import BucketedFunc, default_buckets
from compiler.build import Kernel, compile_kernel, load
from compiler.graph.dynamic_model import DynamicModel, ValueKeyedModel
from compiler.graph.executor import CompiledModel, KernelSource
from compiler.graph.forward import symbol
from compiler.graph.ir import Call, CallTIR, Module
from compiler.graph.memory_plan import views
from compiler.graph.passes import optimize
from compiler.graph.passes.tasks import hand_scheduled
from compiler.graph.range_model import RangeModel
from compiler.graph.shape_family import ShapeFamily
from compiler.graph.symbolic import RangeModules, SymbolicError, range_modules
from compiler.graph.value_family import ValueFamily
from compiler.ir import PrimFunc
from compiler.schedule_rules import default_schedule
from compiler.target import Target

# Gives a kernel's scheduled form (for a symbolic kernel, its programs per bucket of sizes), or None
# for the default schedule.
ScheduleSource = Callable[[PrimFunc], PrimFunc | BucketedFunc | None]


@overload
def build(
    module: Module, *, target: Target | None = None, schedules: ScheduleSource | None = None
) -> CompiledModel: ...


@overload
def build(
    module: ShapeFamily, *, target: Target | None = None, schedules: ScheduleSource | None = None
) -> CompiledModel | DynamicModel: ...


@overload
def build(
    module: ValueFamily, *, target: Target | None = None, schedules: ScheduleSource | None = None
) -> ValueKeyedModel: ...


def build(
    module: Module | ShapeFamily | ValueFamily,
    *,
    target: Target | None = None,
    schedules: ScheduleSource | None = None,
) -> CompiledModel | DynamicModel | ValueKeyedModel:
    """The compiled model, for `target` (this machine by default). A module that still holds operator
    calls is optimized first. `schedules` is asked for each kernel a forward pass runs, as the fused
    module names it; a kernel it gives none for gets the default schedule. A shape family gives one
    model for all its sizes: a module for the range (`compiler.graph.symbolic`) where one describes
    it, with static models at the sizes checked whose graph is another (`RangeModel`), else one
    compiled per size on its first call (`DynamicModel`), with a warning saying why. A value family
    gives one model compiled per value of its inputs that set shapes (`ValueKeyedModel`)."""
    if isinstance(module, ValueFamily):
        return ValueKeyedModel(module, lambda m: build(m, target=target, schedules=schedules))
    if isinstance(module, ShapeFamily):
        try:
            ranged = range_modules(module)
        except SymbolicError as e:
            warnings.warn(f"each size compiles on its first call: {e}", stacklevel=2)
            return DynamicModel(module, lambda m: build(m, target=target, schedules=schedules))
        return build_range(ranged, target=target, schedules=schedules)
    if any(isinstance(n, Call) for n in module.nodes()):
        module = optimize(module)
    target = target or Target.host()
    return CompiledModel(module, *_kernels(module, target, schedules), target)


def build_range(
    ranged: RangeModules, *, target: Target | None = None, schedules: ScheduleSource | None = None
) -> CompiledModel:
    """The model for a range's module, which runs each size of `ranged.apart` on a static model of
    its own (a `RangeModel`); each kernel scheduled as `build` does."""
    target = target or Target.host()
    kernels, sources = _kernels(ranged.module, target, schedules)
    if not ranged.apart:
        return CompiledModel(ranged.module, kernels, sources, target)
    exact = {at: build(m, target=target, schedules=schedules) for at, m in ranged.apart.items()}
    return RangeModel(ranged.module, kernels, sources, target, ranged.family, exact)


def _kernels(
    module: Module, target: Target, schedules: ScheduleSource | None
) -> tuple[dict[str, Kernel], list[KernelSource]]:
    """Each kernel a forward pass of the fused `module` runs, compiled, and where its schedule came
    from."""
    kernels = {}
    sources = []
    for name, func in kernel_funcs(module).items():
        start = time.perf_counter()
        given = schedules(func) if schedules is not None else None
        if given is None and hand_scheduled(func):
            given = func
        kernels[name] = load(compile_kernel(_scheduled(func, given, symbol(name), target), target, pic=True))
        origin = "given" if given is not None else "default"
        sources.append(KernelSource(name, origin, time.perf_counter() - start))
    return kernels, sources


def _scheduled(
    func: PrimFunc, given: PrimFunc | BucketedFunc | None, name: str, target: Target
) -> PrimFunc | BucketedFunc:
    """The kernel's program named `name`: as given, else the default schedule (per bucket of sizes
    for a symbolic function)."""
    if isinstance(given, BucketedFunc):
        return given.renamed(name)
    if given is not None:
        return replace(given, name=name)
    if func.size_vars:
        return default_buckets(replace(func, name=name), target)
    return replace(default_schedule(func, target).func, name=name)


def kernel_funcs(module: Module) -> dict[str, PrimFunc]:
    """The functions a forward pass runs: not those whose every call is a view (a reshape)."""
    aliases = views(module)
    used = {n.func for n in module.nodes() if isinstance(n, CallTIR) and id(n) not in aliases}
    return {name: f for name, f in module.funcs.items() if name in used}
