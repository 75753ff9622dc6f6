"""`graph.build`: compile every kernel of a fused module with the best schedule the tuning database
knows for this machine, or else the default schedule of the tuner's rules, and return the executor.

The database and the default schedule belong to the tuner; they are imported when build runs, so
that the compiler package keeps working on its own."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from compiler.build import compile_kernel, load
from compiler.graph.executor import CompiledModel, KernelSource
from compiler.graph.forward import symbol
from compiler.graph.ir import Call, CallTIR, Module
from compiler.graph.memory_plan import views
from compiler.graph.passes import optimize
from compiler.ir import PrimFunc
from compiler.target import Target

if TYPE_CHECKING:
    from runner.hardware import Hardware
    from tuner.database import Database


def build(
    module: Module, *, database: Database | str | None = None, hardware: Hardware | None = None
) -> CompiledModel:
    """The compiled model. A module that still holds operator calls is optimized first. `hardware`
    (this machine by default) selects the database's records and the code's target."""
    from runner.hardware import host_hardware

    if any(isinstance(n, Call) for n in module.nodes()):
        module = optimize(module)
    hardware = hardware or host_hardware()
    tuned = _tuned_funcs(module, database, hardware) if database is not None else {}
    kernels = {}
    sources = []
    for name, func in _run_funcs(module).items():
        start = time.perf_counter()
        scheduled = replace(tuned.get(name) or _default(func, hardware.target), name=symbol(name))
        kernels[name] = load(compile_kernel(scheduled, hardware.target, pic=True))
        origin = "tuned" if name in tuned else "default"
        sources.append(KernelSource(name, origin, time.perf_counter() - start))
    return CompiledModel(module, kernels, sources, hardware.target)


def _run_funcs(module: Module) -> dict[str, PrimFunc]:
    """The functions a forward pass runs: not those whose every call is a view (a reshape)."""
    aliases = views(module)
    used = {n.func for n in module.nodes() if isinstance(n, CallTIR) and id(n) not in aliases}
    return {name: f for name, f in module.funcs.items() if name in used}


def _default(func: PrimFunc, target: Target) -> PrimFunc:
    from tuner.search.default_schedule import default_schedule

    return default_schedule(func, target).func


def _tuned_funcs(module: Module, database: Database | str, hardware: Hardware) -> dict[str, PrimFunc]:
    """Each function's best measured schedule on `hardware`, applied (functions without one are absent):
    best as a layer inside a forward pass is timed, if it was timed so."""
    from runner import TimingKind
    from tuner.database import Database
    from tuner.tune import best_programs, open_database

    db = database if isinstance(database, Database) else open_database(database)
    try:
        funcs = _run_funcs(module)
        programs = best_programs(list(funcs.values()), db, hardware, TimingKind.LAYER)
        return {name: p for name, p in zip(funcs, programs) if p is not None}
    finally:
        if not isinstance(database, Database):
            db.close()
