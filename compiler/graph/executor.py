"""The executor: a fused module's kernels compiled, its memory planned, its weights bound, and a
forward pass that is one native call per kernel with argument addresses fixed at build time."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from compiler.build import Kernel
from compiler.graph.ir import CallTIR, Constant, GraphError, Input, Module, Node
from compiler.graph.memory_plan import MemoryPlan, plan_memory, views


@dataclass(frozen=True)
class Step:
    node: str
    func: str
    kernel: Kernel
    pointers: tuple[int, ...]


@dataclass(frozen=True)
class KernelSource:
    """Where a kernel's schedule came from: "tuned" (the database's best record) or "default"."""

    func: str
    origin: str
    compile_secs: float


class CompiledModel:
    """Call with numpy arrays in the model's input order; returns the outputs as new numpy arrays."""

    def __init__(
        self, module: Module, kernels: Mapping[str, Kernel], sources: Sequence[KernelSource]
    ) -> None:
        self.module = module
        self.sources = list(sources)
        self.plan = plan_memory(module)
        storages = [np.empty(n, dtype=np.uint8) for n in self.plan.storage_bytes]
        self._inputs = [np.empty(i.type.shape, i.type.dtype) for i in module.inputs]
        arrays: dict[int, np.ndarray] = {id(i): a for i, a in zip(module.inputs, self._inputs)}
        self._outputs: list[np.ndarray] = []
        for out in module.outputs:
            if id(out) not in arrays:
                arrays[id(out)] = _constant_or_empty(out)
            self._outputs.append(arrays[id(out)])
        self.steps: list[Step] = []
        aliases = views(module)
        for node in module.nodes():
            if isinstance(node, Constant):
                arrays.setdefault(id(node), node.data)
            elif id(node) in aliases:
                arrays[id(node)] = arrays[id(node.args[0])].reshape(node.type.shape)
            elif isinstance(node, CallTIR):
                if id(node) not in arrays:
                    arrays[id(node)] = _view(storages[self.plan.storage_of[node.name]], node)
                buffers = [arrays[id(a)] for a in node.args] + [arrays[id(node)]]
                kernel = kernels[node.func]
                self.steps.append(Step(node.name, node.func, kernel, tuple(kernel.pointers(*buffers))))
            elif not isinstance(node, Input):
                raise GraphError(
                    node.name, type(node).__name__, "build needs a fused module (graph.optimize)"
                )
        self._storages = storages  # the views above point into these
        self._calls: list[tuple[Callable[..., None], tuple[int, ...]]] = [
            (s.kernel.native, s.pointers) for s in self.steps
        ]

    @property
    def peak_bytes(self) -> int:
        """Bytes of intermediate storage after planning (inputs, outputs and weights not counted)."""
        return self.plan.peak_bytes

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        self._load_inputs(inputs)
        for fn, pointers in self._calls:
            fn(*pointers)
        return [o.copy() for o in self._outputs]

    def _load_inputs(self, inputs: Sequence[np.ndarray]) -> None:
        if len(inputs) != len(self._inputs):
            raise TypeError(f"the model takes {len(self._inputs)} inputs, got {len(inputs)}")
        for node, dest, value in zip(self.module.inputs, self._inputs, inputs):
            array = np.asarray(value)
            if array.shape != dest.shape:
                raise ValueError(f"input {node.name}: expected shape {dest.shape}, got {array.shape}")
            np.copyto(dest, array, casting="same_kind")

    def profile(
        self, *inputs: np.ndarray, repeat: int = 5, min_secs: float = 0.02
    ) -> list[tuple[Step, float]]:
        """Each step's median seconds per call (each step run in a native loop of enough calls to
        last `min_secs`), after one full pass so that every intermediate holds real data."""
        self(*inputs)
        out = []
        for step in self.steps:
            number = _calls_for(step, min_secs)
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                step.kernel.repeat(list(step.pointers), number)
                times.append((time.perf_counter() - start) / number)
            out.append((step, statistics.median(times)))
        return out


def _calls_for(step: Step, min_secs: float) -> int:
    start = time.perf_counter()
    step.kernel.repeat(list(step.pointers), 1)
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, int(min_secs / once))


def _constant_or_empty(node: Node) -> np.ndarray:
    if isinstance(node, Constant):
        return node.data
    return np.empty(node.type.shape, node.type.dtype)


def _view(storage: np.ndarray, node: Node) -> np.ndarray:
    return storage[: node.type.nbytes].view(node.type.dtype).reshape(node.type.shape)


__all__ = ["CompiledModel", "KernelSource", "MemoryPlan", "Step"]
