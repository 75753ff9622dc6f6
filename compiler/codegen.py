"""LLVM IR generation from a lowered PrimFunc, with llvmlite.

Node kinds map to emitters through two tables (expressions, statements). The kernel's signature is
`void name(ptr %param0, ptr %param1, ...)`, one pointer per buffer parameter, marked `noalias`
because the caller passes distinct arrays.

Fast-math flags and the value-level operations live in llvm_ops; vectorized loops whose bodies
allow it are emitted as explicit vector code by codegen_vector.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import llvmlite.ir as ll

from compiler.arith import largest
from compiler.codegen_tensorize import emit_tensorized, is_tensorized
from compiler.codegen_vector import can_vectorize, emit_vector_loop, tail_as_extent
from compiler.dtypes import ITEMSIZE
from compiler.ir import (
    Allocate,
    Binary,
    Buffer,
    BufferStore,
    Cast,
    Const,
    Expr,
    For,
    IfThenElse,
    Load,
    PrimFunc,
    Select,
    SeqStmt,
    SizeVar,
    Stmt,
    Unary,
    Var,
)
from compiler.llvm_ops import I8P, I32, I64, LL_TYPES, MEMORY_TYPES, align, cast_value, from_memory, to_memory
from compiler.numpy_entry import emit_numpy_entry
from compiler.target import Target
from compiler.visit import guarded_loads


class _LoopID(ll.values.MDValue):
    """A distinct, self-referential loop-ID node (`distinct !{!self, props...}`), which LLVM
    requires for llvm.loop metadata and llvmlite's add_metadata cannot express."""

    def descr(self, buf: list[str]) -> None:
        props = ", ".join(op.get_reference() for op in self.operands)
        buf += (f"distinct !{{ {self.get_reference()}, {props} }}", "\n")


