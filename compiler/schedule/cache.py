"""cache_read and cache_write: stage a buffer through a copy, so the copy can be placed (compute_at)
and laid out where the computation wants it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from compiler.ir import (
    SCOPES,
    Block,
    Buffer,
    BufferStore,
    Expr,
    For,
    IterVar,
    Load,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from compiler.names import unique_name
from compiler.schedule.errors import check
from compiler.schedule.tree import find_block, taken_block_names
from compiler.visit import block_reads, blocks, map_block_exprs, map_blocks, seq

Fresh = Callable[[str], Var]


def _copy_nest(name: str, src: Buffer, dst: Buffer, fresh: Fresh) -> Stmt:
    loops = [fresh(f"ax{d}") for d in range(len(src.shape))]
    ivs = tuple(IterVar(Var(f"v{d}"), n, "S") for d, n in enumerate(src.shape))
    idx = tuple(iv.var for iv in ivs)
    block = Block(name, ivs, tuple(loops), BufferStore(dst, Load(src, idx), idx))
    stmt: Stmt = block
    for v, n in reversed(list(zip(loops, src.shape))):
        stmt = For(v, n, stmt)
    return stmt


def _unique_block_name(func: PrimFunc, base: str) -> str:
    return unique_name(base, taken_block_names(func.body))


def _new_buffer(func: PrimFunc, base: Buffer, scope: str) -> Buffer:
    check(scope in SCOPES, f"scope {scope!r} is not a CPU storage scope; use one of {list(SCOPES)}")
    name = unique_name(f"{base.name}_{scope}", {b.name for b in func.params + func.allocs})
    return Buffer(name, base.shape, base.dtype, scope)


def _insert_top_level(func: PrimFunc, anchor_block: str, nest: Stmt, after: bool, buf: Buffer) -> Stmt:
    """Put `nest` before/after the top-level statement that holds `anchor_block`."""
    path, _ = find_block(func.body, anchor_block)
    kids = list(func.body.children()) if isinstance(func.body, SeqStmt) else [func.body]
    pos = path[0] if isinstance(func.body, SeqStmt) else 0
    shared = [b for b in blocks(kids[pos]) if b.name != anchor_block]
    users = [b.name for b in shared if buf in block_reads(b) or b.body.buffer == buf]
    check(
        not users,
        f"cannot stage {buf.name} of block {anchor_block!r}: block(s) {users} share its loop nest and "
        "use the buffer; cache it before compute_at",
    )
    kids.insert(pos + 1 if after else pos, nest)
    return seq(kids)


def _redirect(b: Block, src: Buffer, dst: Buffer, writes: bool) -> Block:
    def fn(e: Expr) -> Expr | None:
        return Load(dst, e.indices) if isinstance(e, Load) and e.buffer == src else None

    nb = map_block_exprs(b, fn)
    if writes:
        nb = replace(
            nb,
            body=replace(nb.body, buffer=dst),
            init=replace(nb.init, buffer=dst) if nb.init is not None else None,
        )
    return nb


def cache_read(
    func: PrimFunc, block_name: str, read_index: int, scope: str, fresh: Fresh
) -> tuple[PrimFunc, str]:
    """Copy the block's `read_index`-th input into a new buffer right before the block's loop nest.

    Inputs are numbered as TVM numbers a block's reads: the buffer a reduction accumulates into is
    its output, not an input, so matmul's A is 0 and B is 1."""
    _, block = find_block(func.body, block_name)
    reads = [b for b in block_reads(block) if b != block.body.buffer]
    check(
        0 <= read_index < len(reads),
        f"cache_read({block_name!r}): read index {read_index} out of range; "
        f"it reads {[b.name for b in reads]}",
    )
    src = reads[read_index]
    dst = _new_buffer(func, src, scope)
    name = _unique_block_name(func, dst.name)
    redirected = map_blocks(func.body, lambda b: _redirect(b, src, dst, False) if b.name == block_name else b)
    func = replace(func, body=redirected)
    body = _insert_top_level(func, block_name, _copy_nest(name, src, dst, fresh), after=False, buf=src)
    return replace(func, body=body, allocs=func.allocs + (dst,)), name


def cache_write(
    func: PrimFunc, block_name: str, write_index: int, scope: str, fresh: Fresh
) -> tuple[PrimFunc, str]:
    """Compute the block into a new buffer and copy it to the original right after the block's nest."""
    _, block = find_block(func.body, block_name)
    check(write_index == 0, f"cache_write({block_name!r}): the block writes one buffer; index {write_index}")
    src = block.body.buffer
    others = [b.name for b in blocks(func.body) if b.name != block_name and b.body.buffer == src]
    check(not others, f"cache_write({block_name!r}): {src.name} is also written by {others}")
    dst = _new_buffer(func, src, scope)
    name = _unique_block_name(func, dst.name)
    redirected = map_blocks(func.body, lambda b: _redirect(b, src, dst, True) if b.name == block_name else b)
    func = replace(func, body=redirected)
    body = _insert_top_level(func, block_name, _copy_nest(name, dst, src, fresh), after=True, buf=src)
    return replace(func, body=body, allocs=func.allocs + (dst,)), name
