"""Task extraction: the distinct fused PrimFuncs of a module (by structural hash), each with how many
times one forward pass runs it. These are what the tuner tunes; a layer that two models share is
the same task, so its records serve both."""

from __future__ import annotations

from dataclasses import dataclass

from compiler.graph.ir import CallTIR, GraphError, Module
from compiler.ir import PrimFunc


@dataclass(frozen=True)
class Task:
    name: str
    func: PrimFunc
    weight: int  # calls per forward pass
    flops: int  # of one call
    ops: tuple[str, ...]

    @property
    def workload_hash(self) -> str:
        return self.func.structural_hash()

    @property
    def shape(self) -> str:
        """The output shape and the first argument's, for the task table."""
        out = self.func.params[-1]
        return f"{'x'.join(map(str, self.func.params[0].shape))} -> {'x'.join(map(str, out.shape))}"


def extract_tasks(module: Module) -> list[Task]:
    """One task per distinct PrimFunc the module calls, in order of first call; fuse first."""
    calls = [n for n in module.nodes() if isinstance(n, CallTIR)]
    if len(calls) != len(module.calls()):
        first = next(n for n in module.calls() if not isinstance(n, CallTIR))
        raise GraphError(
            first.name, "extract_tasks", "the module has unfused operator calls: run graph.optimize first"
        )
    tasks: dict[str, Task] = {}
    for call in calls:
        func = module.funcs[call.func]
        digest = func.structural_hash()
        if digest in tasks:
            t = tasks[digest]
            tasks[digest] = Task(t.name, t.func, t.weight + 1, t.flops, t.ops)
        else:
            tasks[digest] = Task(call.func, func, 1, call.flops, call.ops)
    return list(tasks.values())
