"""The coordinator-worker protocol's wire types: one pydantic model per message, used by the
coordinator's routes (`tuner/service/routes/workers.py`) to read and answer, and by the worker's
typed client (`runner/coordinator_client.py`) to send and read. A message's shape is written here
once; neither side builds or reads a dict by hand.

Requests are strict: a number must be a JSON number and a flag a JSON boolean, unknown fields are
refused, and every string must be text the database can store (no NUL). Answers are read leniently
(a newer coordinator may add fields)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from compiler.target import Hardware, Target
from runner.results import RunResult, Status, TimingConfig

# PostgreSQL stores no NUL character in text, nor in a JSONB string: such a string is a 422.
NO_NUL = r"^[^\x00]*$"
Name = Annotated[str, Field(min_length=1, max_length=200, pattern=NO_NUL)]
# LLVM's names (a CPU, a triple): short, and a hardware key made of them must fit its 200 characters.
LlvmName = Annotated[str, Field(min_length=1, max_length=64, pattern=NO_NUL)]
MESSAGE_LIMIT = 20_000
LongText = Annotated[str, Field(max_length=MESSAGE_LIMIT, pattern=NO_NUL)]
# Row ids are INTEGER columns, 32-bit on PostgreSQL: a larger id is a 422 naming it, not an overflow in
# the database driver (a 500).
MAX_ID = 2**31
RowId = Annotated[int, Field(ge=1, lt=MAX_ID)]
Seconds = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
# One timed run: no kernel runs in under a picosecond, and a 0 or subnormal time would make its GFLOPS
# infinite (written as null where the API promises a number).
RunSeconds = Annotated[float, Field(ge=1e-12, le=1e6, allow_inf_nan=False)]
# Enums are matched by value: strict mode would accept only the enum's Python members.
ByValue = Field(strict=False)
# Records name their worker "<name>#<id>" in a 200-character column; an id has at most 10 digits.
WORKER_NAME_LENGTH = 200 - len(f"#{MAX_ID}")


class Strict(BaseModel):
    """Unknown fields are refused (a typo in a request is an error, not silently ignored), and types are
    not coerced: "10" is not a number, 1000.0 not an integer, true not 1."""

    model_config = ConfigDict(extra="forbid", strict=True)


class HardwareIn(Strict):
    """A worker's machine: the target it builds for (its key is derived from it) and its CPU model."""

    cpu_model: Name = Field(description="The CPU's model name, as /proc/cpuinfo gives it.")
    triple: LlvmName = Field(description="LLVM's target triple.")
    mcpu: LlvmName = Field(description="LLVM's name of the CPU, e.g. znver4.")
    features: LongText = Field(description="LLVM's feature string, e.g. +avx2,+fma,-avx512f.")
    cores: int = Field(ge=1, le=100_000, description="Cores a parallel loop runs on.")

    @classmethod
    def of(cls, hardware: Hardware) -> HardwareIn:
        t = hardware.target
        return cls(
            cpu_model=hardware.cpu_model, triple=t.triple, mcpu=t.mcpu, features=t.features, cores=t.cores
        )

    def hardware(self) -> Hardware:
        return Hardware(Target(self.triple, self.mcpu, self.features, self.cores), self.cpu_model)


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


class LeaseRequest(Strict):
    max: int = Field(1, ge=1, le=64, description="Most candidates to lease.")


class LeasedBest(BaseModel):
    """The best record a would-be best is re-measured beside (`runner.confirm`)."""

    record_id: int
    trace: dict[str, Any]


class LeasedCandidate(BaseModel):
    id: int
    task_id: int
    spec: dict[str, Any]
    trace: dict[str, Any]
    versus: LeasedBest | None = Field(
        None,
        description="For a would-be best's second lease: the best record's program, to time side by side "
        "with this one (alternated, repeat by repeat, in one process) and report as versus_run_secs.",
    )
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

    def timing_config(self) -> TimingConfig | None:
        """How the coordinator asks for this candidate to be timed, or None for the worker's own way."""
        return TimingConfig.from_dict(self.timing) if self.timing else None


class Lease(BaseModel):
    candidates: list[LeasedCandidate]


class ResultIn(Strict):
    """One measured candidate, as the runner measured it (`RunResult`) and how it was timed."""

    candidate_id: RowId
    status: Annotated[Status, ByValue]
    run_secs: list[RunSeconds] = Field(default_factory=list, max_length=10_000)
    build_secs: Seconds = 0.0
    message: LongText = ""
    timing: dict[Name, Annotated[float, Field(allow_inf_nan=False)] | int | bool] = Field(
        default_factory=dict, max_length=32
    )
    versus_record_id: RowId | None = Field(
        None, description="The leased best record this candidate was timed beside (`versus`), if it ran."
    )
    versus_run_secs: list[RunSeconds] = Field(default_factory=list, max_length=10_000)

    @model_validator(mode="after")
    def _timed_if_ok(self) -> ResultIn:
        if self.status == Status.OK and not self.run_secs:
            raise ValueError("run_secs: an ok result needs at least one run's seconds")
        if (self.versus_record_id is None) != (not self.versus_run_secs):
            raise ValueError("versus_run_secs: given with versus_record_id, and only with it")
        return self

    @classmethod
    def of(
        cls,
        candidate_id: int,
        result: RunResult,
        timing: TimingConfig | None,
        versus: tuple[int, RunResult] | None = None,
    ) -> ResultIn:
        """`versus`: the best record's id and its times beside this one; left out unless both ran."""
        beside = versus is not None and versus[1].ok and result.ok
        return cls(
            candidate_id=candidate_id,
            status=result.status,
            run_secs=result.run_secs,
            build_secs=result.build_secs,
            message=clean_message(result.message),
            timing=asdict(timing) if timing is not None else {},
            versus_record_id=versus[0] if beside and versus else None,
            versus_run_secs=versus[1].run_secs if beside and versus else [],
        )

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    def run_result(self) -> RunResult:
        return RunResult(Status(self.status), list(self.run_secs), self.message, self.build_secs)


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
    candidate_ids: list[RowId] | None = Field(
        None, max_length=1024, description="Leases to give back; null gives back all of them."
    )


class HeartbeatIn(Strict):
    holding: list[RowId] | None = Field(
        None,
        max_length=1024,
        description="The candidates the worker holds, whose leases are renewed; a lease it does not "
        "name expires (its answer never reached the worker). Null renews all of them.",
    )


class Count(BaseModel):
    count: int


def clean_message(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """A message the coordinator stores as it is: no NUL (PostgreSQL text cannot hold one), valid
    UTF-8 (a lone surrogate cannot be encoded), at most `limit` characters."""
    text = text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 1] + "…"
