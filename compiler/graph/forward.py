"""A fused module's forward pass as one native function: every kernel called in dataflow order with
its arguments' addresses computed from four bases, so that a forward pass is one call from Python and
the same code is the entry point of an exported library.

    int32 tensor_tuner_forward(i8 **inputs, i8 **outputs, i8 **constants, i8 *arena)

`inputs` and `outputs` are the caller's arrays in the model's order; kernels read the inputs in place
and the kernel computing an output writes straight into the caller's array. `constants` is a table
of the weights' addresses (numpy arrays in the JIT, an embedded blob in a library); `arena` holds the
intermediates at the offsets of the memory plan. An output that no kernel computes (an input, a
weight, or a second copy of another output) is copied into place after the kernels have run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from llvmlite import ir

from compiler.graph.ir import CallTIR, Constant, GraphError, Input, Module
from compiler.graph.memory_plan import plan_memory, views

FORWARD = "tensor_tuner_forward"
ALIGNMENT = 64
I8P = ir.IntType(8).as_pointer()
I8PP = I8P.as_pointer()
I32 = ir.IntType(32)
I64 = ir.IntType(64)


class Storage(Enum):
    INPUT = "input"
    OUTPUT = "output"
    CONSTANT = "constant"
    ARENA = "arena"


@dataclass(frozen=True)
class TensorRef:
    """Where a tensor lives: `index` into the inputs, outputs or constants, or a byte offset into
    the arena."""

    base: Storage
    index: int


@dataclass(frozen=True)
class KernelCall:
    node: str
    func: str  # the module's name for the PrimFunc
    args: tuple[TensorRef, ...]


@dataclass(frozen=True)
class OutputCopy:
    output: int
    source: TensorRef
    nbytes: int


@dataclass(frozen=True)
class ForwardPlan:
    calls: tuple[KernelCall, ...]
    copies: tuple[OutputCopy, ...]
    constants: tuple[Constant, ...]
    arena_bytes: int


def plan_forward(module: Module) -> ForwardPlan:
    """Where every tensor of a fused module lives during a forward pass."""
    memory = plan_memory(module, ALIGNMENT)
    offsets = [sum(memory.storage_bytes[:k]) for k in range(len(memory.storage_bytes))]
    aliases = views(module)
    where: dict[int, TensorRef] = {id(n): TensorRef(Storage.INPUT, k) for k, n in enumerate(module.inputs)}
    constants: list[Constant] = []
    copies: list[OutputCopy] = []
    for k, out in enumerate(module.outputs):
        if isinstance(out, CallTIR) and id(out) not in where and id(out) not in aliases:
            where[id(out)] = TensorRef(Storage.OUTPUT, k)
    calls = []
    for node in module.nodes():
        if isinstance(node, Constant):
            where[id(node)] = TensorRef(Storage.CONSTANT, len(constants))
            constants.append(node)
        elif id(node) in aliases:
            where[id(node)] = where[id(aliases[id(node)])]
        elif isinstance(node, CallTIR):
            if id(node) not in where:
                where[id(node)] = TensorRef(Storage.ARENA, offsets[memory.storage_of[node.name]])
            args = tuple(where[id(a)] for a in (*node.args, node))
            calls.append(KernelCall(node.name, node.func, args))
        elif not isinstance(node, Input):
            raise GraphError(node.name, type(node).__name__, "build needs a fused module (graph.optimize)")
    for k, out in enumerate(module.outputs):
        if where[id(out)] != TensorRef(Storage.OUTPUT, k):
            copies.append(OutputCopy(k, where[id(out)], out.type.nbytes))
    return ForwardPlan(
        tuple(calls), tuple(copies), tuple(constants), max(ALIGNMENT, sum(memory.storage_bytes))
    )


def symbol(func: str) -> str:
    """The native symbol of a module function: C identifiers only, prefixed against clashes."""
    return "tt_" + "".join(c if c.isalnum() else "_" for c in func)


def emit_forward(plan: ForwardPlan, arity: Mapping[str, int]) -> ir.Module:
    """An LLVM module defining `tensor_tuner_forward` and declaring the kernels (`arity`: each
    function's number of parameters), which are linked in beside it."""
    module = ir.Module(name=FORWARD)
    fn = ir.Function(module, ir.FunctionType(I32, [I8PP, I8PP, I8PP, I8P]), name=FORWARD)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    bases = dict(zip(Storage, fn.args))
    kernels: dict[str, ir.Function] = {}
    for call in plan.calls:
        if call.func not in kernels:
            kind = ir.FunctionType(ir.VoidType(), [I8P] * arity[call.func])
            kernels[call.func] = ir.Function(module, kind, name=symbol(call.func))
        b.call(kernels[call.func], [_address(b, bases, a) for a in call.args])
    if plan.copies:
        memcpy = module.declare_intrinsic("llvm.memcpy", [I8P, I8P, I64])
        for copy in plan.copies:
            dest = _address(b, bases, TensorRef(Storage.OUTPUT, copy.output))
            source = _address(b, bases, copy.source)
            b.call(memcpy, [dest, source, I64(copy.nbytes), ir.IntType(1)(0)])
    b.ret(I32(0))
    return module


def _address(b: ir.IRBuilder, bases: Mapping[Storage, ir.Argument], arg: TensorRef) -> ir.Value:
    if arg.base is Storage.ARENA:
        return b.gep(bases[Storage.ARENA], [I64(arg.index)], inbounds=True)
    return b.load(b.gep(bases[arg.base], [I64(arg.index)], inbounds=True))
