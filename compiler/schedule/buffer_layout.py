"""How an intermediate buffer is stored: transform_layout (its elements moved by an index map),
storage_align (its strides padded) and set_scope (its storage scope), as TVM spells them.

Each works on a buffer the function allocates, never on a parameter: a parameter's layout is the
function's interface with its caller (and the reference every candidate is checked against). To lay
out an input differently, stage it first (`cache_read`) and transform the copy: that is packing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from compiler.arith import simplify
from compiler.ir import SCOPES, Allocate, Block, Buffer, BufferStore, Expr, Load, PrimFunc, Stmt
from compiler.schedule.errors import check
from compiler.schedule.index_map import IndexMap
from compiler.schedule.tree import find_block
from compiler.visit import block_reads, map_block_exprs, map_blocks, map_stmt, map_store

MAX_CHECKED_ELEMENTS = 1 << 24  # a map is checked one to one by evaluating it at every element
ALIGN_KEY = "buffer_dim_align"  # the block attribute storage_align sets, TVM's name
IndexFn = Callable[[tuple[Expr, ...]], tuple[Expr, ...]]


def block_buffer(func: PrimFunc, block_name: str, ref: object, what: str) -> Buffer:
    """The buffer that `ref` names for a block, as TVM names it: ("read", i) is the i-th buffer the
    block reads (the accumulator of a reduction is its output, not a read, as in cache_read),
    ("write", 0) the one it writes, or a buffer's name."""
    _, block = find_block(func.body, block_name)
    reads = [b for b in block_reads(block) if b != block.body.buffer]
    if isinstance(ref, str):
        named = [b for b in [*reads, block.body.buffer] if b.name == ref]
        check(bool(named), f"{what}: block {block_name!r} does not use a buffer called {ref!r}")
        return named[0]
    check(
        isinstance(ref, (tuple, list)) and len(ref) == 2 and ref[0] in ("read", "write") and _is_int(ref[1]),
        f"{what}: a buffer is ('read', i), ('write', 0) or a buffer's name, got {ref!r}",
    )
    assert isinstance(ref, (tuple, list))
    kind, index = ref
    if kind == "write":
        check(index == 0, f"{what}: block {block_name!r} writes one buffer; index {index}")
        return block.body.buffer
    check(
        0 <= index < len(reads),
        f"{what}: read index {index} out of range; block {block_name!r} reads {[b.name for b in reads]}",
    )
    return reads[index]


def transform_layout(func: PrimFunc, buf: Buffer, index_map: IndexMap, what: str) -> PrimFunc:
    """Store `buf`'s element at `idx` at `index_map(idx)` of a new buffer of the map's range: every
    load and store of it is rewritten, so the program computes what it computed. The map must be one
    to one over the buffer's shape (checked at every element) and land on indices >= 0."""
    _check_allocated(func, buf, what)
    check(buf.is_static, f"{what}: {buf.name} has a symbolic shape; a layout is mapped over a static one")
    check(
        len(index_map.params) == len(buf.shape),
        f"{what}: the map takes {len(index_map.params)} indices, {buf.name} has rank {len(buf.shape)}",
    )
    new = Buffer(buf.name, _image_shape(buf, index_map, what), buf.dtype, buf.scope)
    return _rebuffer(func, buf, new, lambda idx: tuple(simplify(e) for e in index_map.apply(idx)))


def storage_align(
    func: PrimFunc, block_name: str, buf: Buffer, axis: int, factor: int, offset: int, what: str
) -> PrimFunc:
    """Ask that `buf`'s stride at `axis` be `offset` modulo `factor` (in elements), as TVM's
    storage_align: recorded on the writing block (TVM's `buffer_dim_align` attribute) and carried out
    at lowering, once the buffer has its compacted shape (see `compiler.storage_align`)."""
    _check_allocated(func, buf, what)
    check(
        0 <= axis < len(buf.shape) - 1,
        f"{what}: axis must be in [0, {len(buf.shape) - 1}) for {buf.name} of rank {len(buf.shape)} "
        "(the last axis has stride 1)",
    )
    check(
        factor >= 1 and 0 <= offset < factor,
        f"{what}: need factor >= 1 and 0 <= offset < factor, got {factor}, {offset}",
    )
    _, block = find_block(func.body, block_name)
    check(block.body.buffer == buf, f"{what}: block {block_name!r} does not write {buf.name}")
    requests = dict(parse_alignment(str(dict(block.annotations).get(ALIGN_KEY, ""))))
    requests[axis] = (factor, offset)
    text = ";".join(f"{a}:{f}:{o}" for a, (f, o) in sorted(requests.items()))
    annotations = tuple((k, v) for k, v in block.annotations if k != ALIGN_KEY) + ((ALIGN_KEY, text),)
    body = map_blocks(func.body, lambda b: replace(b, annotations=annotations) if b.name == block_name else b)
    return replace(func, body=body)


