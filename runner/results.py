"""The runner's vocabulary: what goes in (a candidate), how to time it, and what comes out.

Failure is a value: every candidate comes back as a RunResult, whatever happened to it.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from compiler.build import CompiledKernel


class Status(enum.StrEnum):
    OK = "ok"
    BUILD_ERROR = "build_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    WRONG_RESULT = "wrong_result"


@dataclass(frozen=True)
class Candidate:
    """A workload spec and a trace to replay on it: everything a worker needs, no compiled code.
    `timing`, when set, is how this candidate must be timed instead of the runner's own way (a
    model's layer is timed as a forward pass runs it: `MODEL_TIMING`). `cutoff_secs`, when set, is
    how long its first call may take before it is timed for one repeat only (`cutoff_above`); a
    runner timing candidates side by side times each fully."""

    spec: dict[str, Any]
    trace: dict[str, Any]
    timing: TimingConfig | None = None
    cutoff_secs: float | None = None

    @property
    def key(self) -> str:
        """A stable identity of the candidate (canonical JSON of both parts)."""
        return json.dumps([self.spec, self.trace], sort_keys=True, separators=(",", ":"))


# A candidate whose first call takes CUTOFF_RATIO times the best known median cannot become the
# best: its repeats are not worth their time. Tuning GPT-2's family (1..512 tokens) on an AVX2 Zen 3,
# 30 of 400 candidates ran over ten times their workload's best (up to 2.3 s a call): eleven calls
# each (check, calibration, nine repeats), 128 s of the 157 s the 400 took to time, by their records
# (bench/results/2026-12-02-c.md); cut off, three calls each. All 30 came in their workload's first
# batch, before a best is known: the measurement process cuts off by its own quickest too
# (`runner.local._cutoff`). Below
# MIN_CUTOFF_SECS a call costs too little to save: there a slow first call (page faults, a cold
# thread team) must not cost a candidate its repeats.
CUTOFF_RATIO = 10.0
MIN_CUTOFF_SECS = 0.05


def cutoff_above(best_secs: float | None) -> float | None:
    """The first-call time beyond which a candidate competing with a best of `best_secs` is timed for
    one repeat only (`Candidate.cutoff_secs`); None (time it fully) when there is no best yet."""
    return None if best_secs is None else max(CUTOFF_RATIO * best_secs, MIN_CUTOFF_SECS)


class TimingKind(enum.StrEnum):
    """What a measured time means, so times of different meanings are never compared: a kernel timed
    in a loop with warm caches, cold after a cache flush, or as a model's layer (`MODEL_TIMING`:
    cold, its input warm). A schedule that needs its weights in cache wins warm and loses cold, so
    the database keeps and ranks records of each kind apart."""

    WARM = "warm"
    COLD = "cold"
    LAYER = "layer"


@dataclass(frozen=True)
class TimingConfig:
    """How to time one candidate, in the spirit of TVM's time_evaluator.

    `number` calls make one repeat (grown until a repeat lasts `min_repeat_ms`), `repeat` repeats
    are reported; `flush_cache` writes a large buffer before each repeat to time a cold cache (and
    wakes the thread team the flush let fall asleep, `evaluate.wake_threads`), and
    `keep_first_warm` then reads the first argument back: a layer inside a forward pass finds its
    input just written by the layer before it and its weights in memory (TVM's x86 tuning flushes
    every argument but the first for the same reason)."""

    number: int = 1
    repeat: int = 5
    min_repeat_ms: float = 5.0
    flush_cache: bool = False
    keep_first_warm: bool = False

    @property
    def kind(self) -> TimingKind:
        if not self.flush_cache:
            return TimingKind.WARM
        return TimingKind.LAYER if self.keep_first_warm else TimingKind.COLD

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TimingConfig:
        """From its `asdict` form; keys this version does not know are left out (a newer
        coordinator may send more)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


# How a model's kernels are timed: each call after the caches are evicted, the first argument (the
# layer's input) read back and the threads woken, as a layer finds them inside a forward pass: its
# input just written by the layer before, its weights in memory (every layer reads its own), its
# threads awake. Timed warm, in a loop, a schedule that needs its weights in cache wins records it
# then loses in the model: the BERT layer tuned 500 trials warm ran 10.43 ms, its default schedules
# 9.32 (bench/results/2026-11-24-b.md). Evicting the input too is pessimistic for convolutions, whose
# activations outweigh their weights. TVM's x86 network tuning flushes every argument but the first
# for the same reasons.
MODEL_TIMING = TimingConfig(number=1, repeat=9, min_repeat_ms=0.0, flush_cache=True, keep_first_warm=True)


@dataclass(frozen=True)
class RunResult:
    status: Status
    run_secs: list[float] = field(default_factory=list)
    message: str = ""
    build_secs: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def median_secs(self) -> float:
        secs = sorted(self.run_secs)
        return secs[len(secs) // 2] if secs else float("inf")


@dataclass(frozen=True)
class BuildResult:
    """A candidate built (`compiled` set, status ok) or not (the status and message say why)."""

    status: Status
    compiled: CompiledKernel | None = None
    message: str = ""
    build_secs: float = 0.0


class Runner(Protocol):
    """What measures candidates: the local runner on this machine, or the null runner in tests. Every
    candidate comes back as a RunResult, in order; `iter_run` yields each as it is measured, so a
    caller that stops early leaves the rest unmeasured. `timing` is how it times (None: it does not),
    which each record keeps; `run_side_by_side` times candidates of one workload alternated, so a
    slow phase of the host falls on all of them alike (`runner.confirm` compares a would-be best with
    the best that way)."""

    @property
    def timing(self) -> TimingConfig | None: ...

    def run(self, candidates: Sequence[Candidate]) -> list[RunResult]: ...

    def iter_run(self, candidates: Sequence[Candidate]) -> Iterator[RunResult]: ...

    def run_side_by_side(self, candidates: Sequence[Candidate]) -> list[RunResult]: ...

    def close(self) -> None: ...
