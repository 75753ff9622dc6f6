"""The executor: a fused module's kernels compiled, its memory planned, its weights bound, and a
forward pass that is one native call into code calling every kernel (and extern function) in order.

The JIT binds each extern call to its function's address under an alias of its own (`import_symbol`):
a native function's, looked up in its library, or a Python function's ctypes callback, made for the
call site. Binding addresses rather than loading libraries into the process's namespace keeps two
libraries that define the same symbol apart."""

from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np

from compiler.build import Kernel
from compiler.graph.extern import NativeFunc, PythonCallback, PythonFunc, resolve
from compiler.graph.forward import (
    ALIGNMENT,
    FORWARD,
    ExternCall,
    ForwardPlan,
    KernelCall,
    Storage,
    TensorRef,
    emit_forward,
    evaluate,
    plan_forward,
)
from compiler.graph.ir import Module
from compiler.graph.memory_plan import MemoryPlan, plan_memory
from compiler.graph.native_call import ExternSite, NativeForward, model_sizes, model_specs
from compiler.runtime import huge_page_bytes, in_huge_pages, load_runtime
from compiler.target import Target, init_llvm


@dataclass(frozen=True)
class Step:
    node: str
    func: str
    kernel: Kernel
    args: tuple[TensorRef, ...]


@dataclass(frozen=True)
class KernelSource:
    """Where a kernel's schedule came from: "given" (by the build's caller: a tuned record, a
    hand-written schedule) or "default" (the compiler's default schedule)."""

    func: str
    origin: str
    compile_secs: float


class CompiledModel:
    """Call with numpy arrays in the model's input order; returns the outputs as new numpy arrays.

    A forward pass is one native call (`compiler.graph.forward`): kernels take their arguments from
    the caller's arrays, the weights and one arena of intermediates. Not reentrant: the arena is
    shared, so one call at a time per model. Its extern functions are looked up when it is made."""

    def __init__(
        self,
        module: Module,
        kernels: Mapping[str, Kernel],
        sources: Sequence[KernelSource],
        target: Target,
    ) -> None:
        self.module = module
        self.target = target
        self.sources = list(sources)
        self.kernels = dict(kernels)
        self.plan = plan_memory(module)
        self.forward_plan = plan_forward(module)
        self.steps = [
            Step(c.node, c.func, kernels[c.func], c.args)
            for c in self.forward_plan.calls
            if isinstance(c, KernelCall)
        ]
        self.externs = [_extern_entry(c) for c in self.forward_plan.externs]
        self._constants = in_huge_pages([c.data for c in self.forward_plan.constants], ALIGNMENT)
        self._constant_pointers = (ctypes.c_void_p * max(1, len(self._constants)))(
            *(c.ctypes.data for c in self._constants)
        )
        self._arena = huge_page_bytes(self.forward_plan.arena_bytes)
        addresses = [e.address for e in self.externs]
        self._library, forward = _link_forward(self.forward_plan, self.kernels, addresses, target)
        arena = self._arena.ctypes.data
        self._forward = NativeForward(
            *model_specs(module),
            lambda ins, outs, sizes: forward(ins, outs, self._constant_pointers, arena, sizes),
            model_sizes(module),
            [ExternSite(c.func, c.node) for c in self.forward_plan.externs],
            lambda k: e.take_error() if isinstance(e := self.externs[k], PythonCallback) else None,
        )

    @property
    def peak_bytes(self) -> int:
        """Bytes of intermediate storage after planning (inputs, outputs and weights not counted)."""
        return self.plan.peak_bytes

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        return self._forward(*inputs)

    def export(self, path: str | Path, *, cc: str = "cc") -> tuple[Path, Path]:
        """Write the model as one shared library at `path` and its C header beside it (same stem,
        `.h`); returns both paths. See `compiler.graph.export`."""
        from compiler.graph.export import export_library

        return export_library(self, Path(path), cc=cc)

    def profile(
        self, *inputs: np.ndarray, repeat: int = 5, min_secs: float = 0.02, in_pass: bool = False
    ) -> list[tuple[Step, float]]:
        """Each kernel's median seconds per call, after one full pass so that every intermediate holds
        real data. By default each step runs alone in a native loop of enough calls to last
        `min_secs`: its warm-cache time. With `in_pass`, the steps run in order, each timed once per
        pass, over `repeat` passes: each kernel finds the caches as the forward pass leaves them
        (its weights in memory, its input just written), which is where a model's time goes."""
        arrays = self._forward.check_inputs(inputs)
        sizes = self._forward.bind(arrays)
        outputs = [np.empty(o.at(sizes), o.dtype) for o in self._forward.outputs]
        self._forward.run_into(arrays, outputs, sizes)
        bases = {
            Storage.INPUT: [a.ctypes.data for a in arrays],
            Storage.OUTPUT: [a.ctypes.data for a in outputs],
            Storage.CONSTANT: [c.ctypes.data for c in self._constants],
        }
        pointers = [
            [_address(bases, self._arena.ctypes.data, a, sizes) for a in s.args]
            + [sizes[v.name] for v in s.kernel.func.size_vars]
            for s in self.steps
        ]
        if in_pass:
            passes = [[_timed(s.kernel, p, 1) for s, p in zip(self.steps, pointers)] for _ in range(repeat)]
            times = [list(t) for t in zip(*passes)]
        else:
            times = []
            for step, p in zip(self.steps, pointers):
                number = _calls_for(step.kernel, p, min_secs)
                times.append([_timed(step.kernel, p, number) for _ in range(repeat)])
        return [(step, statistics.median(t)) for step, t in zip(self.steps, times)]


