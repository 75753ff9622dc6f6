"""A fused module's forward pass as one native function: every kernel called in dataflow order with
its arguments' addresses computed from four bases, so that a forward pass is one call from Python and
the same code is the entry point of an exported library.

    int32 tensor_tuner_forward(i8 **inputs, i8 **outputs, i8 **constants, i8 *arena, i64 *sizes)

`inputs` and `outputs` are the caller's arrays in the model's order; kernels read the inputs in place
and the kernel computing an output writes straight into the caller's array. `constants` is a table
of the weights' addresses (numpy arrays in the JIT, an embedded blob in a library); `arena` holds the
intermediates at the offsets of the memory plan. An output that no kernel computes (an input, a
weight, or a second copy of another output) is copied into place after the kernels have run.

A module made for a range of sizes (`compiler.graph.symbolic`) takes its size vars' values in
`sizes` (in `ForwardPlan.size_vars` order; a static module ignores it): each kernel gets the values
of its own, and the memory plan holds every tensor at the largest sizes. A value outside its
declared range returns OUT_OF_RANGE before any kernel runs: nothing is written outside a buffer.

An extern call (`CallDPSPacked`) is a step like a kernel, called with `compiler.graph.extern`'s
convention; the LLVM module calls each through a symbol the caller names (an alias the JIT binds to
the function's address, or the native symbol an exported library links against). When extern call k
(in `ForwardPlan.externs` order) returns non-zero, the pass stops and returns EXTERN_FAILED + k."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
from llvmlite import ir

from compiler.arith import simplify
from compiler.graph.ir import CallDPSPacked, CallTIR, Constant, DPSCall, GraphError, Input, Module, TensorType
from compiler.graph.memory_plan import MemoryPlan, plan_memory, views
from compiler.ir import Binary, Const, Expr, PrimFunc, SizeVar
from compiler.ops import Op

FORWARD = "tensor_tuner_forward"
ALIGNMENT = 64
I8P = ir.IntType(8).as_pointer()
I8PP = I8P.as_pointer()
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I64P = I64.as_pointer()
I32P = I32.as_pointer()
OUT_OF_RANGE = 2  # the status of a call with a size outside its declared range
EXTERN_FAILED = 3  # plus k: the status of a pass whose extern call k returned non-zero
# The extern calling convention (`compiler.graph.extern`): data pointers, shapes, ranks, their count.
EXTERN_TYPE = ir.FunctionType(I32, [I8PP, I64P.as_pointer(), I32P, I32])


class Storage(Enum):
    INPUT = "input"
    OUTPUT = "output"
    CONSTANT = "constant"
    ARENA = "arena"


@dataclass(frozen=True)
class TensorRef:
    """Where a tensor lives: `index` into the inputs, outputs or constants, or a byte offset into
    the arena (in a module made for a range, an expression of its size vars)."""

    base: Storage
    index: int | Expr


@dataclass(frozen=True)
class KernelCall:
    node: str
    func: str  # the module's name for the PrimFunc
    args: tuple[TensorRef, ...]


@dataclass(frozen=True)
class ExternCall:
    """A call of the extern function registered as `func`: `args` are its inputs then its output,
    `types` their (static) types."""

    node: str
    func: str
    args: tuple[TensorRef, ...]
    types: tuple[TensorType, ...]


@dataclass(frozen=True)
class OutputCopy:
    output: int
    source: TensorRef
    nbytes: int | Expr  # an expression of the size vars in a module made for a range


@dataclass(frozen=True)
class ForwardPlan:
    calls: tuple[KernelCall | ExternCall, ...]
    copies: tuple[OutputCopy, ...]
    constants: tuple[Constant, ...]
    arena_bytes: int
    size_vars: tuple[SizeVar, ...] = ()

    @property
    def externs(self) -> tuple[ExternCall, ...]:
        """The extern calls in the order they run: extern call k's failure is EXTERN_FAILED + k."""
        return tuple(c for c in self.calls if isinstance(c, ExternCall))


