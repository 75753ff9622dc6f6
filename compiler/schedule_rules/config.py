"""What the schedule rules know of the machine and the bounds they keep: the register tile's size
from the target's vector registers, the longest vectorized rows, the auto-unroll budgets."""

from __future__ import annotations

from dataclasses import dataclass

from compiler.codegen_vector import masks_odd_rows
from compiler.target import Target

UNROLL_STEPS = (0, 16, 64, 512)


@dataclass(frozen=True)
class RuleConfig:
    """`vector_lanes` and `vector_registers` describe the machine the programs will run on: they bound
    the innermost spatial tile, which the code generator keeps in vector registers."""

    max_innermost_factor: int = 64
    # The longest row a non-tiled block (padding, pooling, an epilogue) vectorizes whole: the code
    # generator emits any length as power-of-two vectors, so a prime row (a 113-wide padded image)
    # need not run one element per parallel iteration (ResNet-18's max pool: see `parallelize_vectorize`).
    max_vector_row: int = 256
    # The longest prime row a reduction's register tile may vectorize whole (`vector_tile_limit`):
    # 113 lanes are 8 zmm or 15 ymm registers, in one row of accumulators.
    max_prime_row: int = 128
    unroll_steps: tuple[int, ...] = UNROLL_STEPS
    vector_lanes: int = 16  # float32 lanes per vector register
    vector_registers: int = 32
    masked_odd_rows: bool = True  # an odd row is one masked load, not split (`codegen_vector.masks_odd_rows`)
    cores: int = 1  # the parallel loops' threads (`add_rfactor` splits a reduction among them)
    features: frozenset[str] = frozenset()  # the CPU's, for rules that use a tensor intrinsic

    @classmethod
    def for_target(cls, target: Target) -> RuleConfig:
        return cls(
            vector_lanes=target.vector_lanes("float32"),
            vector_registers=target.vector_registers,
            masked_odd_rows=masks_odd_rows(target),
            cores=target.cores,
            features=target.feature_set,
        )

    def vector_tile_limit(self, extent: int) -> int:
        """The largest vectorized tile of a loop of `extent`: four vectors; or the whole loop, up to
        `max_prime_row` lanes, when no tile of at least half a vector divides it (a prime such as 113,
        whose only tiles are 1 and itself: one lane at a time otherwise, 0.25x TVM on 97x113x127 with
        AVX-512, 0.18x with AVX2 while the bound was eight vectors, 64 lanes there)."""
        widest = min(self.max_innermost_factor, 4 * self.vector_lanes)
        narrowest = max(1, self.vector_lanes // 2)
        if extent <= self.max_prime_row and not any(extent % f == 0 for f in range(narrowest, widest + 1)):
            return max(widest, extent)
        return widest

    @property
    def accumulator_registers(self) -> int:
        """Registers the register tile may fill: the rest hold the operands loaded or broadcast."""
        return self.vector_registers * 3 // 4
