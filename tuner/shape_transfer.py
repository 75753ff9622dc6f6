"""Tuned schedules carried across the sizes of a shape family: a model tuned at a few sequence lengths
runs every other length with the schedules found for the nearest ones.

Each size is its own static model (`graph.DynamicModel`), so a kernel at a size that was not tuned has
no record of its own. Its siblings at the tuned sizes do: the kernel of the same fused operators, with
the same number and ranks of parameters (the fused name without its numbering, "fused_matmul_add",
says which operators). A sibling's trace is replayed on the new kernel, the siblings sharing the most
parameter shapes first (the same weight matrix), then the nearest size; the first that applies and
keeps its micro-kernel (each tile's two innermost factors: only outer loops adapt to the new extents,
as DietCode shares micro-kernels across shapes) is used, else the default schedule. Replay checks
every primitive as it is applied: a transferred schedule is always a legal one, possibly not the
best for its size.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compiler import Hardware, PrimFunc, Trace, graph
from compiler.graph import CompiledModel, Module, ShapeFamily
from compiler.graph.build import kernel_funcs
from compiler.schedule import ScheduleError
from runner import TimingKind
from tuner.best import best_program, best_record
from tuner.database import Database
from tuner.tune import opened

# How many sizes spread over a family's ranges it is tuned at, unless told.
TUNED_SIZES = 4

# The fused operators of a kernel and its parameters' ranks: which kernels are siblings across sizes.
Kind = tuple[str, tuple[int, ...]]


@dataclass(frozen=True)
class _Sibling:
    shapes: tuple[tuple[int, ...], ...]
    sizes: Mapping[str, int]
    trace: Trace


def kind_of(func: PrimFunc) -> Kind:
    return re.sub(r"_\d+$", "", func.name), tuple(len(p.shape) for p in func.params)


class TransferredSchedules:
    """Builds a family's static models, each kernel with its own best record, else a sibling's
    trace from the tuned sizes `tuned` (read from the database on the first build), else the
    default schedule. `transferred` counts the kernels built with a sibling's trace."""

    def __init__(
        self,
        family: ShapeFamily,
        tuned: Sequence[Mapping[str, int]],
        database: Database | str,
        hardware: Hardware,
    ) -> None:
        self.family = family
        self.tuned = [dict(s) for s in tuned]
        self.database = database
        self.hardware = hardware
        self.transferred = 0
        self._siblings: dict[Kind, list[_Sibling]] | None = None

    def __call__(self, module: Module) -> CompiledModel:
        sizes = self.family.bind(
            [() if k in module.scalar_inputs else i.type.shape for k, i in enumerate(module.inputs)]
        )
        with opened(self.database) as db:
            siblings = self._load(db)

            def schedule(func: PrimFunc) -> PrimFunc | None:
                own = best_program(func, db, self.hardware, TimingKind.LAYER)
                return own if own is not None else self._transfer(func, sizes, siblings)

            return graph.build(module, target=self.hardware.target, schedules=schedule)

    def _load(self, db: Database) -> dict[Kind, list[_Sibling]]:
        if self._siblings is None:
            self._siblings = {}
            for sizes in self.tuned:
                module = graph.optimize(self.family.specialize(sizes))
                for func in kernel_funcs(module).values():
                    best = best_record(db, func.structural_hash(), self.hardware.key, TimingKind.LAYER)
                    if best is not None:
                        shapes = tuple(p.shape for p in func.params)
                        sibling = _Sibling(shapes, sizes, Trace.from_json(best.trace))  # type: ignore[arg-type]
                        self._siblings.setdefault(kind_of(func), []).append(sibling)
        return self._siblings

    def _transfer(
        self, func: PrimFunc, sizes: Mapping[str, int], siblings: Mapping[Kind, list[_Sibling]]
    ) -> PrimFunc | None:
        shapes = [p.shape for p in func.params]

        def rank(s: _Sibling) -> tuple[int, float]:
            shared = sum(a == b for a, b in zip(s.shapes, shapes))
            return -shared, _distance(s.sizes, sizes)

        for sibling in sorted(siblings.get(kind_of(func), []), key=rank):
            try:
                sch = sibling.trace.apply(func)
            except (ScheduleError, ValueError):
                continue  # it does not fit these extents: the next sibling
            if _keeps_inner_tiles(sibling.trace, sch.trace):
                self.transferred += 1
                return sch.func
        return None


def _keeps_inner_tiles(recorded: Trace, applied: Trace) -> bool:
    """Whether replay kept the sibling's micro-kernel: every tile's two innermost factors (the
    register tile and vector) and every other decision as recorded, only outer factors changed to
    fit the new extents. A repaired inner tile (6 rows of a 7-row matmul) measured up to 1.8x slower
    than the default schedule (GPT-2 at 7 tokens from 6, bench.dynamic_lengths)."""
    before, after = list(recorded.decisions.values()), list(applied.decisions.values())
    if len(before) != len(after):
        return False
    for old, new in zip(before, after):
        if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)):
            if list(old[-2:]) != list(new[-2:]):
                return False
        elif old != new:
            return False
    return True


def _distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    """How far apart two bindings are, in the logarithm (a length of 64 is nearer 128 than 1 is; of
    one more than the size, so that an empty past is a size like any other)."""
    return sum(abs(math.log1p(a[k]) - math.log1p(b[k])) for k in a)


__all__ = ["TUNED_SIZES", "TransferredSchedules", "kind_of"]
