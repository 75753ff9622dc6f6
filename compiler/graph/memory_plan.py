"""Memory planning for the executor: intermediates share storage where their lifetimes allow.

Kernels and extern calls (the steps: every `DPSCall`) run in dataflow order. Before a step runs,
its output takes a free storage (the smallest one big enough, else the largest free one grown to
fit, else a new one); after it runs, the storage of every tensor it read for the last time is free
again. Taking before freeing means a step never writes over its own inputs. Model outputs get
storage of their own (they are handed back).

A call that only reshapes moves no data in a contiguous buffer, so the executor runs no kernel for
it: it is a view of its argument (`views`), and reading the view keeps the argument's storage alive."""

from __future__ import annotations

from dataclasses import dataclass

from compiler.graph.ir import CallTIR, DPSCall, Module, Node


@dataclass(frozen=True)
class MemoryPlan:
    storage_of: dict[str, int]  # intermediate tensor name -> storage index
    storage_bytes: tuple[int, ...]
    total_bytes: int  # every intermediate tensor's bytes, had each its own buffer

    @property
    def peak_bytes(self) -> int:
        return sum(self.storage_bytes)


def views(module: Module) -> dict[int, Node]:
    """The CallTIRs that only reshape (and are not a model output), each to the tensor it views (a
    chain of them views the first one's argument)."""
    outputs = {id(o) for o in module.outputs}
    out: dict[int, Node] = {}
    for node in module.nodes():
        if isinstance(node, CallTIR) and set(node.ops) == {"reshape"} and id(node) not in outputs:
            source = node.args[0]
            out[id(node)] = out.get(id(source), source)
    return out


def plan_memory(module: Module, alignment: int = 64) -> MemoryPlan:
    aliases = views(module)
    steps = [n for n in module.nodes() if isinstance(n, DPSCall) and id(n) not in aliases]
    outputs = {id(o) for o in module.outputs}
    last_use = {id(aliases.get(id(a), a)): k for k, n in enumerate(steps) for a in n.args}
    sizes: list[int] = []
    free: list[int] = []
    storage_of: dict[str, int] = {}
    held: dict[int, int] = {}  # id(node) -> storage, while the tensor is live
    total = 0
    for k, node in enumerate(steps):
        if id(node) not in outputs:
            need = -(-node.type.nbytes // alignment) * alignment
            total += node.type.nbytes
            storage = _take(free, sizes, need)
            storage_of[node.name] = storage
            held[id(node)] = storage
            if id(node) not in last_use:  # computed and never read: free at once
                free.append(held.pop(id(node)))
        for arg in node.args:
            a = aliases.get(id(arg), arg)
            if last_use.get(id(a)) == k and id(a) in held:
                free.append(held.pop(id(a)))
    return MemoryPlan(storage_of, tuple(sizes), total)


def _take(free: list[int], sizes: list[int], need: int) -> int:
    fitting = [s for s in free if sizes[s] >= need]
    if fitting:
        choice = min(fitting, key=lambda s: sizes[s])
    elif free:
        choice = max(free, key=lambda s: sizes[s])
        sizes[choice] = need
    else:
        sizes.append(need)
        return len(sizes) - 1
    free.remove(choice)
    return choice