def parse_alignment(text: str) -> list[tuple[int, tuple[int, int]]]:
    """The (axis, (factor, offset)) requests of a `buffer_dim_align` attribute, "axis:factor:offset;..."."""
    out = []
    for part in filter(None, text.split(";")):
        fields = part.split(":")
        check(
            len(fields) == 3 and all(f.isdigit() for f in fields),
            f"{ALIGN_KEY} {text!r}: expected axis:factor:offset entries",
        )
        axis, factor, offset = (int(f) for f in fields)
        check(factor >= 1 and offset < factor, f"{ALIGN_KEY} {text!r}: need 0 <= offset < factor")
        out.append((axis, (factor, offset)))
    return out


def set_scope(func: PrimFunc, buf: Buffer, scope: str, what: str) -> PrimFunc:
    """`buf` in storage scope `scope`: "local" keeps it on the stack (as TVM's CPU code does), where
    "global" may put a large buffer on the heap (see `compiler.codegen`)."""
    _check_allocated(func, buf, what)
    check(scope in SCOPES, f"{what}: scope {scope!r} is not a CPU storage scope; use one of {list(SCOPES)}")
    return _rebuffer(func, buf, replace(buf, scope=scope), lambda idx: idx)


def _check_allocated(func: PrimFunc, buf: Buffer, what: str) -> None:
    check(
        buf in func.allocs,
        f"{what}: {buf.name} is a parameter, whose layout is the function's interface; stage it with "
        "cache_read or cache_write and change the copy",
    )


def _image_shape(buf: Buffer, index_map: IndexMap, what: str) -> tuple[int, ...]:
    """The smallest shape holding the map's image of `buf`'s shape, checked one to one."""
    shape = tuple(d for d in buf.shape if isinstance(d, int))  # static: checked by the caller
    count = math.prod(shape)
    check(
        count <= MAX_CHECKED_ELEMENTS,
        f"{what}: {buf.name} has {count} elements, more than the {MAX_CHECKED_ELEMENTS} a map is checked on",
    )
    image = _checked_image(index_map.text(), shape)
    check(
        not isinstance(image, str), f"{what}: the map {index_map.text()} {image} on {buf.name}{list(shape)}"
    )
    assert not isinstance(image, str)
    return image


@functools.lru_cache(maxsize=256)
def _checked_image(text: str, shape: tuple[int, ...]) -> tuple[int, ...] | str:
    """The image's shape, or what is wrong with the map. Kept per (map, shape): every candidate the
    search builds replays its trace, and checking a weight panel of 2.4M elements took 2 s (a sort);
    it takes tens of milliseconds by marking each element's new place once."""
    if math.prod(shape) == 0:
        return shape
    grids = np.indices(shape, dtype=np.int64).reshape(len(shape), -1)
    images = IndexMap.parse(text).evaluate(list(grids))
    if any(int(im.min()) < 0 for im in images):
        return "gives negative indices"
    new_shape = tuple(int(im.max()) + 1 for im in images)
    taken = np.zeros(math.prod(new_shape), dtype=bool)
    taken[np.ravel_multi_index(tuple(images), new_shape)] = True
    if np.count_nonzero(taken) != math.prod(shape):
        return "sends two elements to one place"
    return new_shape


def _rebuffer(func: PrimFunc, old: Buffer, new: Buffer, indices: IndexFn) -> PrimFunc:
    """`func` with every access of `old` made an access of `new` at `indices(old indices)`."""
    allocs = tuple(new if a == old else a for a in func.allocs)
    return replace(func, body=rebuffer(func.body, old, new, indices), allocs=allocs)


def rebuffer(stmt: Stmt, old: Buffer, new: Buffer, indices: IndexFn) -> Stmt:
    """`stmt` with every load, store and allocation of `old` made one of `new`, at `indices(old's)`."""

    def load(e: Expr) -> Expr | None:
        return Load(new, indices(e.indices)) if isinstance(e, Load) and e.buffer == old else None

    def store(s: BufferStore) -> BufferStore:
        s = map_store(s, load)
        return replace(s, buffer=new, indices=indices(s.indices)) if s.buffer == old else s

    def node(s: Stmt) -> Stmt | None:
        if isinstance(s, Block):
            b = map_block_exprs(s, load)  # the predicate's loads; the stores' are mapped with them
            return replace(b, body=store(s.body), init=store(s.init) if s.init is not None else None)
        if isinstance(s, BufferStore):
            return store(s)
        if isinstance(s, Allocate) and s.buffer == old:
            return replace(s, buffer=new)
        return None

    return map_stmt(stmt, node)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