def _address(bases: Mapping[Storage, list[int]], arena: int, arg: TensorRef, sizes: Mapping[str, int]) -> int:
    if arg.base is Storage.ARENA:
        return arena + evaluate(arg.index, sizes)
    assert isinstance(arg.index, int)
    return bases[arg.base][arg.index]


def _extern_entry(call: ExternCall) -> NativeFunc | PythonCallback:
    """What extern call `call` jumps to: the native function, or a callback made for its types."""
    func = resolve(call.func, call.node)
    return PythonCallback(func, call.types) if isinstance(func, PythonFunc) else func


def _link_forward(
    plan: ForwardPlan, kernels: Mapping[str, Kernel], externs: list[int], target: Target
) -> tuple[object, Callable[..., int]]:
    """The kernels' objects and the forward pass linked into one JIT library, and its entry; extern
    call k calls the address `externs[k]`."""
    init_llvm()
    load_runtime()
    aliases = [f"{FORWARD}_extern{k}" for k in range(len(externs))]  # no kernel symbol (`symbol`)
    forward = emit_forward(plan, {name: k.func for name, k in kernels.items()}, aliases)
    forward.triple = target.triple
    jit = llvm.create_lljit_compiler(target.target_machine())
    builder = llvm.JITLibraryBuilder()
    for kernel in kernels.values():
        builder.add_object_img(kernel.compiled.obj)
    for alias, address in zip(aliases, externs):
        builder.import_symbol(alias, address)
    library = (
        builder.add_ir(str(forward))
        .add_current_process()
        .export_symbol(FORWARD)
        .link(jit, f"{FORWARD}_{id(plan)}")
    )
    proto = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_void_p] * 5)
    return (jit, library), proto(library[FORWARD])


def _timed(kernel: Kernel, pointers: list[int], number: int) -> float:
    start = time.perf_counter()
    kernel.repeat(pointers, number)
    return (time.perf_counter() - start) / number


def _calls_for(kernel: Kernel, pointers: list[int], min_secs: float) -> int:
    start = time.perf_counter()
    kernel.repeat(pointers, 1)
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, int(min_secs / once))


__all__ = ["CompiledModel", "KernelSource", "MemoryPlan", "Step"]
