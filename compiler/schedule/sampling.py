"""The random choices behind stochastic primitives, and the repair of stale decisions on replay."""

from __future__ import annotations

import random

from compiler.arith import divisors


def prime_factors(n: int) -> dict[int, int]:
    out: dict[int, int] = {}
    p = 2
    while p * p <= n:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
        p += 1
    if n > 1:
        out[n] = out.get(n, 0) + 1
    return out


def _spread(k: int, n: int, rng: random.Random) -> list[int]:
    """A uniformly random way to write k as an ordered sum of n non-negative parts (stars and bars)."""
    bars = sorted(rng.sample(range(k + n - 1), n - 1))
    edges = [-1] + bars + [k + n - 1]
    return [edges[i + 1] - edges[i] - 1 for i in range(n)]


def sample_perfect_tile(extent: int, n: int, max_innermost: int, rng: random.Random) -> list[int]:
    """n factors whose product is exactly `extent`, innermost <= max_innermost (-1: no limit).

    Each prime's exponent is spread uniformly over the n slots; draws whose innermost factor is too
    large are redrawn (with n >= 2 a draw with innermost 1 exists, so this ends). A single tile is
    the whole extent, whatever the limit."""
    if n == 1:
        return [extent]
    primes = prime_factors(extent)
    while True:
        tiles = [1] * n
        for p, k in primes.items():
            for slot, e in enumerate(_spread(k, n, rng)):
                tiles[slot] *= p**e
        if max_innermost < 0 or tiles[-1] <= max_innermost:
            return tiles


def is_tile_decision(decision: object, n: int) -> bool:
    """Whether `decision` has the shape of a tile decision: n positive ints (it may still be stale)."""
    return (
        isinstance(decision, (list, tuple))
        and len(decision) == n
        and all(isinstance(f, int) and not isinstance(f, bool) and f >= 1 for f in decision)
    )


def repair_perfect_tile(extent: int, n: int, max_innermost: int, decision: list[int]) -> list[int]:
    """Make a recorded tile decision (see `is_tile_decision`) valid for `extent`, changing as little
    as possible: it may come from another workload, or from a mutator that ignored the extent.

    Walking from the innermost factor outward, a factor that does not divide what is left becomes
    the largest divisor of what is left below it; the outermost factor takes the rest."""
    remaining = extent
    tiles = [1] * n
    for i in range(n - 1, 0, -1):
        cap = decision[i] if i < n - 1 or max_innermost < 0 else min(decision[i], max_innermost)
        tiles[i] = max(d for d in divisors(remaining) if d <= cap)
        remaining //= tiles[i]
    tiles[0] = remaining
    return tiles


def covered_extent(extent: int, multiple: int) -> int:
    """`extent` rounded up to a multiple of `multiple`: what `sample_covering_tile` tiles."""
    return -(-extent // multiple) * multiple


def covering_tile(largest: int, n: int, max_innermost: int, decision: list[int]) -> list[int]:
    """A tile decision for a loop over a symbolic extent of at most `largest`. One tile runs a
    run-time number of times, as many as cover `largest` here (at run time only the tiles the extent
    needs, the last one guarded: `loop_transform.split`): the outermost, or the second where the
    outermost was decided 1 and there are more than two (a matmul's row tiles that share a panel
    of B, S1 under the parallel column stripes). The tiles inside it are static, as decided (the
    innermost within its limit, none past what the largest extent needs); the 1 outside it is kept."""
    at = 1 if decision[0] == 1 and n > 2 else 0
    tiles = [1] * n
    covered = 1
    for i in range(n - 1, at, -1):
        cap = decision[i] if i < n - 1 or max_innermost < 0 else min(decision[i], max_innermost)
        tiles[i] = max(1, min(cap, -(-largest // covered)))
        covered *= tiles[i]
    tiles[at] = -(-largest // covered)
    return tiles


def sample_categorical(probs: list[float], rng: random.Random) -> int:
    return rng.choices(range(len(probs)), weights=probs)[0]


def repair_categorical(decision: int, probs: list[float]) -> int:
    """A recorded index that is out of range or has probability 0 becomes the nearest index that
    could have been drawn (the lower one on a tie), so a repaired decision is always a possible draw."""
    if 0 <= decision < len(probs) and probs[decision] > 0:
        return decision
    return min((i for i, p in enumerate(probs) if p > 0), key=lambda i: (abs(i - decision), i))
