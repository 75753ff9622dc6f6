"""The database's best records applied: the fastest known kernel of a workload (`compile_best`), a
model built from the best record of each of its kernels (`build_model`: the tuner's side of a build,
as MetaSchedule's `compile_relax(database, mod)` beside a `relax.build` that knows no tuner), and
which record counts as a layer's best (`best_record`)."""

from __future__ import annotations

from typing import overload

from compiler import Hardware, PrimFunc, Trace, build, graph, host_hardware
from compiler.build import Kernel
from compiler.graph import CompiledModel, DynamicModel, Module, ShapeFamily
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


@overload
def build_model(
    module: Module, *, database: Database | str = ..., hardware: Hardware | None = ...
) -> CompiledModel: ...


@overload
def build_model(
    module: ShapeFamily, *, database: Database | str = ..., hardware: Hardware | None = ...
) -> DynamicModel: ...


def build_model(
    module: Module | ShapeFamily,
    *,
    database: Database | str = DEFAULT_DATABASE,
    hardware: Hardware | None = None,
) -> CompiledModel | DynamicModel:
    """The model compiled for `hardware` (this machine by default): each kernel with its best record
    in `database` (as a layer inside a forward pass is timed, if it was timed so), the default
    schedule where it has none. A shape family gives a DynamicModel whose sizes each build so on
    their first call: a size `tune_model` tuned runs its records, any other the default schedules."""
    hardware = hardware or host_hardware()
    if isinstance(module, ShapeFamily):
        return DynamicModel(module, lambda m: build_model(m, database=database, hardware=hardware))
    with opened(database) as db:
        return graph.build(
            module,
            target=hardware.target,
            schedules=lambda func: best_program(func, db, hardware, TimingKind.LAYER),
        )


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
