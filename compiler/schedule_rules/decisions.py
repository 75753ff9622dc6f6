"""Where the schedule rules get their choices: the tuner's space samples them, the default schedule
picks each by a heuristic (`heuristic.py`), through the same rules."""

from __future__ import annotations

from typing import Protocol

from compiler.ir import PrimFunc
from compiler.schedule import Schedule

Decision = list[int] | None  # a tile decision for sample_perfect_tile; None: sample it


class Decisions(Protocol):
    """A method that returns a decision (an int, a tile list) gives what the sampling instruction
    records, or None to let it sample from the schedule's generator; the others make the structural
    choices, which the space draws or fixes."""

    def inline(self, func: PrimFunc, name: str) -> bool:
        """Whether auto-inline inlines this elementwise block (which it may) into its consumers."""
        ...

    def write_level(self, sch: Schedule) -> int:
        """Where a tiled block's output tile is written: 0 in place; 1 or 2 through an accumulator
        (or a fused elementwise consumer) per tile of S0 or of S0 S1."""
        ...

    def packed_reads(self, func: PrimFunc, name: str, kinds: list[str]) -> list[int]:
        """The tiled block's inputs (`cache_read` indices, among `analysis.packable_reads`) copied into
        a contiguous panel per S0 tile before the tile runs."""
        ...

    def vectorize_follower(self) -> bool:
        """Whether the write-back or the fused consumer placed under a tile vectorizes its innermost
        loop."""
        ...

    def tiles(self, func: PrimFunc, name: str, kinds: list[str]) -> list[Decision]:
        """One tile decision per loop around the block (see `analysis.loop_kinds`), for the SSRSRS
        split: four tiles for an "S" loop, two for an "R" loop, nothing for a "-" loop."""
        ...

    def outer_order(self, func: PrimFunc, name: str, kinds: list[str]) -> list[int]:
        """The order of the tiled block's outermost spatial tiles (S0, the parallel loop), as indices
        of its "S" loops: consecutive parallel iterations share the operands that the loops placed
        last do not index."""
        ...

    def compute_location(self, func: PrimFunc, name: str) -> int | None:
        """The index into the compute-location candidates of the producer block `name`; -1 leaves it
        at the root."""
        ...

    def vector_tile(self, extent: int) -> Decision:
        """The [outer, inner] split of a non-tiled block's innermost spatial loop; inner is vectorized."""
        ...

    def winograd_tiles(self, func: PrimFunc, name: str) -> list[Decision]:
        """The tiles of a Winograd product's rows, columns and K (`winograd_tiling`)."""
        ...

    def parallel_loops(self, extents: list[int], reduction_inside: bool) -> int:
        """How many of a non-tiled block's leading spatial loops (of these extents) are fused into its
        parallel loop; the rest stay serial. `reduction_inside`: reduction loops follow them."""
        ...

    def unroll(self, steps: tuple[int, ...]) -> int | None:
        """The index of the auto-unroll budget among `steps`."""
        ...

    def intrinsic_tiles(self, func: PrimFunc, name: str) -> list[Decision]:
        """The [outer, inner] tiles of a tensorized GEMM's rows and of its intrinsic-wide column
        tiles (`tensorize_vnni`): inner rows x inner tiles are the register tile."""
        ...

    def dot_rows(self, rows: int) -> Decision:
        """The [outer, inner] split of a matrix-vector product's rows (`dot_rows`): the inner rows
        accumulate side by side, sharing each load of the vector; the outer run in parallel."""
        ...

    def rfactor(self, sch: Schedule) -> bool:
        """Whether a reduction with less spatial parallelism than cores is split among them
        (`add_rfactor`)."""
        ...