def module_size_vars(module: Module) -> tuple[SizeVar, ...]:
    """The size vars of a module's inputs, in order of first appearance: what a call binds."""
    out: list[SizeVar] = []
    for node in module.inputs:
        for d in node.type.dims:
            if isinstance(d, SizeVar) and d not in out:
                out.append(d)
    return tuple(out)


def plan_forward(module: Module) -> ForwardPlan:
    """Where every tensor of a fused module lives during a forward pass."""
    memory = plan_memory(module, ALIGNMENT)
    offsets = _offsets(module, memory)
    aliases = views(module)
    where: dict[int, TensorRef] = {id(n): TensorRef(Storage.INPUT, k) for k, n in enumerate(module.inputs)}
    constants: list[Constant] = []
    copies: list[OutputCopy] = []
    for k, out in enumerate(module.outputs):
        if isinstance(out, DPSCall) and id(out) not in where and id(out) not in aliases:
            where[id(out)] = TensorRef(Storage.OUTPUT, k)
    calls = []
    for node in module.nodes():
        if isinstance(node, Constant):
            where[id(node)] = TensorRef(Storage.CONSTANT, len(constants))
            constants.append(node)
        elif id(node) in aliases:
            where[id(node)] = where[id(aliases[id(node)])]
        elif isinstance(node, DPSCall):
            if id(node) not in where:
                where[id(node)] = TensorRef(Storage.ARENA, offsets[memory.storage_of[node.name]])
            calls.append(_step(node, tuple(where[id(a)] for a in (*node.args, node))))
        elif not isinstance(node, Input):
            raise GraphError(node.name, type(node).__name__, "build needs a fused module (graph.optimize)")
    for k, out in enumerate(module.outputs):
        if where[id(out)] != TensorRef(Storage.OUTPUT, k):
            copies.append(OutputCopy(k, where[id(out)], _bytes(out.type)))
    arena = max(ALIGNMENT, sum(memory.storage_bytes))
    return ForwardPlan(tuple(calls), tuple(copies), tuple(constants), arena, module_size_vars(module))


def _step(node: DPSCall, args: tuple[TensorRef, ...]) -> KernelCall | ExternCall:
    if isinstance(node, CallDPSPacked):
        return ExternCall(node.name, node.func, args, tuple(a.type for a in (*node.args, node)))
    assert isinstance(node, CallTIR)
    return KernelCall(node.name, node.func, args)


def _offsets(module: Module, memory: MemoryPlan) -> list[int | Expr]:
    """Each storage's offset in the arena. A module made for a range shares storage as planned at
    its largest sizes, but lays the storages out at the sizes of the call, each as large as its
    largest tensor then: at 7 tokens a BERT layer's intermediates fill 0.2 MB, not the 42 MB they
    take at 512, and stay in cache (7 tokens ran 0.81x the static model laid out at 512)."""
    if not module_size_vars(module):
        return [sum(memory.storage_bytes[:k]) for k in range(len(memory.storage_bytes))]
    need: list[list[int | Expr]] = [[] for _ in memory.storage_bytes]
    for node in module.nodes():
        if isinstance(node, DPSCall) and node.name in memory.storage_of:
            need[memory.storage_of[node.name]].append(_aligned(_bytes(node.type)))
    out: list[int | Expr] = []
    offset: int | Expr = 0
    for sizes in need:
        out.append(offset)
        largest = sizes[0]
        for size in sizes[1:]:
            largest = _arith(Op.MAX, largest, size)
        offset = _arith(Op.ADD, offset, largest)
    return out


def _aligned(nbytes: int | Expr) -> int | Expr:
    return _arith(Op.MUL, _arith(Op.FLOORDIV, _arith(Op.ADD, nbytes, ALIGNMENT - 1), ALIGNMENT), ALIGNMENT)


