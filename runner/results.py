"""The runner's vocabulary: what goes in (a candidate), how to time it, and what comes out.

Failure is a value: every candidate comes back as a RunResult, whatever happened to it.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any


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


def merge_remeasurement(first: RunResult, again: RunResult) -> RunResult:
    """A would-be best, measured a second time: the result keeps every repeat of both runs, so a lucky
    first run cannot carry the median alone; if the second run failed, that failure is the result."""
    if not again.ok:
        return RunResult(again.status, [], again.message, first.build_secs)
    return RunResult(Status.OK, first.run_secs + again.run_secs, first.message, first.build_secs)