class CodeGen:
    """Emits one kernel function into a fresh llvmlite module."""

    def __init__(self, func: PrimFunc, target: Target) -> None:
        self.func = func
        self.target = target
        self.module = ll.Module(name=func.name)
        self.module.triple = target.triple
        arg_types = [ll.PointerType(_elem_type(b)) for b in func.params] + [I64] * len(func.size_vars)
        self.fn = ll.Function(self.module, ll.FunctionType(ll.VoidType(), arg_types), name=func.name)
        self.builder = ll.IRBuilder(self.fn.append_basic_block("entry"))
        self.vars: dict[Var, ll.Value] = {}
        self.buffers: dict[Buffer, ll.Value] = {}
        for buf, arg in zip(func.params, self.fn.args):
            arg.name = buf.name
            arg.add_attribute("noalias")
            self.buffers[buf] = arg
        # Symbolic dimensions follow the buffers, as i64 values the entry read from the shapes.
        for v, arg in zip(func.size_vars, self.fn.args[len(func.params) :]):
            arg.name = v.name
            self.vars[v] = arg

    def emit(self) -> str:
        self.stmt(self.func.body)
        self.builder.ret_void()
        self._emit_repeat()
        emit_numpy_entry(self.module, self.fn, self.func)
        return str(self.module)

    def _emit_repeat(self) -> None:
        """`void <name>_repeat(params..., i64 count)`: call the kernel `count` times natively, so timing
        a microsecond kernel measures the kernel, not Python's call overhead. The kernel is noinline
        so the optimizer cannot merge the repeated calls."""
        self.fn.attributes.add("noinline")
        arg_types = [*self.fn.function_type.args, I64]
        fn = ll.Function(
            self.module, ll.FunctionType(ll.VoidType(), arg_types), name=repeat_name(self.func.name)
        )
        b = ll.IRBuilder(fn.append_basic_block("entry"))
        header, body, done = (fn.append_basic_block(n) for n in ("header", "body", "done"))
        b.branch(header)
        b.position_at_end(header)
        count = b.phi(I64)
        count.add_incoming(fn.args[-1], fn.entry_basic_block)
        b.cbranch(b.icmp_signed(">", count, I64(0)), body, done)
        b.position_at_end(body)
        b.call(self.fn, list(fn.args[:-1]))
        count.add_incoming(b.sub(count, I64(1)), body)
        b.branch(header)
        b.position_at_end(done)
        b.ret_void()

    def stmt(self, s: Stmt) -> None:
        STMT_EMITTERS[type(s)](self, s)

    def expr(self, e: Expr) -> ll.Value:
        return EXPR_EMITTERS[type(e)](self, e)

    def counted_loop(
        self, loop: For, begin: ll.Value, end: ll.Value, emit_body: Callable[[], None] | None = None
    ) -> None:
        _counted_loop(self, loop, begin, end, emit_body)

    def declare(self, name: str, ret: ll.Type, args: list[ll.Type]) -> ll.Function:
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ll.Function(self.module, ll.FunctionType(ret, args), name=name)

    def address(self, buf: Buffer, indices: tuple[Expr, ...]) -> ll.Value:
        """Row-major flattening: the element pointer of buf[indices]."""
        flat: ll.Value | None = None
        stride: int | ll.Value = 1  # an int while every dimension so far is
        for dim, idx in zip(reversed(buf.shape), reversed(indices)):
            if isinstance(stride, int):
                term = self.builder.mul(self.expr(idx), I64(stride)) if stride != 1 else self.expr(idx)
            else:
                term = self.builder.mul(self.expr(idx), stride, flags=("nsw",))
            flat = term if flat is None else self.builder.add(flat, term)
            if isinstance(stride, int) and isinstance(dim, int):
                stride *= dim
            else:
                d = I64(dim) if isinstance(dim, int) else self.expr(dim)
                stride = self.builder.mul(
                    I64(stride) if isinstance(stride, int) else stride, d, flags=("nsw",)
                )
        return self.builder.gep(self.buffers[buf], [flat or I64(0)], inbounds=True)

    def loop_metadata(self, loop: For) -> _LoopID | None:
        props = []
        if loop.kind == "unrolled":
            props.append(self.module.add_metadata([ll.MetaDataString(self.module, "llvm.loop.unroll.full")]))
        elif loop.kind == "vectorized":
            lanes = self.target.vector_lanes("float32")
            props.append(
                self.module.add_metadata(
                    [ll.MetaDataString(self.module, "llvm.loop.vectorize.enable"), ll.IntType(1)(1)]
                )
            )
            props.append(
                self.module.add_metadata(
                    [ll.MetaDataString(self.module, "llvm.loop.vectorize.width"), ll.IntType(32)(lanes)]
                )
            )
        if not props:
            return None
        return _LoopID(self.module, props, name=str(len(self.module.metadata)))


def _elem_type(buf: Buffer) -> ll.Type:
    return MEMORY_TYPES[buf.dtype]


def _for(cg: CodeGen, loop: For) -> None:
    if is_tensorized(loop):
        emit_tensorized(cg, loop)
    elif loop.kind == "parallel" and loop.extent != 1:  # one iteration: no team to fork (~1 us)
        _parallel_for(cg, loop)
    elif loop.kind == "vectorized" and can_vectorize(loop):
        emit_vector_loop(cg, loop)
    elif loop.kind == "vectorized" and (tail := tail_as_extent(loop)) and can_vectorize(tail[0]):
        shortened, guard = tail
        assert isinstance(loop.extent, int)
        if guard is None:
            emit_vector_loop(cg, shortened, loop.extent)
        else:
            with cg.builder.if_then(cg.expr(guard)):
                emit_vector_loop(cg, shortened, loop.extent)
    else:
        cg.counted_loop(loop, I64(0), extent_value(cg, loop.extent))


def extent_value(cg: CodeGen, extent: int | Expr) -> ll.Value:
    return I64(extent) if isinstance(extent, int) else cg.expr(extent)


