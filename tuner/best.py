"""The database's best records applied: the fastest known kernel of a workload (`compile_best`), a
model built from the best record of each of its kernels (`build_model`: the tuner's side of a build,
as MetaSchedule's `compile_relax(database, mod)` beside a `relax.build` that knows no tuner), and
which record counts as a layer's best (`best_record`)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import overload

from compiler import Hardware, PrimFunc, Trace, build, graph, host_hardware
from compiler.buckets import BucketedFunc, default_buckets
from compiler.build import Kernel
from compiler.graph import (
    CallTIR,
    CompiledModel,
    DynamicModel,
    Module,
    ShapeFamily,
    ValueFamily,
    ValueKeyedModel,
)
from compiler.graph.shape_family import binding
from compiler.graph.symbolic import (
    RANGE_PASSES,
    RangeModules,
    SymbolicError,
    dimension_of,
    range_modules,
)
from runner import TimingKind
from tuner.database import Database, Record
from tuner.tune import DEFAULT_DATABASE, WorkloadLike, as_workload, opened


def compile_best(
    workload: WorkloadLike,
    *,
    database: Database | str = DEFAULT_DATABASE,
    hardware: Hardware | None = None,
) -> Kernel:
    """The fastest known schedule of `workload` on `hardware` (this machine by default), built for it."""
    wl = as_workload(workload)
    hardware = hardware or host_hardware()
    with opened(database) as db:
        program = best_program(wl.func, db, hardware, TimingKind.WARM)
    if program is None:
        raise LookupError(f"no measured schedule of {wl.name} on this hardware; tune it first")
    return build(program, hardware.target, listings=False)


# How many sizes spread over a family's ranges it is tuned at, unless told.
TUNED_SIZES = 4


@overload
def build_model(
    module: Module,
    *,
    database: Database | str = ...,
    hardware: Hardware | None = ...,
    sizes: Sequence[Mapping[str, int]] | None = ...,
) -> CompiledModel: ...


@overload
def build_model(
    module: ShapeFamily,
    *,
    database: Database | str = ...,
    hardware: Hardware | None = ...,
    sizes: Sequence[Mapping[str, int]] | None = ...,
) -> CompiledModel | DynamicModel: ...


@overload
def build_model(
    module: ValueFamily,
    *,
    database: Database | str = ...,
    hardware: Hardware | None = ...,
    sizes: Sequence[Mapping[str, int]] | None = ...,
) -> ValueKeyedModel: ...


def build_model(
    module: Module | ShapeFamily | ValueFamily,
    *,
    database: Database | str = DEFAULT_DATABASE,
    hardware: Hardware | None = None,
    sizes: Sequence[Mapping[str, int]] | None = None,
) -> CompiledModel | DynamicModel | ValueKeyedModel:
    """The model compiled for `hardware` (this machine by default): each kernel with its best record
    in `database` (as a layer inside a forward pass is timed, if it was timed so), the default
    schedule where it has none.

    A shape family one module describes (`compiler.graph.symbolic`) gives one model for its range:
    each kernel's best traces at the tuned `sizes` (by default TUNED_SIZES spread over the range, as
    `tune_model` tunes it) replayed over the range, each the schedule of the bucket of sizes ending
    at it (`compiler.buckets.default_buckets`). Any other family gives a DynamicModel whose sizes
    each build so on their first call (a tuned size runs its records, any other the default ones),
    with a warning saying why. A value family gives a model built so at each value of its inputs
    that set shapes, on its first call."""
    hardware = hardware or host_hardware()
    if isinstance(module, ValueFamily):
        return ValueKeyedModel(module, lambda m: build_model(m, database=database, hardware=hardware))
    if isinstance(module, ShapeFamily):
        tuned = sizes or module.spread(TUNED_SIZES)
        try:
            ranged = range_modules(module, tuned)
        except SymbolicError as e:
            warnings.warn(f"each size compiles on its first call: {e}", stacklevel=2)
            return DynamicModel(module, lambda m: build_model(m, database=database, hardware=hardware))
        return build_range_model(ranged, database=database, hardware=hardware, sizes=tuned)
    with opened(database) as db:
        return graph.build(
            module,
            target=hardware.target,
            schedules=lambda func: best_program(func, db, hardware, TimingKind.LAYER),
        )


def build_range_model(
    ranged: RangeModules,
    *,
    database: Database | str = DEFAULT_DATABASE,
    hardware: Hardware | None = None,
    sizes: Sequence[Mapping[str, int]] | None = None,
) -> CompiledModel:
    """The one model for a family's ranges, from its module for the range (`range_modules`): each
    symbolic kernel's best traces at the tuned `sizes` (by default as `tune_model` tunes) the
    schedules of the buckets ending at those sizes, each static kernel its best record. A tuned
    size whose graph is another than the range's (`RangeModules.apart`) runs its own static model
    with its best records, as a static build at that size does; an untuned one runs the range's,
    whose tuned buckets beat the default schedules."""
    hardware = hardware or host_hardware()
    family = ranged.family
    sizes = sizes or family.spread(TUNED_SIZES)
    tuned_at = {binding(s) for s in sizes}
    ranged = replace(ranged, apart={at: m for at, m in ranged.apart.items() if at in tuned_at})
    with opened(database) as db:
        tuned = _tuned_traces(family, ranged.module, sizes, db, hardware)
        return graph.build_range(
            ranged,
            target=hardware.target,
            schedules=lambda func: _range_program(func, tuned, db, hardware),
        )


def _tuned_traces(
    family: ShapeFamily,
    symbolic: Module,
    sizes: Sequence[Mapping[str, int]],
    db: Database,
    hardware: Hardware,
) -> dict[str, dict[int, Trace]]:
    """For each symbolic kernel, the best trace of the kernel its node calls at each tuned size, by
    the size of the dimension its buckets choose by (its first size var's)."""
    bucketed_by = {
        node.func: dimension_of(symbolic.funcs[node.func].size_vars[0], family.dims)
        for node in symbolic.nodes()
        if isinstance(node, CallTIR) and symbolic.funcs[node.func].size_vars
    }
    out: dict[str, dict[int, Trace]] = {}
    for size in sizes:
        static = graph.optimize(family.specialize(size), passes=RANGE_PASSES)
        at_size = {n.name: static.funcs[n.func] for n in static.nodes() if isinstance(n, CallTIR)}
        for node in symbolic.nodes():
            dim = bucketed_by.get(node.func) if isinstance(node, CallTIR) else None
            func = at_size.get(node.name) if dim is not None else None
            best = best_record(db, func.structural_hash(), hardware.key, TimingKind.LAYER) if func else None
            if isinstance(node, CallTIR) and dim is not None and best is not None:
                out.setdefault(node.func, {})[size[dim]] = Trace.from_json(best.trace)
    return out


def _range_program(
    func: PrimFunc, tuned: Mapping[str, Mapping[int, Trace]], db: Database, hardware: Hardware
) -> PrimFunc | BucketedFunc | None:
    """A symbolic kernel's buckets with its tuned traces, a static one's best program."""
    if not func.size_vars:
        return best_program(func, db, hardware, TimingKind.LAYER)
    traces = tuned.get(func.name)
    return default_buckets(func, hardware.target, traces) if traces else None


def best_program(
    func: PrimFunc, db: Database, hardware: Hardware, timing_kind: TimingKind
) -> PrimFunc | None:
    """The function with its best measured schedule on `hardware` applied (None if it has none), as
    `best_record` finds it."""
    best = best_record(db, func.structural_hash(), hardware.key, timing_kind)
    return Trace.from_json(best.trace).apply(func).func if best is not None else None


def best_record(
    db: Database, workload_hash: str, hardware_key: str, timing_kind: TimingKind
) -> Record | None:
    """The best record timed as `timing_kind`; without one, the best timed another way: a model's
    layer tuned only as a kernel runs its tuned schedule rather than the untuned default."""
    for kind in [timing_kind, *(k for k in TimingKind if k != timing_kind)]:
        best = db.best(workload_hash, hardware_key, timing_kind=kind)
        if best is not None:
            return best
    return None
