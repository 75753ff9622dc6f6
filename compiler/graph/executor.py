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
from functools import partial
from pathlib import Path

import llvmlite.binding as llvm
import llvmlite.ir as ll
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
from compiler.graph.native_call import ExternSite, NativeForward, TensorSpec, model_sizes, model_specs
from compiler.ir import Buffer
from compiler.llvm_ops import I8P, I32, I64
from compiler.numpy_entry import emit_array_entry, entry_context, layout_ok
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


FORWARD_NUMPY = f"{FORWARD}_numpy"


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
        arena = self._arena.ctypes.data
        inputs, outputs = model_specs(module)
        bound = (ctypes.addressof(self._constant_pointers), arena)
        self._library, forward, entry = _link_forward(
            self.forward_plan, self.kernels, addresses, target, (inputs, outputs), bound
        )
        self._forward = NativeForward(
            inputs,
            outputs,
            lambda ins, outs, sizes: forward(ins, outs, self._constant_pointers, arena, sizes),
            model_sizes(module),
            [ExternSite(c.func, c.node) for c in self.forward_plan.externs],
            lambda k: e.take_error() if isinstance(e := self.externs[k], PythonCallback) else None,
            entry,
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
    plan: ForwardPlan,
    kernels: Mapping[str, Kernel],
    externs: list[int],
    target: Target,
    arrays: tuple[Sequence[TensorSpec], Sequence[TensorSpec]],
    bound: tuple[int, int],
) -> tuple[object, Callable[..., int], Callable[..., int] | None]:
    """The kernels' objects and the forward pass linked into one JIT library, its entry, and its
    numpy entry (`_emit_numpy_forward`; None where numpy's layout is not the one it reads, or where
    shapes depend on sizes); extern call k calls the address `externs[k]`. `arrays` are the model's
    inputs and outputs, `bound` the addresses of its constants' pointers and of its arena."""
    init_llvm()
    load_runtime()
    aliases = [f"{FORWARD}_extern{k}" for k in range(len(externs))]  # no kernel symbol (`symbol`)
    forward = emit_forward(plan, {name: k.func for name, k in kernels.items()}, aliases)
    native_checks = layout_ok() and not plan.size_vars
    if native_checks:
        _emit_numpy_forward(forward, *arrays, bound)
    forward.triple = target.triple
    jit = llvm.create_lljit_compiler(target.target_machine())
    builder = llvm.JITLibraryBuilder()
    for kernel in kernels.values():
        builder.add_object_img(kernel.compiled.obj)
    for alias, address in zip(aliases, externs):
        builder.import_symbol(alias, address)
    builder.add_ir(str(forward)).add_current_process().export_symbol(FORWARD)
    if native_checks:
        builder.export_symbol(FORWARD_NUMPY)
    library = builder.link(jit, f"{FORWARD}_{id(plan)}")
    proto = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_void_p] * 5)
    entry = None
    if native_checks:
        count = sum(map(len, arrays))
        numpy_proto = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_void_p] * (1 + count))
        entry = partial(numpy_proto(library[FORWARD_NUMPY]), ctypes.addressof(entry_context()))
    return (jit, library), proto(library[FORWARD]), entry


def _emit_numpy_forward(
    module: ll.Module, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], bound: tuple[int, int]
) -> None:
    """Define `FORWARD_NUMPY` in the forward pass's module: the model's numpy arrays (inputs, then
    outputs) checked natively (`compiler.numpy_entry`), then the pass called on them with this
    model's constants and arena, whose addresses are written into the code (it is linked in this
    process, for this model). It returns the pass's status, or -(k + 1) when array k does not pass.
    From Python the checks and the pointer arrays cost 2-3 us a call (`bench call_cost`)."""
    arrays = [*inputs, *outputs]
    forward = module.get_global(FORWARD)
    flat = ll.Function(module, ll.FunctionType(I32, [I8P] * len(arrays)), name=f"{FORWARD}_flat")
    b = ll.IRBuilder(flat.append_basic_block("entry"))
    table = b.alloca(I8P, I64(max(1, len(arrays))))
    for k, pointer in enumerate(flat.args):
        b.store(pointer, b.gep(table, [I64(k)]))
    constants = b.inttoptr(I64(bound[0]), I8P.as_pointer())
    arena = b.inttoptr(I64(bound[1]), I8P)
    no_sizes = ll.Constant(I64.as_pointer(), None)
    b.ret(b.call(forward, [table, b.gep(table, [I64(len(inputs))]), constants, arena, no_sizes]))
    params = [Buffer(spec.name, spec.at({}), spec.dtype) for spec in arrays]
    emit_array_entry(module, flat, FORWARD_NUMPY, params, refusal=lambda k: -(k + 1))


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
