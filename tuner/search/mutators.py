"""Mutators: change one decision of a trace, never its instructions.

Replay repairs what a new decision breaks (a tile that no longer divides, a compute location that is
out of range), so a mutator only has to propose plausible values. Weights follow MetaSchedule's CPU
defaults: tile sizes most of the time, the unroll budget and compute locations rarely. Parallel extent
is the product of the outer tiles, so the tile mutator changes it too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from compiler import Trace
from compiler.arith import divisors
from compiler.schedule.instruction import InstructionKind, lookup
from compiler.schedule.kinds import (
    SAMPLE_CATEGORICAL,
    SAMPLE_COMPUTE_LOCATION,
    SAMPLE_COVERING_TILE,
    SAMPLE_PERFECT_TILE,
)

Decisions = dict[int, Any]
Mutator = Callable[[Trace, random.Random], Decisions | None]


def mutate_tile_size(trace: Trace, rng: random.Random) -> Decisions | None:
    """Move a divisor from one tile factor to another of the same loop (a perfect or a covering
    tile); the innermost factor keeps within the instruction's max_innermost_factor."""
    tiles = [
        i
        for i in _indices(trace, SAMPLE_PERFECT_TILE) + _indices(trace, SAMPLE_COVERING_TILE)
        if any(f > 1 for f in trace.decisions[i])
    ]
    if not tiles:
        return None
    index = rng.choice(tiles)
    factors = list(trace.decisions[index])
    limit = trace.instructions[index].args.get("max_innermost_factor", -1)
    for _ in range(16):
        src = rng.choice([k for k, f in enumerate(factors) if f > 1])
        dst = rng.choice([k for k in range(len(factors)) if k != src])
        moved = rng.choice(divisors(factors[src])[1:])
        new = list(factors)
        new[src] //= moved
        new[dst] *= moved
        if limit is None or limit <= 0 or new[-1] <= limit:
            return {index: new}
    return None


def mutate_categorical(trace: Trace, rng: random.Random) -> Decisions | None:
    """Draw another candidate (with non-zero probability) of a categorical, e.g. the unroll budget."""
    choices = []
    for i in _indices(trace, SAMPLE_CATEGORICAL):
        probs = trace.instructions[i].args["probs"]
        others = [k for k, p in enumerate(probs) if p > 0 and k != trace.decisions[i]]
        if others:
            choices.append((i, others))
    if not choices:
        return None
    index, others = rng.choice(choices)
    return {index: rng.choice(others)}


def mutate_compute_location(trace: Trace, rng: random.Random) -> Decisions | None:
    """Move a block to a neighbouring loop level (or the root); replay clamps to what is valid."""
    locations = _indices(trace, SAMPLE_COMPUTE_LOCATION)
    if not locations:
        return None
    index = rng.choice(locations)
    old = trace.decisions[index]
    new = rng.choice([d for d in (old - 1, old + 1, old + 2, -1) if d >= -1 and d != old])
    return {index: new}


MUTATORS: list[tuple[Mutator, float]] = [
    (mutate_tile_size, 0.9),
    (mutate_categorical, 0.05),
    (mutate_compute_location, 0.05),
]


def mutate(trace: Trace, rng: random.Random) -> Decisions | None:
    """One mutation, the mutator drawn by weight among those that apply to this trace."""
    pool = list(MUTATORS)
    while pool:
        mutator = rng.choices([m for m, _ in pool], weights=[w for _, w in pool])[0]
        decisions = mutator(trace, rng)
        if decisions is not None:
            return decisions
        pool = [(m, w) for m, w in pool if m is not mutator]
    return None


def _indices(trace: Trace, kind: InstructionKind) -> list[int]:
    return [i for i in trace.decisions if lookup(trace.instructions[i].kind) is kind]
