"""Per-store features of a lowered tensor program: the fixed-length rows the cost model learns from.

Like TVM's PerStoreFeature, each BufferStore of the lowered program becomes one row describing what
it computes, the loops around it and how it walks memory (`tuner.search.access_features`). Counts are scaled
by log2(1 + x) so that a tree can split on orders of magnitude; flags, one-hots and names ending in
`_ratio` are raw.

Loops of extent 1 are dropped before the analysis (they emit no code), and so is a loop whose variable
is pinned to 0 by a guard such as the `if k == 0:` around a reduction's init: for that store it never
iterates.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from compiler.auto_unroll import unroll_budget
from compiler.dtypes import ITEMSIZE, is_float
from compiler.ir import (
    Allocate,
    Binary,
    Block,
    Buffer,
    BufferStore,
    Cast,
    Const,
    Expr,
    For,
    IfThenElse,
    PrimFunc,
    Select,
    SeqStmt,
    Stmt,
    Unary,
    Var,
    static_dim,
    structural_equal,
)
from compiler.lower import lower
from compiler.ops import Op
from compiler.target import Target
from compiler.visit import walk_expr, walk_stmt
from tuner.search.access_features import (
    BUFFER_FEATURE_NAMES,
    FOOTPRINT_LEVELS,
    AccessAnalysis,
    Loop,
    log_scale,
)

N_BUFFERS = 5  # buffers described per store, the most-touched first; TVM uses 5 as well
_KIND_COLUMNS = ("vectorized", "unrolled", "parallel")

# What the store computes, per execution times executions: the instruction mix. fma counts a float
# add whose operand is a float mul (and that pair is not counted again as add and mul).
_OP_NAMES = [
    "float_add", "float_sub", "float_mul", "float_div", "float_fma", "float_minmax", "float_cmp",
    "float_math_call", "int_addsub", "int_mul", "int_divmod", "int_minmax", "int_cmp", "bool_op",
    "select", "cast",
]  # fmt: skip
# The loop nest: how much work, and which loops became vectors, unrolled code or threads.
# `*_pos` is how many iterating loops lie inside the innermost loop of that kind.
_LOOP_NAMES = [
    "num_loops", "executions", "innermost_extent", "auto_unroll_max_step",
    *(f"{kind}_{what}" for kind in _KIND_COLUMNS for what in ("count", "prod", "innermost_extent", "pos")),
    "vector_lanes_ratio", "vector_is_lanes_multiple",
]  # fmt: skip
# Intermediate buffers alive around the store: small compacted tiles live in cache or registers.
_ALLOC_NAMES = ["alloc_count", "alloc_bytes", "target_is_alloc", "target_alloc_bytes"]
# Float ops per byte of footprint under the innermost 1, 2, 3 loops and the whole nest: how much
# computation each byte brought into cache pays for at each level.
_INTENSITY_NAMES = [*(f"intensity_l{k}" for k in range(1, FOOTPRINT_LEVELS)), "intensity_all"]
# Threads: how well the outer parallel extent fills the machine's cores.
_PARALLEL_NAMES = ["outer_parallel_extent", "parallel_cores_ratio", "parallel_balance_ratio"]

FEATURE_NAMES: list[str] = [
    *_OP_NAMES,
    *_LOOP_NAMES,
    # how each of the N_BUFFERS most-touched buffers is accessed: see tuner.search.access_features
    *(f"buf{b}_{name}" for b in range(N_BUFFERS) for name in BUFFER_FEATURE_NAMES),
    *_ALLOC_NAMES,
    *_INTENSITY_NAMES,
    *_PARALLEL_NAMES,
]
N_FEATURES = len(FEATURE_NAMES)


def extract_features(func: PrimFunc, target: Target) -> np.ndarray:
    """One float32 row of N_FEATURES per BufferStore of `func` (lowered first if it still has blocks),
    for the machine `target` describes: the width of its vectors and the threads parallel loops get."""
    if any(isinstance(s, Block) for s in walk_stmt(func.body)):
        func = lower(func)
    step = unroll_budget(func.attrs) or 0
    rows = [_store_row(ctx, target.vector_bits, target.cores) for ctx in _stores(func.body, (), (), step)]
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), N_FEATURES)


@dataclass(frozen=True)
class _StoreContext:
    store: BufferStore
    loops: tuple[Loop, ...]  # the iterating loops, outermost first
    still: tuple[Var, ...]  # variables of the loops around it that do not iterate (always 0)
    allocs: tuple[Buffer, ...]
    unroll_step: int


def _stores(
    stmt: Stmt, loops: tuple[Loop, ...], allocs: tuple[Buffer, ...], step: int
) -> Iterator[_StoreContext]:
    """Every store in execution order with the loops, allocations and unroll budget around it."""
    if isinstance(stmt, BufferStore):
        iterating = tuple(lp for lp in loops if lp.extent > 1)
        still = tuple(lp.var for lp in loops if lp.extent == 1)
        yield _StoreContext(stmt, iterating, still, allocs, step)
    elif isinstance(stmt, For):
        own = unroll_budget(stmt.annotations)
        inner = loops + (Loop(stmt.var, static_dim(stmt.extent, "the cost model's features"), stmt.kind),)
        yield from _stores(stmt.body, inner, allocs, step if own is None else own)
    elif isinstance(stmt, Allocate):
        yield from _stores(stmt.body, loops, allocs + (stmt.buffer,), step)
    elif isinstance(stmt, IfThenElse):
        pinned = _pinned_to_zero(stmt.cond)
        yield from _stores(stmt.then_case, tuple(_pin(lp, pinned) for lp in loops), allocs, step)
        if stmt.else_case is not None:
            yield from _stores(stmt.else_case, loops, allocs, step)
    else:
        assert isinstance(stmt, SeqStmt), f"unexpected statement {type(stmt).__name__} after lowering"
        for child in stmt.children():
            yield from _stores(child, loops, allocs, step)


def _pinned_to_zero(cond: Expr) -> set[Var]:
    """Variables a guard `v == 0 and w == 0 and ...` pins to zero."""
    if isinstance(cond, Binary) and cond.op == Op.AND:
        return _pinned_to_zero(cond.a) | _pinned_to_zero(cond.b)
    if (
        isinstance(cond, Binary)
        and cond.op == Op.EQ
        and isinstance(cond.a, Var)
        and structural_equal(cond.b, Const(0, "int64"))
    ):
        return {cond.a}
    return set()


def _pin(loop: Loop, pinned: set[Var]) -> Loop:
    return replace(loop, extent=1) if loop.var in pinned else loop


def _store_row(ctx: _StoreContext, vector_bits: int, cores: int) -> list[float]:
    loops = ctx.loops
    executions = math.prod(lp.extent for lp in loops)
    ops = _op_counts(ctx.store)
    analysis = AccessAnalysis(ctx.store, loops, ctx.still)
    buffer_part: list[float] = []
    for buf in analysis.most_touched(executions, N_BUFFERS):
        buffer_part += analysis.buffer_features(buf, executions)
    buffer_part += [0.0] * (N_BUFFERS * len(BUFFER_FEATURE_NAMES) - len(buffer_part))
    flops = sum(ops[name] for name in _OP_NAMES if name.startswith("float")) + ops["float_fma"]
    lanes = vector_bits // (8 * ITEMSIZE[ctx.store.buffer.dtype])
    return [
        *(log_scale(ops[name] * executions) for name in _OP_NAMES),
        *_loop_features(loops, executions, ctx.unroll_step, lanes),
        *buffer_part,
        *_alloc_features(ctx),
        *(
            log_scale(flops * analysis.iterations(k) / max(1, analysis.footprint_all(k)))
            for k in range(1, FOOTPRINT_LEVELS)
        ),
        log_scale(flops * executions / max(1, analysis.footprint_all(len(loops)))),
        *_parallel_features(loops, cores),
    ]


def _op_counts(store: BufferStore) -> dict[str, int]:
    """Operations one execution of the store performs, in its value and every index expression."""
    counts = dict.fromkeys(_OP_NAMES, 0)
    exprs = [store.value, *store.indices]
    for expr in (node for e in exprs for node in walk_expr(e)):
        if isinstance(expr, Binary | Unary):
            counts[_op_kind(expr)] += 1
        elif isinstance(expr, Select):
            counts["select"] += 1
        elif isinstance(expr, Cast):
            counts["cast"] += 1
    counts["float_mul"] -= counts["float_fma"]  # each fma's mul was counted on its own too
    return counts


def _op_kind(e: Binary | Unary) -> str:
    """The op's own column (compiler.ops), except that a float add of a product is an FMA."""
    is_add = isinstance(e, Binary) and e.op == Op.ADD and is_float(e.dtype)
    if is_add and any(isinstance(x, Binary) and x.op == Op.MUL for x in e.children()):
        return "float_fma"
    return e.op.feature(e.a.dtype)