def _counted_loop(
    cg: CodeGen, loop: For, begin: ll.Value, end: ll.Value, emit_body: Callable[[], None] | None = None
) -> None:
    """`for var in range(begin, end): body`, with the loop's unroll/vectorize metadata on the latch."""
    b = cg.builder
    pre = b.block
    header = cg.fn.append_basic_block(f"{loop.var.name}.header")
    body = cg.fn.append_basic_block(f"{loop.var.name}.body")
    exit_ = cg.fn.append_basic_block(f"{loop.var.name}.exit")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(I64, name=loop.var.name)
    iv.add_incoming(begin, pre)
    b.cbranch(b.icmp_signed("<", iv, end), body, exit_)
    b.position_at_end(body)
    cg.vars[loop.var] = iv
    if emit_body is None:
        cg.stmt(loop.body)
    else:
        emit_body()
    nxt = b.add(iv, I64(1), flags=("nuw", "nsw"))
    latch = b.branch(header)
    md = cg.loop_metadata(loop)
    if md is not None:
        latch.set_metadata("llvm.loop", md)
    iv.add_incoming(nxt, b.block)
    del cg.vars[loop.var]
    b.position_at_end(exit_)


def _parallel_for(cg: CodeGen, loop: For) -> None:
    """Run the loop on every core through libgomp, the runtime clang's OpenMP code uses.

    The body is outlined into `void body(i64* closure)`; the closure holds every loop variable and
    buffer pointer in scope, as i64 slots on the caller's stack (GOMP_parallel returns only when all
    threads are done). Each thread takes one contiguous chunk of the iterations (static schedule),
    which keeps each core on its own rows of the output. Nested parallel loops are correct: libgomp
    runs an inner region on a team of one thread. We chose libgomp over a Python thread pool because
    its fork/join costs ~2 us against ~70 us (see ../shared/REFERENCE-llvmlite.md)."""
    b = cg.builder
    captured_vars = list(cg.vars.items())
    captured_bufs = list(cg.buffers.items())
    symbolic = not isinstance(loop.extent, int)  # then its extent, known to the caller, rides along
    slots = ll.ArrayType(I64, max(1, len(captured_vars) + len(captured_bufs) + symbolic))
    with b.goto_block(cg.fn.entry_basic_block):
        b.position_at_start(cg.fn.entry_basic_block)
        closure = b.alloca(slots, name=f"{loop.var.name}.closure")
    values = [v for _, v in captured_vars] + [b.ptrtoint(p, I64) for _, p in captured_bufs]
    if symbolic:
        values.append(extent_value(cg, loop.extent))
    for k, value in enumerate(values):
        b.store(value, b.gep(closure, [I32(0), I32(k)], inbounds=True))
    outlined = _outline(cg, loop, slots, captured_vars, captured_bufs)
    gomp = cg.declare("GOMP_parallel", ll.VoidType(), [outlined.type, I8P, I32, I32])
    b.call(gomp, [outlined, b.bitcast(closure, I8P), I32(0), I32(0)])


def _outline(
    cg: CodeGen,
    loop: For,
    slots: ll.ArrayType,
    captured_vars: list[tuple[Var, ll.Value]],
    captured_bufs: list[tuple[Buffer, ll.Value]],
) -> ll.Function:
    """`void wrapper(i8* closure)` for GOMP_parallel: unpack the closure, take this thread's chunk and
    call the loop body, outlined with `noalias` buffer arguments so the optimizer keeps the aliasing
    facts it has in the kernel itself (pointers loaded from memory would otherwise block vectorization)."""
    body_fn = _outline_body(cg, loop, captured_vars, captured_bufs)
    fn = ll.Function(cg.module, ll.FunctionType(ll.VoidType(), [I8P]), name=f"{body_fn.name}.wrapper")
    fn.linkage = "internal"
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    closure = b.bitcast(fn.args[0], ll.PointerType(slots))
    count = len(captured_vars) + len(captured_bufs)
    symbolic = not isinstance(loop.extent, int)
    loaded = [b.load(b.gep(closure, [I32(0), I32(k)], inbounds=True)) for k in range(count + symbolic)]
    extent = loaded.pop() if symbolic else I64(loop.extent)
    pointers = [
        b.inttoptr(value, ll.PointerType(_elem_type(buf)))
        for (buf, _), value in zip(captured_bufs, loaded[len(captured_vars) :])
    ]
    tid = b.sext(b.call(cg.declare("omp_get_thread_num", I32, []), []), I64)
    nthreads = b.sext(b.call(cg.declare("omp_get_num_threads", I32, []), []), I64)
    chunk = b.sdiv(b.add(extent, b.sub(nthreads, I64(1))), nthreads)
    begin = _smin(b, b.mul(tid, chunk), extent)
    end = _smin(b, b.add(begin, chunk), extent)
    b.call(body_fn, [*pointers, *loaded[: len(captured_vars)], begin, end])
    b.ret_void()
    return fn


