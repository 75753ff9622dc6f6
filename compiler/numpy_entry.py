"""A kernel's numpy entry: `int32 <name>_numpy(i8 **context, PyObject *array0, ...)` checks each
argument in native code (an ndarray, of the parameter's rank, shape and dtype, C-contiguous) and calls
the kernel with the arrays' data pointers; it returns 0, or k + 1 when argument k does not pass.

Checked in Python, a call costs ~7 us for two arrays (`arr.ctypes.data` alone is over 1 us), which
dominates a 3 us kernel; natively the whole call costs a ctypes call. The entry reads numpy's public
`PyArrayObject_fields` at fixed offsets; `layout_ok()` verifies them on this interpreter at load
time against what numpy itself reports, and where they differ (a free-threaded build, say) callers
keep the checks in Python. A failed check also goes back to Python, which raises the error naming
the parameter. `context` holds the addresses that differ per process: numpy's ndarray type and the
dtype objects in `DTYPES` order. `emit_array_entry` is the same entry for any callee: a compiled
model's forward pass has one too (`graph.executor`), whose refusals are negative so that they stay
apart from the pass's own statuses.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from functools import cache

import llvmlite.ir as ll
import numpy as np

from compiler.dtypes import DTYPES
from compiler.ir import Buffer, PrimFunc, SizeVar
from compiler.llvm_ops import I8P, I32, I64

OB_TYPE, DATA, NDIM, DIMENSIONS, DESCR, FLAGS = 8, 16, 24, 32, 56, 64
C_CONTIGUOUS = 0x1


def numpy_entry_name(name: str) -> str:
    return f"{name}_numpy"


def emit_numpy_entry(module: ll.Module, kernel: ll.Function, func: PrimFunc) -> None:
    """Define the entry of `kernel` (the PrimFunc `func`) in `module`."""
    emit_array_entry(module, kernel, numpy_entry_name(func.name), func.params, func.size_vars)


def emit_array_entry(
    module: ll.Module,
    callee: ll.Function,
    name: str,
    params: Sequence[Buffer],
    size_vars: Sequence[SizeVar] = (),
    refusal: Callable[[int], int] = lambda k: k + 1,
) -> None:
    """Define `int32 name(i8 **context, PyObject *array0, ...)` in `module`: each array checked
    against its parameter in `params`, then `callee(data0, ..., size values)` called; it returns
    `refusal(k)` when array k does not pass, else the callee's status (0 when it returns none)."""
    n = len(params)
    fn = ll.Function(module, ll.FunctionType(I32, [I8P.as_pointer()] + [I8P] * n), name=name)
    context, arrays = fn.args[0], fn.args[1:]
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    if any(not isinstance(d, int | SizeVar) for buf in params for d in buf.shape):
        b.ret(I32(refusal(n)))  # a sum or product of sizes: the Python side checks it
        return
    data = []
    sizes: dict[SizeVar, ll.Value] = {}  # each symbolic dimension, from its first appearance
    for k, (buf, array) in enumerate(zip(params, arrays)):
        refuse = fn.append_basic_block(f"refuse{k}")
        with b.goto_block(refuse):
            b.ret(I32(refusal(k)))
        # Only an ndarray's other fields may be read: a smaller object could end before them.
        is_array = b.icmp_unsigned("==", _field(b, array, OB_TYPE, I8P), _context(b, context, 0))
        fields = fn.append_basic_block(f"fields{k}")
        b.cbranch(is_array, fields, refuse)
        b.position_at_end(fields)
        descr = _context(b, context, 1 + DTYPES.index(buf.dtype))
        ok = b.and_(
            b.and_(
                b.icmp_signed("==", _field(b, array, NDIM, I32), I32(len(buf.shape))),
                b.icmp_unsigned("==", _field(b, array, DESCR, I8P), descr),
            ),
            b.icmp_unsigned("!=", b.and_(_field(b, array, FLAGS, I32), I32(C_CONTIGUOUS)), I32(0)),
        )
        dims_block = fn.append_basic_block(f"dims{k}")
        b.cbranch(ok, dims_block, refuse)
        b.position_at_end(dims_block)
        dims = _field(b, array, DIMENSIONS, I64.as_pointer())
        same = ll.Constant(ll.IntType(1), 1)
        for axis, extent in enumerate(buf.shape):
            dim = b.load(b.gep(dims, [I64(axis)]))
            if isinstance(extent, int):
                same = b.and_(same, b.icmp_signed("==", dim, I64(extent)))
            elif (
                isinstance(extent, SizeVar) and extent in sizes
            ):  # as the earlier argument that bound it says
                same = b.and_(same, b.icmp_signed("==", dim, sizes[extent]))
            else:  # bound here, in its declared range
                assert isinstance(extent, SizeVar)
                sizes[extent] = dim
                in_range = b.and_(
                    b.icmp_signed(">=", dim, I64(extent.lo)), b.icmp_signed("<=", dim, I64(extent.hi))
                )
                same = b.and_(same, in_range)
        passed = fn.append_basic_block(f"passed{k}")
        b.cbranch(same, passed, refuse)
        b.position_at_end(passed)
        data.append(b.bitcast(_field(b, array, DATA, I8P), callee.function_type.args[k]))
    status = b.call(callee, data + [sizes[v] for v in size_vars])
    b.ret(status if callee.function_type.return_type == I32 else I32(0))


def _field(b: ll.IRBuilder, obj: ll.Value, offset: int, kind: ll.Type) -> ll.Value:
    return b.load(b.bitcast(b.gep(obj, [I64(offset)]), kind.as_pointer()))


def _context(b: ll.IRBuilder, context: ll.Value, index: int) -> ll.Value:
    return b.load(b.gep(context, [I64(index)]))


@cache
def layout_ok() -> bool:
    """Whether numpy arrays in this process have the layout the entry reads."""
    probe = np.zeros((3, 5), dtype="float32")[:, ::2]  # not contiguous: its flags bit is clear
    whole = np.zeros((3, 5), dtype="float32")
    address = id(whole)
    dims = ctypes.c_void_p.from_address(address + DIMENSIONS).value or 0
    return bool(
        ctypes.c_void_p.from_address(address + OB_TYPE).value == id(np.ndarray)
        and ctypes.c_void_p.from_address(address + DATA).value == whole.ctypes.data
        and ctypes.c_int32.from_address(address + NDIM).value == 2
        and [ctypes.c_int64.from_address(dims + 8 * i).value for i in range(2)] == [3, 5]
        and ctypes.c_void_p.from_address(address + DESCR).value == id(whole.dtype)
        and ctypes.c_int32.from_address(address + FLAGS).value & C_CONTIGUOUS
        and not ctypes.c_int32.from_address(id(probe) + FLAGS).value & C_CONTIGUOUS
    )


@cache
def entry_context() -> ctypes.Array[ctypes.c_void_p]:
    """The per-process addresses the entry compares with (kept alive by numpy's own singletons)."""
    values = [id(np.ndarray), *(id(np.dtype(d)) for d in DTYPES)]
    return (ctypes.c_void_p * len(values))(*values)