def _loop_features(loops: Sequence[Loop], executions: int, unroll_step: int, lanes: int) -> list[float]:
    out = [
        log_scale(len(loops)),
        log_scale(executions),
        log_scale(loops[-1].extent if loops else 1),
        log_scale(unroll_step),
    ]
    vector_extent = 0
    for kind in _KIND_COLUMNS:
        positions = [i for i, lp in enumerate(loops) if lp.kind == kind]
        if not positions:
            out += [0.0] * 4
            continue
        innermost = loops[positions[-1]].extent
        if kind == "vectorized":
            vector_extent = innermost
        out += [
            log_scale(len(positions)),
            log_scale(math.prod(loops[i].extent for i in positions)),
            log_scale(innermost),
            log_scale(len(loops) - 1 - positions[-1]),
        ]
    return out + [vector_extent / lanes, float(vector_extent > 0 and vector_extent % lanes == 0)]


def _alloc_features(ctx: _StoreContext) -> list[float]:
    sizes = [buf.size * ITEMSIZE[buf.dtype] for buf in ctx.allocs]
    target = ctx.store.buffer
    is_alloc = target in ctx.allocs
    return [
        log_scale(len(sizes)),
        log_scale(sum(sizes)),
        float(is_alloc),
        log_scale(target.size * ITEMSIZE[target.dtype] if is_alloc else 0),
    ]


def _parallel_features(loops: Sequence[Loop], cores: int) -> list[float]:
    """Threads: the parallel extent, its ratio to the cores, and the share of core-time busy when the
    iterations are dealt out evenly (1.0 = every core equally loaded)."""
    if not any(lp.kind == "parallel" for lp in loops):
        return [0.0, 0.0, 0.0]
    extent = math.prod(lp.extent for lp in loops if lp.kind == "parallel")
    return [log_scale(extent), extent / cores, extent / (math.ceil(extent / cores) * cores)]
