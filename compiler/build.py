"""Build a PrimFunc into a callable kernel: lower, emit LLVM IR, optimize at O3, load for the host.

Compiling and loading are separate steps on purpose. LLVM's optimizer leaks ~100-200 kB per module
inside llvmlite, so a tuner compiles in worker processes that are recycled, and ships the small
object file (`CompiledKernel.obj`) to the process that measures; loading it takes ~0.1 ms.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, overload

import llvmlite.binding as llvm
import numpy as np

from compiler.buckets import BucketedFunc, lower_buckets
from compiler.codegen import emit_llvm, repeat_name
from compiler.dtypes import DTYPES
from compiler.ir import Buffer, IRModule, PrimFunc, SizeVar, size_value
from compiler.lower import lower
from compiler.numpy_entry import entry_context, layout_ok, numpy_entry_name
from compiler.printer import expr_str
from compiler.runtime import load_runtime
from compiler.target import Target, init_llvm

if TYPE_CHECKING:
    from compiler.library import Library

NP_DTYPES = {dtype: np.dtype(dtype).type for dtype in DTYPES}


def optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine) -> None:
    """O3 with the loop and SLP vectorizers (llvmlite leaves SLP off by default)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)


@dataclass(frozen=True)
class CompiledKernel:
    """Object code for one PrimFunc and the host-independent facts needed to call it."""

    func: PrimFunc
    target: Target
    obj: bytes
    llvm_ir: str = field(repr=False)
    optimized_ir: str = field(repr=False)
    assembly: str = field(repr=False)


def compile_kernel(
    func: PrimFunc | BucketedFunc, target: Target, *, listings: bool = False, pic: bool = False
) -> CompiledKernel:
    """Lower and compile `func` to object code for `target`: a bucketed function as one kernel that
    chooses its schedule by the size at the call (`compiler.buckets`).

    With `listings`, the optimized IR and the assembly are kept too (they cost a few ms). With `pic`,
    the object can also be linked into a shared library (`Target.target_machine`)."""
    init_llvm()
    if isinstance(func, BucketedFunc):
        lowered, func = lower_buckets(func), func.func
    else:
        lowered = lower(func)
    llvm_ir = emit_llvm(lowered, target)
    tm = target.target_machine(pic=pic)
    module = llvm.parse_assembly(llvm_ir)
    module.verify()
    module.triple = target.triple
    module.data_layout = str(tm.target_data)
    optimize(module, tm)
    optimized = str(module) if listings else ""
    asm = tm.emit_assembly(module) if listings else ""
    return CompiledKernel(func, target, tm.emit_object(module), llvm_ir, optimized, asm)


@dataclass
class Kernel:
    """A loaded kernel. Call it with numpy arrays in parameter order; outputs are written in place."""

    compiled: CompiledKernel
    _jit: object = field(repr=False)
    _library: object = field(repr=False)
    _cfunc: Callable[..., None] = field(repr=False)
    _repeat: Callable[..., None] = field(repr=False)
    # The numpy entry with its context bound; None where numpy's layout is not the entry's.
    _numpy: Callable[..., int] | None = field(repr=False)
    _arity: int = field(repr=False)

    @property
    def func(self) -> PrimFunc:
        return self.compiled.func

    def __call__(self, *arrays: np.ndarray) -> None:
        """Checked natively when the arrays pass (`compiler.numpy_entry`), else here, which raises
        the error naming the parameter or calls with what numpy accepts (an ndarray subclass)."""
        # CPython's id() is the object's address: what the entry reads (the tuple keeps them alive).
        if self._numpy is not None and len(arrays) == self._arity and self._numpy(*map(id, arrays)) == 0:
            return
        self._cfunc(*self.pointers(*arrays))

    def repeat(self, pointers: list[int], count: int) -> None:
        """Run the kernel `count` times in a native loop (arguments from `pointers()`)."""
        self._repeat(*pointers, count)

    def pointers(self, *arrays: np.ndarray) -> list[int]:
        """Check the arrays against the parameters and return their data addresses (no copies)."""
        params = self.func.params
        if len(arrays) != len(params):
            names = ", ".join(b.name for b in params)
            raise TypeError(f"{self.func.name} takes {len(params)} arrays ({names}), got {len(arrays)}")
        sizes: dict[SizeVar, int] = {}
        out = [_check_array(buf, arr, sizes) for buf, arr in zip(params, arrays)]
        for buf, arr in zip(params, arrays):
            _check_expressions(buf, arr.shape, sizes)
        return out + [sizes[v] for v in self.func.size_vars]  # the symbolic dimensions' values

    def assembly(self) -> str:
        if not self.compiled.assembly:
            raise ValueError("assembly was not kept: build with listings=True")
        return self.compiled.assembly

    def optimized_ir(self) -> str:
        if not self.compiled.optimized_ir:
            raise ValueError("optimized IR was not kept: build with listings=True")
        return self.compiled.optimized_ir


class ShapeError(ValueError):
    """An argument whose shape does not fit the parameter (a symbolic dimension outside its range)."""