def _arith(op: Op, a: int | Expr, b: int | Expr) -> int | Expr:
    """`a op b`, a number where both are, else simplified."""
    if isinstance(a, int) and isinstance(b, int):
        return {Op.ADD: a + b, Op.MUL: a * b, Op.FLOORDIV: a // b, Op.MAX: max(a, b)}[op]
    return simplify(
        Binary(
            op, Const(a, "int64") if isinstance(a, int) else a, Const(b, "int64") if isinstance(b, int) else b
        )
    )


def evaluate(e: int | Expr, sizes: Mapping[str, int]) -> int:
    """An offset or a byte count at the sizes of a call (`sizes` by size var name)."""
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, SizeVar):
        return sizes[e.name]
    if isinstance(e, Binary) and e.op in _FOLD:
        return _FOLD[e.op](evaluate(e.a, sizes), evaluate(e.b, sizes))
    raise GraphError("forward", "memory plan", f"{e} is not an offset of the sizes")


_FOLD: dict[Op, Callable[[int, int], int]] = {
    Op.ADD: lambda a, b: a + b,
    Op.SUB: lambda a, b: a - b,
    Op.MUL: lambda a, b: a * b,
    Op.FLOORDIV: lambda a, b: a // b,
    Op.MAX: max,
    Op.MIN: min,
}


def _bytes(t: TensorType) -> int | Expr:
    if t.is_static:
        return t.nbytes
    out: Expr = Const(np.dtype(t.dtype).itemsize, "int64")
    for d in t.dims:
        out = Binary(Op.MUL, out, Const(d, "int64") if isinstance(d, int) else d)
    return out


def symbol(func: str) -> str:
    """The native symbol of a module function: C identifiers only, prefixed against clashes."""
    return "tt_" + "".join(c if c.isalnum() else "_" for c in func)


def emit_forward(plan: ForwardPlan, funcs: Mapping[str, PrimFunc], externs: Sequence[str] = ()) -> ir.Module:
    """An LLVM module defining `tensor_tuner_forward` and declaring the kernels (`funcs`: each
    kernel's function, for its parameters and size vars), which are linked in beside it, and the
    extern functions (`externs`: the symbol to call for each of `plan.externs`), which are not."""
    if len(externs) != len(plan.externs):
        raise ValueError(f"the plan makes {len(plan.externs)} extern calls, given {len(externs)} symbols")
    module = ir.Module(name=FORWARD)
    fn = ir.Function(module, ir.FunctionType(I32, [I8PP, I8PP, I8PP, I8P, I64P]), name=FORWARD)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    bases = dict(zip(Storage, fn.args))
    sizes = {v: b.load(b.gep(fn.args[4], [I64(k)], inbounds=True)) for k, v in enumerate(plan.size_vars)}
    if sizes:
        _check_ranges(b, fn, sizes)
    extern_symbols = iter(externs)
    for call in plan.calls:
        pointers = [_address(b, bases, a, sizes) for a in call.args]
        if isinstance(call, ExternCall):
            _call_extern(b, call, _declared(module, next(extern_symbols), EXTERN_TYPE), pointers, plan)
            continue
        func = funcs[call.func]
        kind = ir.FunctionType(ir.VoidType(), [I8P] * len(func.params) + [I64] * len(func.size_vars))
        b.call(_declared(module, symbol(call.func), kind), pointers + [sizes[v] for v in func.size_vars])
    if plan.copies:
        memcpy = module.declare_intrinsic("llvm.memcpy", [I8P, I8P, I64])
        for copy in plan.copies:
            dest = _address(b, bases, TensorRef(Storage.OUTPUT, copy.output), sizes)
            source = _address(b, bases, copy.source, sizes)
            b.call(memcpy, [dest, source, _index(b, copy.nbytes, sizes), ir.IntType(1)(0)])
    b.ret(I32(0))
    return module


def _declared(module: ir.Module, name: str, kind: ir.FunctionType) -> ir.Function:
    """The function `name` of `module`, declared on first use (one declaration however many calls)."""
    known = module.globals.get(name)
    return known if isinstance(known, ir.Function) else ir.Function(module, kind, name=name)


