"""The default schedule: the default rules with every choice made by a heuristic instead of at random.

`graph.build` compiles every fused kernel of a model; a kernel it is given no schedule for gets this
one (TVM's build falls back on its `dlight` rules so). It is deterministic (no sampling, no
measurement) and is a traced Schedule like any other: its trace stores and replays as a tuned one
does, and a search may start from it.

If a rule refuses on a function, the schedule falls back to parallel outer loops and vectorized inner
ones, block by block, keeping what succeeds; it never raises for a valid PrimFunc."""

from __future__ import annotations

from collections.abc import Mapping

from compiler.ir import PrimFunc, SizeVar
from compiler.schedule import Schedule, ScheduleError, TraceError
from compiler.schedule_rules.analysis import loop_kinds
from compiler.schedule_rules.config import RuleConfig
from compiler.schedule_rules.heuristic import Heuristic
from compiler.schedule_rules.parallel_vectorize import parallelize_vectorize
from compiler.schedule_rules.rule import RuleContext, apply_rules, attempt, block_names
from compiler.schedule_rules.rules import DEFAULT_RULES
from compiler.schedule_rules.unroll import annotate_unroll
from compiler.target import Target


def default_schedule(func: PrimFunc, target: Target) -> Schedule:
    """The rules with heuristic choices for `target`; a simpler schedule where a rule refuses."""
    if func.size_vars:
        return symbolic_schedule(func, target)
    cfg = RuleConfig.for_target(target)
    decide = Heuristic(cfg, target.cores)
    sch = Schedule(func, seed=0)
    try:
        apply_rules(sch, DEFAULT_RULES, RuleContext(cfg, decide))
        return sch
    except ScheduleError:
        pass
    sch = Schedule(func, seed=0)
    for name in reversed(block_names(sch)):
        try:
            parallelize_vectorize(sch, name, cfg, decide)
        except ScheduleError:
            continue  # a primitive that refuses changes nothing: the block keeps its loops
    annotate_unroll(sch, decide, cfg.unroll_steps)
    return sch


# The size a symbolic dimension is scheduled at: there the heuristic gives a matmul a register tile of
# several rows (8 x 48 on AVX-512) and packs the panels of B, as it does for every longer length;
# the split tiles cover the whole range (`sampling.covering_tile`). A (n, 768) x (768, 768) matmul so
# scheduled ran n = 64 to 512 at 1.00-1.10x the static kernels (bench/results/2026-11-29.md); shorter
# lengths need schedules of their own (`compiler.buckets`).
REPRESENTATIVE_SIZE = 32


def symbolic_schedule(func: PrimFunc, target: Target, at: Mapping[SizeVar, int] | None = None) -> Schedule:
    """A function with symbolic dimensions: the default schedule of the function with each dimension
    at its size in `at`, else at `REPRESENTATIVE_SIZE` (within its range), replayed on the symbolic
    function, where a split of a symbolic loop keeps its static inner tiles and runs as many outer
    tiles as the run-time length needs, the last one guarded (over-computed into its scratch tile:
    `compiler.overcompute`). It is valid for every size in the range. Where the replay refuses,
    `simple_symbolic_schedule`."""
    at = at or {}
    sizes = {v: at.get(v, min(max(REPRESENTATIVE_SIZE, v.lo), v.hi)) for v in func.size_vars}
    trace = default_schedule(func.specialize(sizes), target).trace
    try:
        return trace.apply(func)
    except (ScheduleError, TraceError):
        return simple_symbolic_schedule(func)


def simple_symbolic_schedule(func: PrimFunc) -> Schedule:
    """Each block at the root runs its outermost loop in parallel when that loop is spatial, and
    vectorizes its last spatial loop (a run-time extent vectorizes in chunks with a scalar tail): a
    reduction with two spatial loops or more (a matmul) moves that loop inside its reduction loops,
    its init decomposed out, so each step of the reduction is one vector operation over a row of
    outputs."""
    sch = Schedule(func, seed=0)
    for name in block_names(sch):
        kinds = loop_kinds(sch.func, name)
        loops = sch.get_loops(sch.get_block(name))
        spatial = [lp for lp, kind in zip(loops, kinds) if kind == "S"]
        reductions = [lp for lp, kind in zip(loops, kinds) if kind == "R"]
        if not spatial:
            continue
        if kinds[-1] == "S":
            attempt(sch.vectorize, loops[-1])  # a loop that may not be vectorized stays serial
        elif len(spatial) > 1 and len(spatial) + len(reductions) == len(loops):
            inner = spatial[-1]
            if attempt(sch.reorder, *spatial[:-1], *reductions, inner):
                attempt(sch.decompose_reduction, sch.get_block(name), reductions[0])
                attempt(sch.vectorize, inner)
        if len(loops) > 1 and kinds[0] == "S":
            attempt(sch.parallel, loops[0])
    return sch