def _outline_body(
    cg: CodeGen,
    loop: For,
    captured_vars: list[tuple[Var, ll.Value]],
    captured_bufs: list[tuple[Buffer, ll.Value]],
) -> ll.Function:
    """`void body(buffers..., vars..., i64 begin, i64 end)`: the loop over [begin, end)."""
    arg_types = [ll.PointerType(_elem_type(buf)) for buf, _ in captured_bufs] + [I64] * (
        len(captured_vars) + 2
    )
    fn = ll.Function(
        cg.module,
        ll.FunctionType(ll.VoidType(), arg_types),
        name=cg.module.get_unique_name(f"{cg.func.name}.{loop.var.name}.par"),
    )
    fn.linkage = "internal"
    args = list(fn.args)
    for arg, _ in zip(args, captured_bufs):
        arg.add_attribute("noalias")
    saved = (cg.fn, cg.builder, cg.vars, cg.buffers)
    cg.fn, cg.builder = fn, ll.IRBuilder(fn.append_basic_block("entry"))
    cg.buffers = {buf: arg for (buf, _), arg in zip(captured_bufs, args)}
    cg.vars = {var: arg for (var, _), arg in zip(captured_vars, args[len(captured_bufs) :])}
    cg.counted_loop(loop, args[-2], args[-1])
    cg.builder.ret_void()
    cg.fn, cg.builder, cg.vars, cg.buffers = saved
    return fn


def _smin(b: ll.IRBuilder, x: ll.Value, y: ll.Value) -> ll.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def _seq(cg: CodeGen, s: SeqStmt) -> None:
    for c in s.stmts:
        cg.stmt(c)


def _if(cg: CodeGen, s: IfThenElse) -> None:
    cond = cg.expr(s.cond)
    if s.else_case is None:
        with cg.builder.if_then(cond):
            cg.stmt(s.then_case)
        return
    with cg.builder.if_else(cond) as (then, otherwise):
        with then:
            cg.stmt(s.then_case)
        with otherwise:
            cg.stmt(s.else_case)


def _store(cg: CodeGen, s: BufferStore) -> None:
    value = to_memory(cg.builder, s.buffer.dtype, cg.expr(s.value))
    cg.builder.store(value, cg.address(s.buffer, s.indices), align=align(s.buffer.dtype))


STACK_LIMIT_BYTES = {"global": 64 << 10, "local": 1 << 20}