def _call_extern(
    b: ir.IRBuilder, call: ExternCall, callee: ir.Function, pointers: list[ir.Value], plan: ForwardPlan
) -> None:
    """Call `callee` by the extern convention, returning EXTERN_FAILED + k from the pass when it
    fails. The shapes and ranks are constant tables, the data pointers an array on the stack."""
    k = plan.externs.index(call)
    module = b.module
    data = b.alloca(ir.ArrayType(I8P, len(pointers)), name=f"extern{k}_args")
    for j, pointer in enumerate(pointers):
        b.store(pointer, b.gep(data, [I32(0), I32(j)], inbounds=True))
    dims = [_table(module, f"extern{k}_shape{j}", I64, t.shape) for j, t in enumerate(call.types)]
    shapes = _table(module, f"extern{k}_shapes", I64P, [d.gep([I32(0), I32(0)]) for d in dims])
    ranks = _table(module, f"extern{k}_ndims", I32, [len(t.shape) for t in call.types])
    first = [I32(0), I32(0)]
    args = [b.gep(data, first), shapes.gep(first), ranks.gep(first), I32(len(pointers))]
    failed = b.icmp_signed("!=", b.call(callee, args), I32(0))
    fail, rest = (b.function.append_basic_block(f"extern{k}_{n}") for n in ("failed", "done"))
    b.cbranch(failed, fail, rest)
    b.position_at_end(fail)
    b.ret(I32(EXTERN_FAILED + k))
    b.position_at_end(rest)


def _table(module: ir.Module, name: str, kind: ir.Type, values: Sequence[object]) -> ir.GlobalVariable:
    """A constant array local to `module`."""
    table = ir.GlobalVariable(module, ir.ArrayType(kind, len(values)), f"{FORWARD}_{name}")
    table.linkage = "internal"
    table.global_constant = True
    table.initializer = ir.Constant(table.value_type, list(values))
    return table


def _check_ranges(b: ir.IRBuilder, fn: ir.Function, sizes: Mapping[SizeVar, ir.Value]) -> None:
    """Return OUT_OF_RANGE unless every size lies in its declared range."""
    outside = ir.IntType(1)(0)
    for var, value in sizes.items():
        low = b.icmp_signed("<", value, I64(var.lo))
        outside = b.or_(outside, b.or_(low, b.icmp_signed(">", value, I64(var.hi))))
    refuse, run = fn.append_basic_block("out_of_range"), fn.append_basic_block("run")
    b.cbranch(outside, refuse, run)
    b.position_at_end(refuse)
    b.ret(I32(OUT_OF_RANGE))
    b.position_at_end(run)


def _index(b: ir.IRBuilder, e: int | Expr, sizes: Mapping[SizeVar, ir.Value]) -> ir.Value:
    """An offset or a byte count: a number, or an expression of the sizes (`evaluate`'s ops)."""
    if isinstance(e, int):
        return I64(e)
    if isinstance(e, Const):
        return I64(int(e.value))
    if isinstance(e, SizeVar):
        return sizes[e]
    if isinstance(e, Binary) and e.op in _FOLD:
        x, y = _index(b, e.a, sizes), _index(b, e.b, sizes)
        if e.op in (Op.MAX, Op.MIN):
            return b.select(b.icmp_signed(">" if e.op == Op.MAX else "<", x, y), x, y)
        if e.op == Op.FLOORDIV:
            return b.sdiv(x, y)  # of byte counts: never negative
        return {Op.ADD: b.add, Op.SUB: b.sub, Op.MUL: b.mul}[e.op](x, y)
    raise GraphError("forward", "memory plan", f"{e} is not an offset of the sizes")


def _address(
    b: ir.IRBuilder, bases: Mapping[Storage, ir.Argument], arg: TensorRef, sizes: Mapping[SizeVar, ir.Value]
) -> ir.Value:
    if arg.base is Storage.ARENA:
        return b.gep(bases[Storage.ARENA], [_index(b, arg.index, sizes)], inbounds=True)
    assert isinstance(arg.index, int)
    return b.load(b.gep(bases[arg.base], [I64(arg.index)], inbounds=True))
