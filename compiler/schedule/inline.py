"""compute_inline and reverse_compute_inline: fold an elementwise block into its consumers (producer)."""

from __future__ import annotations

from dataclasses import replace

from compiler.arith import simplify
from compiler.ir import Block, Buffer, BufferStore, Expr, Load, PrimFunc, Var, structural_equal
from compiler.schedule.errors import ScheduleError, check
from compiler.schedule.tree import (
    conflicts,
    find_block,
    nest_root,
    readers,
    set_at,
    writers,
)
from compiler.visit import (
    block_loads,
    block_reads,
    block_writes,
    blocks,
    map_block_exprs,
    map_blocks,
    map_expr,
    substitute,
)


def _check_elementwise(block: Block, where: str) -> list[Var]:
    """The block must be spatial, without init, and write at distinct plain iteration variables."""
    check(
        block.init is None and all(iv.kind == "S" for iv in block.iter_vars),
        f"{where}: block {block.name!r} is a reduction or scan step",
    )
    idx = [i for i in block.body.indices if isinstance(i, Var)]
    ivs = [iv.var for iv in block.iter_vars]
    check(
        len(idx) == len(block.body.indices)
        and len(set(idx)) == len(idx) == len(ivs)
        and set(idx) == set(ivs),
        f"{where}: block {block.name!r} must write its buffer at exactly its iteration variables",
    )
    return idx


def _drop_block(func: PrimFunc, name: str, buf: Buffer | None) -> PrimFunc:
    path, _ = find_block(func.body, name)
    body = set_at(func.body, nest_root(func.body, path), None)
    if body is None:
        raise ScheduleError(f"cannot remove block {name!r}: it is the only block")
    allocs = tuple(b for b in func.allocs if b != buf) if buf is not None else func.allocs
    return replace(func, body=body, allocs=allocs)


def _check_inputs_unchanged(func: PrimFunc, block: Block, consumers: list[Block], where: str) -> None:
    """Inlining evaluates the block's expression where each consumer runs, so no block in between
    may write what the block reads. Blocks in between that only read its output (other consumers)
    are fine: they are rewritten too."""
    ordered = blocks(func.body)
    names = [b.name for b in ordered]
    inputs = set(block_reads(block))
    for c in consumers:
        for other in ordered[names.index(block.name) + 1 : names.index(c.name)]:
            changed = sorted(b.name for b in inputs & set(block_writes(other)))
            check(
                not changed,
                f"{where}: block {other.name!r} changes {changed}, an input of {block.name!r}, "
                f"before {c.name!r} reads it",
            )


def compute_inline(func: PrimFunc, name: str) -> PrimFunc:
    """Replace every read of the block's buffer by the block's expression."""
    where = f"compute_inline({name!r})"
    _, block = find_block(func.body, name)
    write_vars = _check_elementwise(block, where)
    buf = block.body.buffer
    check(buf not in func.params, f"{where}: block writes the function output {buf.name}")
    check(buf not in {ld.buffer for ld in block_loads(block)}, f"{where}: block reads its own output")
    check(len(writers(func.body, buf)) == 1, f"{where}: {buf.name} has several producers")
    consumers = readers(func.body, buf)
    _check_inputs_unchanged(func, block, consumers, where)

    def inline_load(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.buffer == buf:
            return substitute(block.body.value, dict(zip(write_vars, e.indices)))
        return None

    def rewrite(b: Block) -> Block:
        if b.name == name or b not in consumers:
            return b
        nb = map_block_exprs(b, inline_load)
        return map_block_exprs(
            nb,
            lambda e: (
                None if not isinstance(e, Load) else Load(e.buffer, tuple(simplify(i) for i in e.indices))
            ),
        )

    func = replace(func, body=map_blocks(func.body, rewrite))
    return _drop_block(func, name, buf)


def reverse_compute_inline(func: PrimFunc, name: str) -> PrimFunc:
    """Fold an elementwise consumer into its only producer, which then writes the consumer's output."""
    where = f"reverse_compute_inline({name!r})"
    _, block = find_block(func.body, name)
    _check_elementwise(block, where)
    inter = [ld for ld in block_loads(block) if ld.buffer not in func.params]
    bufs = {ld.buffer for ld in inter}
    check(
        len(bufs) == 1 and len(inter) == 1,
        f"{where}: block must read exactly one intermediate buffer, once; "
        f"it reads {sorted(b.name for b in bufs)}",
    )
    read = inter[0]
    buf = read.buffer
    producers = writers(func.body, buf)
    check(len(producers) == 1, f"{where}: {buf.name} must have exactly one producer")
    producer = producers[0]
    p_vars = _check_elementwise(producer, where)
    check(len(readers(func.body, buf)) == 1, f"{where}: {buf.name} is read by other blocks too")
    c_vars = [iv.var for iv in block.iter_vars]
    read_vars = [i for i in read.indices if isinstance(i, Var)]
    check(
        len(read_vars) == len(read.indices) and sorted(map(str, read_vars)) == sorted(map(str, c_vars)),
        f"{where}: block must read {buf.name} at exactly its iteration variables",
    )
    c_ext = {iv.var: iv.extent for iv in block.iter_vars}
    p_ext = {iv.var: iv.extent for iv in producer.iter_vars}
    check(
        all(c_ext[cv] == p_ext[p_vars[d]] for d, cv in enumerate(read_vars)),
        f"{where}: block {name!r} and producer {producer.name!r} iterate over different extents",
    )
    # The consumer's variable at read position d becomes the producer's write variable at position d;
    # substitution is simultaneous, so equal names in the two blocks cannot capture each other.
    to_producer: dict[Var, Expr] = {cv: p_vars[d] for d, cv in enumerate(read_vars)}
    mapped_read = Load(buf, tuple(p_vars))
    value = substitute(block.body.value, to_producer)
    value = map_expr(value, lambda e: producer.body.value if structural_equal(e, mapped_read) else None)
    store = BufferStore(
        block.body.buffer,
        simplify(value),
        tuple(simplify(substitute(i, to_producer)) for i in block.body.indices),
    )
    order = [b.name for b in blocks(func.body)]
    between = order[order.index(producer.name) + 1 : order.index(name)]
    for other in blocks(func.body):
        check(
            other.name not in between or not conflicts(block, other),
            f"{where}: block {other.name!r} conflicts with {name!r} between producer and consumer",
        )
    new_producer = replace(producer, body=store)
    func = replace(func, body=map_blocks(func.body, lambda b: new_producer if b.name == producer.name else b))
    return _drop_block(func, name, buf)
