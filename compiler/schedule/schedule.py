"""The Schedule: apply primitives to a PrimFunc and record each call in a Trace.

Handles (random variables) are immutable: a BlockRV names a block, a LoopRV names a loop variable.
Loop names are never reused within a schedule, so a handle to a loop that a primitive removed fails
clearly instead of silently pointing at another loop. Each primitive checks its handles, calls its
transform and records the call through its registered kind (kinds.py), which is also how a trace
replays it.

A block renamed by a primitive (decompose_reduction's update, `Y` to `Y_update` as in TVM) keeps
the name its handles know it by in the program itself (`Block.former_name`), not in a map here:
handles, traces, and the schedule rules' lookups in `sch.func` made before the rename still find
it, a copy or a replay needs no state beside the program, and no new block takes that name.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from itertools import islice
from typing import Any

from compiler.arith import extent_range
from compiler.ir import Block, Buffer, For, IRModule, PrimFunc, Stmt, Var
from compiler.names import unique_name
from compiler.schedule import (
    buffer_layout,
    cache,
    compute_location,
    inline,
    kinds,
    loop_transform,
    reduction,
    rfactor,
    sampling,
    tensorize,
)
from compiler.schedule.errors import ScheduleError, check
from compiler.schedule.index_map import IndexMap, index_map_of
from compiler.schedule.instruction import InstructionKind, is_int
from compiler.schedule.rv import RV, BlockRV, IntRV, LoopRV
from compiler.schedule.trace import Trace
from compiler.schedule.tree import (
    find_block,
    find_loop,
    loop_iter_kinds,
    loops_above,
    nodes,
)
from compiler.visit import block_reads, block_writes, blocks, map_blocks

ROOT = "root"


class Schedule:
    """A PrimFunc being scheduled. `func` is the current program, `trace` how it was obtained."""

    def __init__(self, func: PrimFunc | IRModule, seed: int | None = None) -> None:
        """Schedule `func` (or the one function of a module, as TVM's `Schedule(mod)`). Sampling
        draws from a generator seeded with `seed`, or from the OS's entropy when it is None (TVM's
        default), so that a search loop over fresh schedules explores; the trace records every
        decision either way, so replay is exact."""
        if isinstance(func, IRModule):
            check(len(func) == 1, f"a Schedule works on one function; the module holds {', '.join(func)}")
            func = func.functions[0]
        self.original = func
        self.func = func
        self.trace = Trace()
        self.rng = random.Random(seed)
        self._used = {s.var.name for _, s in nodes(func.body) if isinstance(s, For)}
        self._used |= {v.name for v in func.size_vars}  # a loop never takes a dimension's name
        self._count = 0

    # --- bookkeeping ----------------------------------------------------------------------------
    def _rv(self, prefix: str) -> str:
        name = f"{prefix}{self._count}"
        self._count += 1
        return name

    def _fresh(self, base: str) -> Var:
        name = unique_name(base, self._used)
        self._used.add(name)
        return Var(name)

    def _record(
        self, kind: InstructionKind, args: dict[str, Any], outputs: Sequence[RV] = (), decision: Any = None
    ) -> None:
        self.trace = self.trace.append(kind.instruction(args, outputs, decision))

    def _block(self, handle_name: str) -> BlockRV:
        """A new handle; `handle_name` is the block's `handle_name`, so that every handle of a block
        names it alike, before and after a rename (the rules compare them by name)."""
        return BlockRV(self._rv(BlockRV.PREFIX), handle_name)

    def _loop(self, name: str) -> LoopRV:
        return LoopRV(self._rv(LoopRV.PREFIX), name)

    def _loop_name(self, loop: LoopRV) -> str:
        if not isinstance(loop, LoopRV):
            raise ScheduleError(f"expected a LoopRV, got {type(loop).__name__} {loop!r}")
        find_loop(self.func.body, loop.name)
        return loop.name

    def _block_name(self, block: BlockRV) -> str:
        """The block's name in the program now, which the transforms take: a handle made before
        decompose_reduction renamed the block holds its former name."""
        if not isinstance(block, BlockRV):
            raise ScheduleError(f"expected a BlockRV, got {type(block).__name__} {block!r}")
        if block.name == ROOT:
            return ROOT
        return find_block(self.func.body, block.name)[1].name

    @property
    def mod(self) -> IRModule:
        """The current program as a module of one function, as TVM's `sch.mod`."""
        return IRModule((self.func,))

    # --- queries --------------------------------------------------------------------------------
    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        """The block called `name`, or renamed from it (a trace stored before decompose_reduction
        named its update block `<name>_update` calls it `name`); `func_name`, as TVM spells it, must
        name the function scheduled."""
        if func_name is not None:
            check(func_name == self.func.name, f"this Schedule works on {self.func.name}, not {func_name}")
        out = self._block(name if name == ROOT else find_block(self.func.body, name)[1].handle_name)
        self._record(kinds.GET_BLOCK, {"name": name}, [out])
        return out

    def get(self, rv: RV | int) -> int | Block | For:
        """What a handle stands for now, as TVM's `sch.get`: a sampled integer's value, the block,
        the loop."""
        if isinstance(rv, BlockRV):
            return find_block(self.func.body, self._block_name(rv))[1]
        if isinstance(rv, LoopRV):
            return find_loop(self.func.body, self._loop_name(rv))[1]
        check(isinstance(rv, int), f"expected a handle of this schedule, got {type(rv).__name__} {rv!r}")
        assert isinstance(rv, int)
        return int(rv)

    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        path, _ = find_block(self.func.body, self._block_name(block))
        outs = [self._loop(lp.var.name) for _, lp in loops_above(self.func.body, path)]
        self._record(kinds.GET_LOOPS, {"block": block}, outs)
        return outs

    def get_innermost_loop(self, block: BlockRV) -> LoopRV:
        """The innermost loop of the block's own nest (one whose body is the block), as one output.
        `get_loops` records how many loops there were, and a block moved under a tile has one loop
        per dimension its region spans more than once, so a tile decision changed by the search
        changes the count and the trace would not replay (16% of the tile mutations of default
        schedules, which vectorize a write-back). Refused where the block has no loop of its own:
        the loop above it holds other statements too, a different loop from the one meant."""
        name = self._block_name(block)
        path, _ = find_block(self.func.body, name)
        loops = loops_above(self.func.body, path)
        own = bool(loops) and isinstance(loops[-1][1].body, Block) and loops[-1][1].body.name == name
        check(own, f"block {block.name!r} has no loop of its own")
        out = self._loop(loops[-1][1].var.name)
        self._record(kinds.GET_INNERMOST_LOOP, {"block": block}, [out])
        return out

    def get_child_blocks(self, parent: BlockRV | LoopRV) -> list[BlockRV]:
        """Blocks under a loop, or every block of the function for the root block."""
        scope: Stmt
        if isinstance(parent, LoopRV):
            scope = find_loop(self.func.body, self._loop_name(parent))[1]
        else:
            check(
                self._block_name(parent) == ROOT, f"block {parent.name!r} is a leaf: it has no child blocks"
            )
            scope = self.func.body
        outs = [self._block(b.handle_name) for b in blocks(scope)]
        self._record(kinds.GET_CHILD_BLOCKS, {"parent": parent}, outs)
        return outs

    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        """The other blocks that write what `block` reads, in program order (TVM's get_producers)."""
        return self._neighbours(block, kinds.GET_PRODUCERS, block_reads, block_writes)

    def get_consumers(self, block: BlockRV) -> list[BlockRV]:
        """The other blocks that read what `block` writes, in program order (TVM's get_consumers)."""
        return self._neighbours(block, kinds.GET_CONSUMERS, block_writes, block_reads)

    def _neighbours(
        self,
        block: BlockRV,
        kind: InstructionKind,
        own: Callable[[Block], list[Buffer]],
        theirs: Callable[[Block], list[Buffer]],
    ) -> list[BlockRV]:
        _, blk = find_block(self.func.body, self._block_name(block))
        mine = set(own(blk))
        others = [b for b in blocks(self.func.body) if b.name != blk.name and mine & set(theirs(b))]
        outs = [self._block(b.handle_name) for b in others]
        self._record(kind, {"block": block}, outs)
        return outs

    # --- loop transformations -------------------------------------------------------------------
    def split(self, loop: LoopRV, factors: Sequence[int | None]) -> list[LoopRV]:
        plain = [int(f) if isinstance(f, IntRV) else f for f in factors]  # the trace keeps the IntRVs
        self.func, names = loop_transform.split(self.func, self._loop_name(loop), plain, self._fresh)
        outs = [self._loop(n) for n in names]
        self._record(kinds.SPLIT, {"loop": loop, "factors": list(factors)}, outs)
        return outs

    def fuse(self, *loops: LoopRV) -> LoopRV:
        self.func, name = loop_transform.fuse(self.func, [self._loop_name(lp) for lp in loops], self._fresh)
        out = self._loop(name)
        self._record(kinds.FUSE, {"loops": list(loops)}, [out])
        return out

    def reorder(self, *loops: LoopRV) -> None:
        self.func = loop_transform.reorder(self.func, [self._loop_name(lp) for lp in loops])
        self._record(kinds.REORDER, {"loops": list(loops)})

    def _set_kind(self, kind: str, loop: LoopRV, record_as: InstructionKind) -> None:
        self.func = loop_transform.set_kind(self.func, self._loop_name(loop), kind)
        self._record(record_as, {"loop": loop})

    def parallel(self, loop: LoopRV) -> None:
        self._set_kind("parallel", loop, kinds.PARALLEL)

    def vectorize(self, loop: LoopRV) -> None:
        self._set_kind("vectorized", loop, kinds.VECTORIZE)

    def unroll(self, loop: LoopRV) -> None:
        self._set_kind("unrolled", loop, kinds.UNROLL)

    def annotate(self, target: BlockRV | LoopRV, key: str, value: Any) -> None:
        """Attach a key/value to a loop, a block, or the root block (e.g. search hints)."""
        check(isinstance(key, str), f"annotate of {target.name!r}: key must be a string, got {key!r}")
        check(
            isinstance(value, (int, float, str, bool)),
            f"annotate {key!r} of {target.name!r}: value must be a JSON scalar, got {value!r}",
        )
        stored = int(value) if isinstance(value, IntRV) else value  # the trace keeps the RV
        if isinstance(target, LoopRV):
            self.func = loop_transform.annotate_loop(self.func, self._loop_name(target), key, stored)
        elif (name := self._block_name(target)) == ROOT:
            attrs = tuple((k, v) for k, v in self.func.attrs if k != key) + ((key, stored),)
            self.func = replace(self.func, attrs=attrs)
        else:
            self._annotate_block(name, key, stored)
        self._record(kinds.ANNOTATE, {"target": target, "key": key, "value": value})

    def _annotate_block(self, name: str, key: str, value: Any) -> None:
        def fn(b: Block) -> Block:
            if b.name != name:
                return b
            return replace(
                b, annotations=tuple((k, v) for k, v in b.annotations if k != key) + ((key, value),)
            )

        self.func = replace(self.func, body=map_blocks(self.func.body, fn))

    # --- compute location -----------------------------------------------------------------------
    def compute_at(self, block: BlockRV, loop: LoopRV) -> None:
        if loop.name != ROOT:
            self.func = compute_location.compute_at(
                self.func, self._block_name(block), self._loop_name(loop), self._fresh
            )
        self._record(kinds.COMPUTE_AT, {"block": block, "loop": loop})

    def reverse_compute_at(self, block: BlockRV, loop: LoopRV) -> None:
        if loop.name != ROOT:
            self.func = compute_location.reverse_compute_at(
                self.func, self._block_name(block), self._loop_name(loop), self._fresh
            )
        self._record(kinds.REVERSE_COMPUTE_AT, {"block": block, "loop": loop})

    def compute_inline(self, block: BlockRV) -> None:
        self.func = inline.compute_inline(self.func, self._block_name(block))
        self._record(kinds.COMPUTE_INLINE, {"block": block})

    def reverse_compute_inline(self, block: BlockRV) -> None:
        self.func = inline.reverse_compute_inline(self.func, self._block_name(block))
        self._record(kinds.REVERSE_COMPUTE_INLINE, {"block": block})

    # --- buffers and reductions -----------------------------------------------------------------
    def cache_read(self, block: BlockRV, read_buffer_index: int, scope: str = "global") -> BlockRV:
        self.func, name = cache.cache_read(
            self.func, self._block_name(block), read_buffer_index, scope, self._fresh
        )
        out = self._block(name)
        self._record(
            kinds.CACHE_READ, {"block": block, "read_buffer_index": read_buffer_index, "scope": scope}, [out]
        )
        return out

    def cache_write(self, block: BlockRV, write_buffer_index: int, scope: str = "global") -> BlockRV:
        self.func, name = cache.cache_write(
            self.func, self._block_name(block), write_buffer_index, scope, self._fresh
        )
        out = self._block(name)
        self._record(
            kinds.CACHE_WRITE,
            {"block": block, "write_buffer_index": write_buffer_index, "scope": scope},
            [out],
        )
        return out

    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Move the reduction's init into a block `<name>_init` before `loop`; returns its handle.
        The block becomes the update, `<name>_update` as TVM names it, and `block` (or any handle,
        or `get_block` of its old name) still points at it."""
        self.func, name = reduction.decompose_reduction(
            self.func, self._block_name(block), self._loop_name(loop), self._fresh
        )
        out = self._block(name)
        self._record(kinds.DECOMPOSE_REDUCTION, {"block": block, "loop": loop}, [out])
        return out

    def rfactor(self, loop: LoopRV, factor_axis: int) -> BlockRV:
        """Factor the reduction under `loop` along it (TVM's rfactor): a new block of partial results
        with the loop as a spatial axis at `factor_axis` of a new buffer, and the original block
        reducing them; returns the new block."""
        check(is_int(factor_axis), f"rfactor: factor_axis must be an int, got {factor_axis!r}")
        self.func, name = rfactor.rfactor(self.func, self._loop_name(loop), factor_axis, self._fresh)
        out = self._block(name)
        self._record(kinds.RFACTOR, {"loop": loop, "factor_axis": factor_axis}, [out])
        return out

    # --- buffer layout and storage --------------------------------------------------------------
    def transform_layout(
        self,
        block: BlockRV,
        buffer: tuple[str, int] | list[object] | str,
        index_map: str | Callable[..., object] | IndexMap,
    ) -> None:
        """Store an intermediate buffer of `block` (("read", i), ("write", 0) or its name) at the
        indices `index_map` gives (TVM's transform_layout: a lambda, or its text), e.g.
        `lambda i, j: (j // 16, i, j % 16)` to pack a panel in the order a tile reads it."""
        name = self._block_name(block)
        what = f"transform_layout of block {name!r}"
        buf = buffer_layout.block_buffer(self.func, name, buffer, what)
        imap = index_map_of(index_map, [f"i{d}" for d in range(len(buf.shape))])
        self.func = buffer_layout.transform_layout(self.func, buf, imap, what)
        ref = list(buffer) if isinstance(buffer, (tuple, list)) else buffer
        self._record(kinds.TRANSFORM_LAYOUT, {"block": block, "buffer": ref, "index_map": imap.text()})

    def storage_align(self, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int) -> None:
        """Pad the strides of the buffer `block` writes so that the stride of `axis` is `offset`
        modulo `factor` elements (TVM's storage_align: rows that do not share cache sets)."""
        name = self._block_name(block)
        what = f"storage_align of block {name!r}"
        for value in (buffer_index, axis, factor, offset):
            check(is_int(value), f"{what}: expected ints, got {value!r}")
        buf = buffer_layout.block_buffer(self.func, name, ("write", buffer_index), what)
        self.func = buffer_layout.storage_align(self.func, name, buf, axis, factor, offset, what)
        self._record(
            kinds.STORAGE_ALIGN,
            {"block": block, "buffer_index": buffer_index, "axis": axis, "factor": factor, "offset": offset},
        )

    def set_scope(self, block: BlockRV, buffer_index: int, storage_scope: str) -> None:
        """Put the buffer `block` writes in `storage_scope` ("global" or "local", TVM's set_scope)."""
        name = self._block_name(block)
        what = f"set_scope of block {name!r}"
        check(is_int(buffer_index), f"{what}: buffer_index must be an int, got {buffer_index!r}")
        buf = buffer_layout.block_buffer(self.func, name, ("write", buffer_index), what)
        self.func = buffer_layout.set_scope(self.func, buf, storage_scope, what)
        self._record(
            kinds.SET_SCOPE, {"block": block, "buffer_index": buffer_index, "storage_scope": storage_scope}
        )

    def tensorize(self, loop: LoopRV, tensor_intrin: str) -> None:
        """Compute the nest under `loop` with a registered tensor intrinsic (TVM's tensorize of a
        loop; `compiler.tensor_intrin`): the nest must compute what the intrinsic describes."""
        check(
            isinstance(loop, LoopRV),
            f"tensorize takes the loop whose nest the intrinsic computes, got {type(loop).__name__} {loop!r}",
        )
        check(
            isinstance(tensor_intrin, str),
            f"tensorize: the intrinsic is named by a string, got {tensor_intrin!r}",
        )
        self.func = tensorize.tensorize(self.func, self._loop_name(loop), tensor_intrin)
        self._record(kinds.TENSORIZE, {"loop": loop, "tensor_intrin": tensor_intrin})

    # --- stochastic primitives ------------------------------------------------------------------
    def sample_perfect_tile(
        self, loop: LoopRV, n: int, max_innermost_factor: int = 16, decision: list[int] | None = None
    ) -> list[IntRV]:
        """n tile sizes whose product is the loop's extent; a stale decision is repaired, not refused."""
        where = f"sample_perfect_tile of loop {loop.name!r}"
        _, lp = find_loop(self.func.body, self._loop_name(loop))
        # A symbolic extent is tiled for the largest value of its range (see `sampling.covering_tile`).
        extent = extent_range(lp.extent)[1] + 1
        repair = sampling.repair_perfect_tile if isinstance(lp.extent, int) else sampling.covering_tile
        tiles = self._tiles(where, extent, n, max_innermost_factor, decision, repair)
        outs = [IntRV(t, self._rv(IntRV.PREFIX)) for t in tiles]
        self._record(
            kinds.SAMPLE_PERFECT_TILE,
            {"loop": loop, "n": n, "max_innermost_factor": max_innermost_factor},
            outs,
            tiles,
        )
        return outs

    def sample_covering_tile(
        self,
        loop: LoopRV,
        n: int,
        max_innermost_factor: int,
        multiple: int,
        decision: list[int] | None = None,
    ) -> list[IntRV]:
        """n tile sizes whose product is the loop's static extent rounded up to a multiple of
        `multiple`: tiles that need not divide an awkward extent (197 rows in tiles of 8), the split
        guarding the last one, as it does a symbolic extent's."""
        where = f"sample_covering_tile of loop {loop.name!r}"
        _, lp = find_loop(self.func.body, self._loop_name(loop))
        if not isinstance(lp.extent, int):
            raise ScheduleError(f"{where}: the loop's extent {lp.extent} is not static")
        check(is_int(multiple) and multiple >= 1, f"{where}: multiple must be an int >= 1, got {multiple!r}")
        extent = sampling.covered_extent(lp.extent, multiple)
        tiles = self._tiles(where, extent, n, max_innermost_factor, decision, sampling.repair_perfect_tile)
        outs = [IntRV(t, self._rv(IntRV.PREFIX)) for t in tiles]
        self._record(
            kinds.SAMPLE_COVERING_TILE,
            {"loop": loop, "n": n, "max_innermost_factor": max_innermost_factor, "multiple": multiple},
            outs,
            tiles,
        )
        return outs

    def _tiles(
        self,
        where: str,
        extent: int,
        n: int,
        max_innermost_factor: int,
        decision: list[int] | None,
        repair: Callable[[int, int, int, list[int]], list[int]],
    ) -> list[int]:
        """n tiles of `extent`: drawn, or `decision` repaired for it."""
        check(n >= 1, f"{where}: n must be >= 1")
        check(
            max_innermost_factor == -1 or max_innermost_factor >= 1,
            f"{where}: max_innermost_factor must be -1 (no limit) or >= 1, got {max_innermost_factor}",
        )
        if decision is None:
            return sampling.sample_perfect_tile(extent, n, max_innermost_factor, self.rng)
        check(
            sampling.is_tile_decision(decision, n), f"{where}: decision {decision!r} is not {n} positive ints"
        )
        return repair(extent, n, max_innermost_factor, list(decision))

    def sample_categorical(
        self, candidates: list[int], probs: list[float], decision: int | None = None
    ) -> IntRV:
        """One of `candidates` drawn with `probs`; the decision is the chosen index. A stale index
        (out of range, or of probability 0) is repaired to the nearest one that could be drawn."""
        check(len(candidates) == len(probs) > 0, "sample_categorical: candidates and probs differ in length")
        check(all(is_int(c) for c in candidates), f"sample_categorical: candidates {candidates} are not ints")
        check(
            all(p >= 0 for p in probs) and sum(probs) > 0, "sample_categorical: probs must be >= 0, not all 0"
        )
        if decision is None:
            decision = sampling.sample_categorical(list(probs), self.rng)
        else:
            check(is_int(decision), f"sample_categorical: decision {decision!r} is not an index")
            decision = sampling.repair_categorical(decision, list(probs))
        out = IntRV(candidates[decision], self._rv(IntRV.PREFIX))
        self._record(
            kinds.SAMPLE_CATEGORICAL, {"candidates": list(candidates), "probs": list(probs)}, [out], decision
        )
        return out

    def sample_compute_location(self, block: BlockRV, decision: int | None = None) -> LoopRV:
        """A loop where compute_at(block, loop) is legal, or the root (decision -1: stay in place).

        The decision indexes `compute_location_candidates`. A stale decision falls back to the
        nearest valid one. Replaying a decision checks only the candidates up to it (none for -1):
        each check is a compute_at's worth of region inference."""
        self._block_name(block)
        if decision is None:
            options = self.compute_location_candidates(block)
            decision = self.rng.randrange(-1, len(options))
        check(
            is_int(decision),
            f"sample_compute_location of block {block.name!r}: decision {decision!r} is not an index",
        )
        options = list(islice(self._compute_locations(block), max(0, decision + 1)))
        decision = max(-1, min(decision, len(options) - 1))
        name = ROOT if decision < 0 else options[decision]
        out = self._loop(name)
        self._record(kinds.SAMPLE_COMPUTE_LOCATION, {"block": block}, [out], decision)
        return out

    def compute_location_candidates(self, block: BlockRV) -> list[str]:
        """The loops above the block's first consumer where compute_at is legal, outermost first, as
        MetaSchedule chooses them: unit loops are skipped, and the list ends at a spatial loop that
        follows a reduction loop, or at a reduction loop that no spatial loop follows. Deeper, the
        producer would be recomputed at every step of loops its region does not depend on.

        It also ends at a vectorized loop (MetaSchedule vectorizes after choosing locations, so it
        never offers one): there the producer would run once per lane, its loops inside a loop LLVM
        must vectorize. A BERT softmax's row sum placed so ran 64 times per row and scalar, 50x
        slower than its best, and LLVM warned at every such build."""
        return list(self._compute_locations(block))

    def _compute_locations(self, block: BlockRV) -> Iterator[str]:
        name = self._block_name(block)
        _, b = find_block(self.func.body, name)
        consumers = [c for c in blocks(self.func.body) if b.body.buffer in block_reads(c) and c.name != name]
        if not consumers or b.body.buffer in self.func.params:
            return
        path, _ = find_block(self.func.body, consumers[0].name)
        loops = [lp for _, lp in loops_above(self.func.body, path)]
        by_var = loop_iter_kinds(self.func.body)
        kinds = [by_var.get(lp.var, "S") for lp in loops]
        last_spatial = max((k for k, kind in enumerate(kinds) if kind == "S"), default=-1)
        seen_reduction = False
        for k, (lp, kind) in enumerate(zip(loops, kinds)):
            if lp.kind == "vectorized":
                return
            if lp.extent == 1:
                continue
            if kind == "S" and seen_reduction:
                return
            if kind != "S":
                seen_reduction = True
                if k > last_spatial:
                    return
            if compute_location.can_compute_at(self.func, name, lp.var.name):
                yield lp.var.name

    def copy(self) -> Schedule:
        other = Schedule.__new__(Schedule)
        other.__dict__.update(self.__dict__)
        other._used = set(self._used)
        other.rng = random.Random()
        other.rng.setstate(self.rng.getstate())
        return other
