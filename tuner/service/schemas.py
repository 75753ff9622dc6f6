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
from pydantic import BaseModel, BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from runner import Status
from runner.protocol import MAX_ID, NO_NUL, ByValue, Name, Strict
from tuner.database import Role, TaskStatus
from tuner.search.driver import Strategy
from tuner.service.errors import printable

# The shared field types (`Name`, `LongText`, ...) and the worker protocol's messages are
# runner.protocol's: one definition for the coordinator and its workers.
Hash = Annotated[str, Field(min_length=1, max_length=64, pattern=NO_NUL)]
# An ONNX input dimension's name (its dim_param), or "input:axis" for an unnamed one.
DimKey = Annotated[str, Field(min_length=1, max_length=256, pattern=NO_NUL)]
Size = Annotated[int, Field(ge=1, le=2**31)]
SizeRange = Annotated[list[Size], Field(min_length=2, max_length=2)]  # [min, max], both included
IdPath = Annotated[int, Path(ge=1, lt=MAX_ID)]


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


# What a record's time means (runner.TimingKind's values): a literal, so a strict request may name it.
Timing = Literal["warm", "cold", "layer"]


# Pages of the list routes (`?after=ID&limit=N`, ids ascending): the probe's 3,000 tasks were 1.3 MB
# per `GET /v1/tasks`. A full page's answer names the next page's `after` in this header.
DEFAULT_PAGE, MAX_PAGE = 100, 1000
NEXT_PAGE_HEADER = "X-Next-After"

# Tasks.


class TaskCreate(Strict):
    workload: JsonObject = Field(
        description="A workload spec: {'op': 'matmul', 'params': {'M': 512, ...}}, a custom "
        "{'expr': ..., 'inputs': {...}}, a serialized PrimFunc {'primfunc': {...}, 'num_inputs': n}, "
        "or a PrimFunc in TVMScript {'tvmscript': '@T.prim_func ...'} "
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


class WorkerPublic(BaseModel):
    id: int
    name: str
    hardware_key: str
    registered_at: datetime
    last_seen_at: datetime
    alive: bool
    throttled_until: datetime | None = Field(
        None,
        description="It gets no lease before then: it let worker_strikes leases in a row expire without "
        "a result (a worker that leases and never answers, or one cut off from the coordinator).",
    )


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
    workload: JsonObject | None = Field(
        None,
        description="Or: one kernel over a range of one dimension, a workload spec with one "
        'parameter given as [min, max] (`{"op": "matmul", "params": {"M": [1, 512], "N": 768, '
        '"K": 768}}`) or TVMScript declaring a size var (`{"tvmscript": ...}`): tuned at `sizes` '
        "(by default four spread over the range) under one budget, each size a layer.",
    )
    sizes: list[Size] | None = Field(
        None, min_length=1, max_length=16, description="With `workload`: the sizes to tune it at."
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
    dims: dict[DimKey, Size | SizeRange | DimKey] | None = Field(
        None,
        max_length=64,
        description="A size or a range for each input dimension the ONNX model leaves open, by its "
        'name (`{"batch_size": 1, "sequence_length": [1, 512]}`) or, unnamed, as "input:axis"; or the '
        "name of another dimension of the same size. With sizes only, the model is tuned and stored "
        "at those sizes. With a range [min, max] (both included), it is tuned at sizes spread over "
        "the range and its artifact is one library for every size in it.",
    )

    @model_validator(mode="after")
    def _one_model(self) -> ModelCreate:
        if [self.onnx, self.graph, self.workload].count(None) != 2:
            raise ValueError(
                "give exactly one of onnx (a file, base64), graph (its JSON form) and workload (a "
                "kernel over a range)"
            )
        if self.dims and self.onnx is None:
            raise ValueError("dims size an ONNX model's open dimensions: a graph's shapes are static")
        if self.sizes is not None and self.workload is None:
            raise ValueError("sizes go with workload: an ONNX model's ranges are its dims")
        for name, spec in (self.dims or {}).items():
            if isinstance(spec, list) and spec[0] > spec[1]:
                raise ValueError(f"dims[{name!r}] is {list(spec)}: a range's min is at most its max")
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
    tasks: int = Field(description="Its layers: distinct fused kernels (at every tuned size).")
    estimated_secs: float | None = Field(
        description="Sum over its layers of calls x best seconds (null until every layer has a record): "
        "for a model tuned for ranges, the forward passes at all its tuned sizes."
    )
    dims: dict[str, int | list[int] | str] | None = Field(
        None, description="For a model tuned for ranges of sizes: the dims it was submitted with."
    )
    created_at: datetime
    updated_at: datetime


class ModelDetail(ModelPublic):
    layers: list[ModelTaskPublic]
    curve: list[CurvePoint] = Field(description="The estimated latency after each finished batch.")
