"""Task extraction: the distinct fused PrimFuncs of a module (by structural hash), each with how many
times one forward pass runs it. These are what the tuner tunes; a layer that two models share is
the same task, so its records serve both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compiler.graph.ir import CallTIR, GraphError, Module
from compiler.graph.memory_plan import views
from compiler.ir import TRUE, Block, For, PrimFunc, SeqStmt
from compiler.workloads.primfunc_spec import primfunc_spec


@dataclass(frozen=True)
class ExtractedTask:
    """A kernel to tune, as extracted from a module (TVM's name for it): the fused function, its calls
    per forward pass, its flops and the graph operators fused into it."""

    name: str
    func: PrimFunc
    weight: int  # calls per forward pass
    flops: int  # of one call
    ops: tuple[str, ...]

    @property
    def workload_hash(self) -> str:
        return self.func.structural_hash()

    @property
    def spec(self) -> dict[str, Any]:
        """The workload spec the tuner and the workers take: the PrimFunc as data."""
        return primfunc_spec(self.func, len(self.func.params) - 1)

    @property
    def shape(self) -> str:
        """The output shape and the first argument's, for the task table."""
        out = self.func.params[-1]
        return f"{'x'.join(map(str, self.func.params[0].shape))} -> {'x'.join(map(str, out.shape))}"


def extract_tasks(module: Module) -> list[ExtractedTask]:
    """One task per distinct PrimFunc the module runs, in order of first call; fuse first. Calls
    that only reshape run no kernel (the executor makes them views), so they are no task, and nor is
    a function that comes scheduled (`hand_scheduled`): it is compiled as it is."""
    aliases = views(module)
    calls = [n for n in module.nodes() if isinstance(n, CallTIR) and id(n) not in aliases]
    unfused = [n for n in module.calls() if not isinstance(n, CallTIR)]
    if unfused:
        first = unfused[0]
        raise GraphError(
            first.name, "extract_tasks", "the module has unfused operator calls: run graph.optimize first"
        )
    tasks: dict[str, ExtractedTask] = {}
    for call in calls:
        func = module.funcs[call.func]
        if hand_scheduled(func):
            continue
        digest = func.structural_hash()
        if digest in tasks:
            t = tasks[digest]
            tasks[digest] = ExtractedTask(t.name, t.func, t.weight + 1, t.flops, t.ops)
        else:
            tasks[digest] = ExtractedTask(call.func, func, 1, call.flops, call.ops)
    return list(tasks.values())


def hand_scheduled(func: PrimFunc) -> bool:
    """Whether `func` comes scheduled (a Schedule's output given to `GraphBuilder.call_tir`), so it is
    compiled as it is: anything but te.create_prim_func's form, which every fused kernel has until it
    is scheduled (each block alone in a nest of plain serial loops bound one to one, no attributes)."""
    if func.attrs:
        return True
    nests = func.body.stmts if isinstance(func.body, SeqStmt) else (func.body,)
    for nest in nests:
        loops = []
        while isinstance(nest, For):
            if nest.kind != "serial" or nest.annotations:
                return True
            loops.append(nest.var)
            nest = nest.body
        if not isinstance(nest, Block) or nest.bindings != tuple(loops) or not bool(nest.predicate == TRUE):
            return True
    return False
