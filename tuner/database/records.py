"""The database's vocabulary: what goes in (a new record), what comes out (plain frozen values, never
ORM objects, so no session outlives its method), and the identity of a trace."""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from compiler.target import Target
from compiler.workloads import Workload
from runner.results import Status, TimingKind


class TaskStatus(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


# A task in these states is wanted: its search runs and its candidates are measured.
ACTIVE = (TaskStatus.PENDING.value, TaskStatus.RUNNING.value)


class CandidateStatus(enum.StrEnum):
    PENDING = "pending"
    LEASED = "leased"
    DONE = "done"
    CANCELLED = "cancelled"


class Role(enum.StrEnum):
    """What a token may do: admin everything, client submit and query tasks, worker measure."""

    ADMIN = "admin"
    CLIENT = "client"
    WORKER = "worker"


def trace_hash(trace: dict[str, Any]) -> str:
    """Hex sha256 of the trace's canonical JSON: the same trace hashes alike in every process, so the
    database can refuse to store (and the search refuse to measure) a trace twice."""
    text = json.dumps(trace, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def median_secs(run_secs: list[float]) -> float:
    """The upper median, as `runner.RunResult.median_secs`: an observed time, and the same number the
    search compared when it decided a candidate was the best."""
    return sorted(run_secs)[len(run_secs) // 2]


@dataclass(frozen=True)
class NewWorkload:
    """A workload to store (or find, by its structural hash)."""

    hash: str
    name: str
    spec: dict[str, Any]
    flops: float

    @classmethod
    def of(cls, workload: Workload) -> NewWorkload:
        return cls(workload.func.structural_hash(), workload.name, workload.spec, workload.flops)


@dataclass(frozen=True, kw_only=True)
class NewRecord:
    """One measurement to store; the database derives the trace hash and the median."""

    workload_id: int
    hardware_id: int
    trace: dict[str, Any]
    program_hash: str  # the scheduled program's structural hash: its identity
    status: str  # a runner.Status value
    run_secs: list[float] = field(default_factory=list)
    build_secs: float = 0.0
    message: str = ""
    timing: dict[str, Any] = field(default_factory=dict)  # number, repeat, min_repeat_ms, flush_cache
    # What the time means (a TimingKind value): records rank only against records of their kind.
    timing_kind: str = TimingKind.WARM.value
    worker: str = ""
    remeasured: bool = False  # a second measurement confirming a would-be best
    task_id: int | None = None
    candidate_id: int | None = None  # the queued candidate this measures (service mode)
    # The time it ranks by, when not the median of `run_secs`: a would-be best confirmed by a second
    # measurement ranks by the slower of the two medians, so neither run alone decides its rank.
    ranked_secs: float | None = None

    def __post_init__(self) -> None:
        # Refuse here, with a clear message, what the table's CHECK constraints would refuse later.
        Status(self.status)
        TimingKind(self.timing_kind)
        if self.status == Status.OK and not self.run_secs:
            raise ValueError("an ok record needs at least one run's seconds")
        if self.ranked_secs is not None and self.status != Status.OK:
            raise ValueError("only an ok record ranks")


@dataclass(frozen=True)
class Record:
    id: int
    workload_id: int
    workload_hash: str
    workload_spec: dict[str, Any]
    workload_flops: float
    hardware_id: int
    hardware_key: str
    task_id: int | None
    trace: dict[str, Any]
    trace_hash: str
    program_hash: str
    status: str
    run_secs: list[float]
    median_secs: float | None  # None unless status is ok
    build_secs: float
    message: str
    timing: dict[str, Any]
    timing_kind: str  # a TimingKind value
    worker: str
    remeasured: bool
    candidate_id: int | None  # the queued candidate it measured (service mode)
    created_at: datetime


@dataclass(frozen=True)
class WorkloadInfo:
    id: int
    hash: str
    name: str
    spec: dict[str, Any]
    flops: float
    created_at: datetime


@dataclass(frozen=True)
class HardwareInfo:
    id: int
    key: str
    cpu_model: str
    triple: str
    mcpu: str
    features: str
    cores: int
    approved_at: datetime | None  # None: no task may target it until an admin approves it
    peak_gflops: float | None  # registered by an admin; None: unknown
    created_at: datetime

    @property
    def approved(self) -> bool:
        return self.approved_at is not None

    @property
    def target(self) -> Target:
        """What its programs are specialized for (the search space, the cost model's features)."""
        return Target(self.triple, self.mcpu, self.features, self.cores)


@dataclass(frozen=True)
class TaskInfo:
    id: int
    workload_id: int
    workload_name: str
    hardware_id: int
    hardware_key: str
    strategy: str
    trials: int
    seed: int
    status: TaskStatus
    trials_done: int
    message: str
    traceback: str | None
    token_id: int | None  # the token that submitted it (None: the embedded tuner, or an older task)
    candidate_secs: float  # estimated seconds of one candidate on a worker, at submission
    timing_kind: str  # how its candidates are timed (a TimingKind value): the kind of records it ranks
    model_id: int | None  # the model it is a layer of (None: a task of its own)
    weight: int  # how many times one forward pass of its model runs it
    created_at: datetime
    updated_at: datetime
