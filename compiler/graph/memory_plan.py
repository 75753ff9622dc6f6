"""Memory planning for the executor: intermediates share storage where their lifetimes allow.

Kernels run in dataflow order. Before a step runs, its output takes a free storage (the smallest
one big enough, else the largest free one grown to fit, else a new one); after it runs, the storage
of every tensor it read for the last time is free again. Taking before freeing means a kernel never
writes over its own inputs. Model outputs get storage of their own (they are handed back)."""

from __future__ import annotations

from dataclasses import dataclass

from compiler.graph.ir import CallTIR, Module


@dataclass(frozen=True)
class MemoryPlan:
    storage_of: dict[str, int]  # intermediate tensor name -> storage index
    storage_bytes: tuple[int, ...]
    total_bytes: int  # every intermediate tensor's bytes, had each its own buffer

    @property
    def peak_bytes(self) -> int:
        return sum(self.storage_bytes)


def plan_memory(module: Module, alignment: int = 64) -> MemoryPlan:
    steps = [n for n in module.nodes() if isinstance(n, CallTIR)]
    outputs = {id(o) for o in module.outputs}
    last_use = {id(a): k for k, n in enumerate(steps) for a in n.args}
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
        for a in node.args:
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