def _check_shape(buf: Buffer, shape: tuple[int, ...], sizes: dict[SizeVar, int]) -> None:
    if buf.is_static:
        if shape != buf.shape:
            raise ValueError(f"{buf.name}: expected shape {buf.shape}, got {shape}")
        return
    text = "(" + ", ".join(str(d) if isinstance(d, int) else expr_str(d) for d in buf.shape) + ")"
    if len(shape) != len(buf.shape):
        raise ValueError(f"{buf.name}: expected shape {text}, got {shape}")
    for axis, (want, got) in enumerate(zip(buf.shape, shape)):
        if isinstance(want, int):
            if got != want:
                raise ValueError(f"{buf.name}: expected shape {text}, got {shape} (dimension {axis})")
        elif not isinstance(want, SizeVar):
            continue  # a product or sum of sizes: checked once every argument bound its sizes
        elif want in sizes:
            if got != sizes[want]:
                raise ValueError(
                    f"{buf.name}: dimension {axis} is {want.name} = {sizes[want]} (from an earlier argument),"
                    f" got {got}"
                )
        else:
            assert isinstance(want, SizeVar)
            if not want.lo <= got <= want.hi:
                raise ShapeError(
                    f"{buf.name}: dimension {axis} ({want.name}) is {got}, outside the declared range "
                    f"{want.name} in [{want.lo}, {want.hi}]"
                )
            sizes[want] = got


def _check_expressions(buf: Buffer, shape: tuple[int, ...], sizes: dict[SizeVar, int]) -> None:
    """The dimensions that are sums or products of sizes, once the arguments bound every size var a
    dimension is on its own; one only inside such dimensions (a kernel of a model's flattened
    `batch * seq` rows) cannot be read off shapes: the model's forward pass passes it."""
    for axis, (want, got) in enumerate(zip(buf.shape, shape)):
        if isinstance(want, int | SizeVar):
            continue
        value = size_value(want, sizes)
        if value is None:
            raise ValueError(
                f"{buf.name}: dimension {axis} is {expr_str(want)}, whose sizes no argument's shape gives: "
                "the kernel runs inside its model, which passes them"
            )
        if got != value:
            raise ValueError(f"{buf.name}: dimension {axis} is {expr_str(want)} = {value}, got {got}")


def _check_array(buf: Buffer, arr: np.ndarray, sizes: dict[SizeVar, int] | None = None) -> int:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{buf.name}: expected a numpy.ndarray, got {type(arr).__name__}")
    if arr.dtype != NP_DTYPES[buf.dtype]:
        raise TypeError(f"{buf.name}: expected dtype {buf.dtype}, got {arr.dtype}")
    _check_shape(buf, arr.shape, {} if sizes is None else sizes)
    if not arr.flags.c_contiguous:
        raise ValueError(f"{buf.name}: array must be C-contiguous (use np.ascontiguousarray)")
    return arr.ctypes.data


def load(compiled: CompiledKernel) -> Kernel:
    """Link object code into this process (ORC LLJIT) and return the callable kernel."""
    init_llvm()
    load_runtime()
    name = compiled.func.name
    jit = llvm.create_lljit_compiler(compiled.target.target_machine())
    library = (
        llvm.JITLibraryBuilder()
        .add_object_img(compiled.obj)
        .add_current_process()
        .export_symbol(name)
        .export_symbol(repeat_name(name))
        .export_symbol(numpy_entry_name(name))
        .link(jit, f"{name}_{id(compiled)}")
    )
    n = len(compiled.func.params)
    sizes = [ctypes.c_int64] * len(compiled.func.size_vars)
    kernel_proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * n), *sizes)
    repeat_proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * n), *sizes, ctypes.c_int64)
    numpy_proto = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.c_void_p] * (n + 1)))
    return Kernel(
        compiled,
        jit,
        library,
        kernel_proto(library[name]),
        repeat_proto(library[repeat_name(name)]),
        partial(numpy_proto(library[numpy_entry_name(name)]), ctypes.addressof(entry_context()))
        if layout_ok()
        else None,
        n,
    )


@overload
def build(
    func: PrimFunc | BucketedFunc, target: Target | str | None = None, *, listings: bool = True
) -> Kernel: ...
@overload
def build(func: IRModule, target: Target | str | None = None, *, listings: bool = True) -> Library: ...
def build(
    func: PrimFunc | BucketedFunc | IRModule, target: Target | str | None = None, *, listings: bool = True
) -> Kernel | Library:
    """Compile `func` for `target` and load it into this process: the kernel, or for a module (as
    TVM's `tvm.build(mod, target="llvm")`) its kernels by name. The library's edge: without a
    target, or with "llvm", for this machine."""
    target = _target(target)
    if isinstance(func, IRModule):
        from compiler.library import Library

        return Library({f.name: load(compile_kernel(f, target, listings=listings)) for f in func.functions})
    return load(compile_kernel(func, target, listings=listings))


def _target(target: Target | str | None) -> Target:
    """This machine for None and for TVM's "llvm" (whose options are not read: the kernels are for
    this machine, with all its cores)."""
    if target is None:
        return Target.host()
    if isinstance(target, str):
        if target.split()[0] != "llvm":
            raise ValueError(f"target {target!r}: this compiler builds for this machine's CPU, 'llvm'")
        return Target.host()
    return target
