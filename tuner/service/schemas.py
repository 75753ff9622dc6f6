"""The REST API's messages, one model per direction (what a client sends, what it gets back), with the
limits that keep a malformed or oversized request a 422 that names its field, never a 5xx.

Requests are strict: a number must be a JSON number and a flag a JSON boolean (`"trials": "10"`,
`1000.0` and `true` are refused, not read as 10, 1000 and 1), and every string, down to the keys and
values inside a workload spec, must be text the database can store: valid Unicode (a JSON escape of a
lone UTF-16 surrogate, `"\\ud800"`, is not) without NUL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from compiler.target import Target
from runner import Status
from runner.hardware import Hardware
from tuner.database import Role, TaskStatus
from tuner.search.driver import Strategy
from tuner.service.errors import printable

# PostgreSQL stores no NUL character in text, nor in a JSONB string: such a string is a 422 here.
NO_NUL = r"^[^\x00]*$"
Name = Annotated[str, Field(min_length=1, max_length=200, pattern=NO_NUL)]
Hash = Annotated[str, Field(min_length=1, max_length=64, pattern=NO_NUL)]
# LLVM's names (a CPU, a triple): short, and a hardware key made of them must fit its 200 characters.
LlvmName = Annotated[str, Field(min_length=1, max_length=64, pattern=NO_NUL)]
LongText = Annotated[str, Field(max_length=20_000, pattern=NO_NUL)]
# Row ids are INTEGER columns, 32-bit on PostgreSQL: a larger id is a 422 naming it, not an overflow in
# the database driver (a 500).
MAX_ID = 2**31
IdPath = Annotated[int, Path(ge=1, lt=MAX_ID)]
Seconds = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
# One timed run: no kernel runs in under a picosecond, and a 0 or subnormal time would make its GFLOPS
# infinite (written as null where the API promises a number).
RunSeconds = Annotated[float, Field(ge=1e-12, le=1e6, allow_inf_nan=False)]


def _storable(value: object) -> object:
    """`value` as given, if every string in it (keys too, at any depth) is text the database can
    store; else a 422 naming the first culprit's path inside the field."""
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                where = f"{path}.{key}" if path else str(key)
                _check_text(where, key)
                stack.append((where, child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
        else:
            _check_text(path, item)
    return value


def _check_text(where: str, value: object) -> None:
    if isinstance(value, str) and not _is_storable(value):
        raise PydanticCustomError(
            "string_unicode",
            "{where}: text must be valid Unicode without NUL",
            {"where": printable(where[:200]) or "the value"},
        )


def _is_storable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return "\x00" not in text


# A JSON object given as data (a workload spec), its strings checked as the named string fields are.
JsonObject = Annotated[dict[str, Any], BeforeValidator(_storable)]
# Enums are matched by value: strict mode would accept only the enum's Python members.
ByValue = Field(strict=False)


# What a record's time means (runner.TimingKind's values): a literal, so a strict request may name it.
Timing = Literal["warm", "cold", "layer"]


class Strict(BaseModel):
    """Unknown fields are refused (a typo in a request is an error, not silently ignored), and types are
    not coerced: "10" is not a number, 1000.0 not an integer, true not 1."""

    model_config = ConfigDict(extra="forbid", strict=True)


# Tasks.


class TaskCreate(Strict):
    workload: JsonObject = Field(
        description="A workload spec: {'op': 'matmul', 'params': {'M': 512, ...}}, a custom "
        "{'expr': ..., 'inputs': {...}}, or a serialized PrimFunc {'primfunc': {...}, 'num_inputs': n} "
        "(see the README).",
        examples=[{"op": "matmul", "params": {"M": 512, "N": 512, "K": 512}}],
    )
    hardware: Name | None = Field(
        None, description="Hardware key to tune for; default: the only kind of hardware registered."
    )
    cpu_model: Name | None = Field(
        None, description="Or: a CPU model name (as in /proc/cpuinfo), matched against registered hardware."
    )
    trials: int = Field(64, ge=1, description="Candidates to measure.")
    strategy: Strategy = "evolutionary"
    seed: int = Field(0, ge=0, lt=2**63)


class Best(BaseModel):
    record_id: int
    gflops: float
    median_secs: float


class TaskPublic(BaseModel):
    id: int
    workload_name: str
    workload_hash: str
    workload_spec: dict[str, Any] = Field(description="The workload's canonical spec (its shape).")
    hardware_key: str
    strategy: str
    trials: int
    trials_done: int
    status: TaskStatus
    message: str
    best: Best | None = Field(description="The fastest record of this task's workload on its hardware.")
    created_at: datetime
    updated_at: datetime


class QueuePublic(BaseModel):
    pending: int
    leased: int
    done: int


class TaskDetail(TaskPublic):
    curve: list[float] = Field(description="Best GFLOPS so far after each of this task's measurements.")
    queue: QueuePublic
    traceback: str | None = Field(
        description="Where the task's search failed, if an error (a bug) failed it."
    )


# Records.


class RecordPublic(BaseModel):
    id: int
    workload_hash: str
    workload_spec: dict[str, Any]
    hardware_key: str
    task_id: int | None = Field(
        description="The task that measured it, if it is the caller's (an admin's: any); else null."
    )
    status: Status
    median_secs: float | None
    gflops: float | None
    run_secs: list[float]
    build_secs: float
    message: str
    timing: dict[str, Any]
    timing_kind: Timing = Field(
        "warm", description="What its time means: records rank within their kind (older coordinators: warm)."
    )
    worker: str
    remeasured: bool
    trace: dict[str, Any]
    created_at: datetime


class BestQuery(Strict):
    workload: JsonObject | None = Field(None, description="The workload spec (or give workload_hash).")
    workload_hash: Hash | None = None
    hardware: Name | None = Field(
        None, description="Hardware key; default: the only kind of hardware registered."
    )
    k: int = Field(1, ge=1, le=100)
    timing: Timing = Field(
        "warm", description="Rank records timed this way: warm (a kernel), layer (inside a model)."
    )


# Workers.


class HardwareIn(Strict):
    """A worker's machine: the target it builds for (its key is derived from it) and its CPU model."""

    cpu_model: Name = Field(description="The CPU's model name, as /proc/cpuinfo gives it.")
    triple: LlvmName = Field(description="LLVM's target triple.")
    mcpu: LlvmName = Field(description="LLVM's name of the CPU, e.g. znver4.")
    features: LongText = Field(description="LLVM's feature string, e.g. +avx2,+fma,-avx512f.")
    cores: int = Field(ge=1, le=100_000, description="Cores a parallel loop runs on.")

    def hardware(self) -> Hardware:
        return Hardware(Target(self.triple, self.mcpu, self.features, self.cores), self.cpu_model)


# Records name their worker "<name>#<id>" in a 200-character column; an id has at most 10 digits.
WORKER_NAME_LENGTH = 200 - len(f"#{MAX_ID}")


class WorkerRegister(Strict):
    name: str = Field(min_length=1, max_length=WORKER_NAME_LENGTH, pattern=NO_NUL)
    hardware: HardwareIn


class WorkerRegistered(BaseModel):
    id: int
    lease_seconds: float
    heartbeat_seconds: float
    hardware_approved: bool = Field(
        True,
        description="Whether an admin approved the worker's kind of hardware: until then no task targets "
        "it, and the worker waits.",
    )


class WorkerPublic(BaseModel):
    id: int
    name: str
    hardware_key: str
    registered_at: datetime
    last_seen_at: datetime
    alive: bool


class LeaseRequest(Strict):
    max: int = Field(1, ge=1, le=64, description="Most candidates to lease.")


class LeasedPublic(BaseModel):
    id: int
    task_id: int
    spec: dict[str, Any]
    trace: dict[str, Any]
    best_secs: float | None = Field(
        description="Best known median when leased. A result beating it is held by the coordinator until "
        "a second lease re-measures it: a worker need not re-measure it itself."
    )
    lease_expires_at: datetime
    timing: dict[str, float | int | bool] | None = Field(
        None,
        description="How to time this candidate instead of the worker's own way (runner.TimingConfig's "
        "fields), or null. A model's layer is timed one call at a time after the caches are evicted "
        "and its input read back, as a forward pass runs it.",
    )


class Lease(BaseModel):
    candidates: list[LeasedPublic]


class ResultIn(Strict):
    candidate_id: int = Field(ge=1, lt=MAX_ID)
    status: Annotated[Status, ByValue]
    run_secs: list[RunSeconds] = Field(default_factory=list, max_length=10_000)
    build_secs: Seconds = 0.0
    message: LongText = ""
    timing: dict[Name, Annotated[float, Field(allow_inf_nan=False)] | int | bool] = Field(
        default_factory=dict, max_length=32
    )
    remeasured: bool = Field(
        False,
        description="Ignored: the coordinator re-measures a would-be best itself, by a second lease.",
    )

    @model_validator(mode="after")
    def _timed_if_ok(self) -> ResultIn:
        if self.status == Status.OK and not self.run_secs:
            raise ValueError("run_secs: an ok result needs at least one run's seconds")
        return self


class ResultsIn(Strict):
    results: list[ResultIn] = Field(min_length=1, max_length=256)


PublicOutcome = Literal["accepted", "confirming", "duplicate", "unknown", "refused"]


class ResultsOut(BaseModel):
    outcomes: list[PublicOutcome] = Field(
        description="Per result: accepted (stored); confirming (it would be the new best: held until a "
        "second lease, any worker's, re-measures it); duplicate (already stored, nothing changed); "
        "unknown (no such candidate); refused (this worker does not hold the candidate's lease, or the "
        "time is faster than its hardware can run: nothing stored)."
    )


class ReleaseIn(Strict):
    candidate_ids: list[Annotated[int, Field(ge=1, lt=MAX_ID)]] | None = Field(
        None, max_length=1024, description="Leases to give back; null gives back all of them."
    )


class HeartbeatIn(Strict):
    holding: list[Annotated[int, Field(ge=1, lt=MAX_ID)]] | None = Field(
        None,
        max_length=1024,
        description="The candidates the worker holds, whose leases are renewed; a lease it does not "
        "name expires (its answer never reached the worker). Null renews all of them.",
    )


class Count(BaseModel):
    count: int


# Hardware.


class HardwarePublic(BaseModel):
    id: int
    key: str
    cpu_model: str
    cores: int
    approved: bool = Field(description="Tasks may target it (an admin approved it).")
    peak_gflops: float | None = Field(description="Its peak, as an admin registered it: no result beats it.")
    created_at: datetime


class HardwareApproval(Strict):
    peak_gflops: Annotated[float, Field(gt=0, le=1e9, allow_inf_nan=False)] | None = Field(
        None, description="The machine's peak GFLOPS, if known: results faster than it are refused."
    )


# Tokens.


class TokenCreate(Strict):
    role: Annotated[Role, ByValue]
    name: Name


class TokenPublic(BaseModel):
    id: int
    name: str
    role: Role
    created_at: datetime
    revoked_at: datetime | None


class TokenCreated(TokenPublic):
    token: str = Field(description="The secret; shown this once, only its hash is stored.")


class Health(BaseModel):
    status: Literal["ok"]
    database: str


# Models.

# tuner.task_scheduler.SCHEDULERS, as a type the schema can state (a test keeps the two in step).
Scheduler = Literal["gradient", "round-robin"]


class ModelCreate(Strict):
    onnx: str | None = Field(
        None,
        min_length=1,
        description="The ONNX model's bytes, base64-encoded (RFC 4648, with padding; no more than "
        "max_model_bytes once decoded). Its operators must be ones the frontend supports.",
    )
    graph: JsonObject | None = Field(
        None,
        description="Or: the model in our graph's JSON form (compiler/graph/serialize.py): inputs, "
        "constants (base64 data), nodes of graph operators, outputs.",
    )
    name: Name | None = Field(None, description="What to call it; default: 'model'.")
    trials: int = Field(
        ge=1, description="Measurements shared by all its layers; at least one per layer (task)."
    )
    hardware: Name | None = Field(
        None, description="Hardware key to tune for; default: the only kind of hardware registered."
    )
    scheduler: Scheduler = Field(
        "gradient",
        description="How the budget is spent: 'gradient' gives the next batch to the layer whose "
        "improvement promises the largest drop in the model's latency; 'round-robin' takes turns.",
    )
    seed: int = Field(0, ge=0, lt=2**62)

    @model_validator(mode="after")
    def _one_model(self) -> ModelCreate:
        if (self.onnx is None) == (self.graph is None):
            raise ValueError("give exactly one of onnx (a file, base64) and graph (its JSON form)")
        return self


class ModelTaskPublic(BaseModel):
    task_id: int
    workload_name: str
    workload_hash: str
    weight: int = Field(description="Calls per forward pass.")
    flops: float = Field(description="Of one call.")
    trials: int = Field(description="Trials the model's scheduler has given it.")
    trials_done: int
    status: TaskStatus
    best_secs: float | None
    gflops: float | None
    share: float | None = Field(
        description="Its part of the estimated latency (weight x best / the sum), once every layer has one."
    )


class CurvePoint(BaseModel):
    trials: int
    estimated_secs: float | None = Field(description="Null until every layer has a valid record.")


class ModelPublic(BaseModel):
    id: int
    name: str
    hardware_key: str
    scheduler: str
    trials: int
    trials_done: int
    status: TaskStatus
    message: str
    tasks: int = Field(description="Its layers: distinct fused kernels.")
    estimated_secs: float | None = Field(
        description="Sum over its layers of calls x best seconds (null until every layer has a record)."
    )
    created_at: datetime
    updated_at: datetime


class ModelDetail(ModelPublic):
    layers: list[ModelTaskPublic]
    curve: list[CurvePoint] = Field(description="The estimated latency after each finished batch.")
