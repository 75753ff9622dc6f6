"""The runner's vocabulary: what goes in (a candidate), how to time it, and what comes out.

Failure is a value: every candidate comes back as a RunResult, whatever happened to it.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
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
    """A workload spec and a trace to replay on it: everything a worker needs, no compiled code."""

    spec: dict[str, Any]
    trace: dict[str, Any]

    @property
    def key(self) -> str:
        """A stable identity of the candidate (canonical JSON of both parts)."""
        return json.dumps([self.spec, self.trace], sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class TimingConfig:
    """How to time one candidate, in the spirit of TVM's time_evaluator.

    `number` calls make one repeat (grown until a repeat lasts `min_repeat_ms`), `repeat` repeats
    are reported; `flush_cache` writes a large buffer before each repeat to time a cold cache."""

    number: int = 1
    repeat: int = 5
    min_repeat_ms: float = 5.0
    flush_cache: bool = False


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
    which each record keeps."""

    @property
    def timing(self) -> TimingConfig | None: ...

    def run(self, candidates: Sequence[Candidate]) -> list[RunResult]: ...

    def iter_run(self, candidates: Sequence[Candidate]) -> Iterator[RunResult]: ...

    def close(self) -> None: ...