def _allocate(cg: CodeGen, s: Allocate) -> None:
    """Small buffers (compacted tiles, accumulators) live on the stack, allocated once in the entry
    block of the current function (each thread has its own in a parallel region), where LLVM can
    promote them to registers. Large ones come from malloc, and a failed allocation aborts
    (SIGABRT) rather than letting the kernel write through a null pointer. A "local" buffer (TVM's
    scope for a thread's own storage) stays on the stack up to 1 MiB, an eighth of the 8 MiB stack
    a thread gets by default (`ulimit -s`, which libgomp's threads take); beyond, the heap."""
    b = cg.builder
    elem = _elem_type(s.buffer)
    most = math.prod(largest(d) for d in s.buffer.shape)  # at the symbolic dimensions' largest values
    nbytes = most * ITEMSIZE[s.buffer.dtype]
    if nbytes <= STACK_LIMIT_BYTES[s.buffer.scope]:  # room for the largest shape
        with b.goto_block(cg.fn.entry_basic_block):
            b.position_at_start(cg.fn.entry_basic_block)
            cg.buffers[s.buffer] = b.alloca(elem, size=most, name=s.buffer.name)
            cg.buffers[s.buffer].align = 64
        cg.stmt(s.body)
        del cg.buffers[s.buffer]
        return
    size: ll.Value = I64(ITEMSIZE[s.buffer.dtype])
    for d in s.buffer.shape:
        size = b.mul(size, extent_value(cg, d))
    raw = b.call(cg.declare("malloc", I8P, [I64]), [size])
    with b.if_then(b.icmp_unsigned("==", raw, ll.Constant(I8P, None)), likely=False):
        b.call(cg.declare("abort", ll.VoidType(), []), [])
        b.unreachable()
    cg.buffers[s.buffer] = b.bitcast(raw, ll.PointerType(elem))
    cg.stmt(s.body)
    b.call(cg.declare("free", ll.VoidType(), [I8P]), [raw])
    del cg.buffers[s.buffer]


def _const(cg: CodeGen, e: Const) -> ll.Value:
    return LL_TYPES[e.dtype](e.value)


def _var(cg: CodeGen, e: Var) -> ll.Value:
    return cg.vars[e]


def _load(cg: CodeGen, e: Load) -> ll.Value:
    loaded = cg.builder.load(cg.address(e.buffer, e.indices), align=align(e.buffer.dtype))
    return from_memory(cg.builder, e.buffer.dtype, loaded)


def _op(cg: CodeGen, e: Binary | Unary) -> ll.Value:
    """As the op declares (compiler.ops), on the operands' dtype."""
    return e.op.spec.emit(cg, e.a.dtype, [cg.expr(k) for k in e.children()])


def _select(cg: CodeGen, e: Select) -> ll.Value:
    """A branch-free select, unless a side loads what the condition does not: then only the chosen
    side may run, because the other one may read out of bounds (`compiler.visit.guarded_loads`)."""
    if not guarded_loads(e):
        return cg.builder.select(cg.expr(e.cond), cg.expr(e.true_value), cg.expr(e.false_value))
    b = cg.builder
    cond = cg.expr(e.cond)
    with b.if_else(cond) as (then, otherwise):
        with then:
            true_value, true_block = cg.expr(e.true_value), b.block
        with otherwise:
            false_value, false_block = cg.expr(e.false_value), b.block
    phi = b.phi(true_value.type)
    phi.add_incoming(true_value, true_block)
    phi.add_incoming(false_value, false_block)
    return phi


def _cast(cg: CodeGen, e: Cast) -> ll.Value:
    return cast_value(cg, e.value.dtype, e.dtype, cg.expr(e.value))


# Each emitter takes the node kind it is keyed by, hence Any for the node.
STMT_EMITTERS: dict[type[Stmt], Callable[[CodeGen, Any], None]] = {
    For: _for,
    SeqStmt: _seq,
    IfThenElse: _if,
    BufferStore: _store,
    Allocate: _allocate,
}
EXPR_EMITTERS: dict[type[Expr], Callable[[CodeGen, Any], ll.Value]] = {
    Const: _const,
    Var: _var,
    SizeVar: _var,
    Load: _load,
    Binary: _op,
    Unary: _op,
    Select: _select,
    Cast: _cast,
}


def repeat_name(name: str) -> str:
    return f"{name}_repeat"


def emit_llvm(func: PrimFunc, target: Target) -> str:
    """LLVM IR text of a lowered PrimFunc."""
    return CodeGen(func, target).emit()
