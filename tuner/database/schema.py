"""The tables, as SQLAlchemy 2.0 typed ORM classes. Alembic migrations (in `migrations/`) create them;
this module is what autogenerate compares against when the next migration is written."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from runner.results import Status, TimingKind
from tuner.database.records import CandidateStatus, Role, TaskStatus

# Constraints get stable names, so a later migration can drop or alter them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# JSONB on PostgreSQL: binary, compact, and queryable should the coordinator ever look inside a trace.
JSON_TYPE = JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that comes back in UTC, timezone-aware, on every backend: SQLite keeps no zone (and
    stores UTC), PostgreSQL answers in its session's zone."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _one_of(column: str, values: type[StrEnum]) -> str:
    return f"{column} IN ({', '.join(repr(v.value) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON_TYPE, list[float]: JSON_TYPE, datetime: UTCDateTime}


class WorkloadRow(Base):
    __tablename__ = "workloads"

    id: Mapped[int] = mapped_column(primary_key=True)
    # The structural hash of the unscheduled PrimFunc (compiler.serialize, format version 1).
    hash: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    spec: Mapped[dict[str, Any]]
    flops: Mapped[float]
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


class HardwareRow(Base):
    """A kind of machine: the target its programs are specialized for (compiler.target), which its
    key is derived from, and its CPU's model name. Rows written before triple and mcpu were kept
    have an empty triple (their mcpu comes from their key)."""

    __tablename__ = "hardware"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(200), unique=True)
    cpu_model: Mapped[str] = mapped_column(String(200))
    triple: Mapped[str] = mapped_column(String(200))
    mcpu: Mapped[str] = mapped_column(String(200))
    features: Mapped[str] = mapped_column(Text)
    cores: Mapped[int]
    # When an admin approved it (None: not yet). A worker token may register any kind of machine, but
    # only an approved one can be tuned for or be a client's default: a stray key breaks nobody.
    approved_at: Mapped[datetime | None]
    # The machine's peak GFLOPS, as an admin registered it: a measurement beyond it is impossible.
    # None: the coordinator's generous ceiling per core applies.
    peak_gflops: Mapped[float | None]
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


class TaskRow(Base):
    __tablename__ = "tasks"
    __table_args__ = (
        CheckConstraint(_one_of("status", TaskStatus), name="status"),
        CheckConstraint(_one_of("timing_kind", TimingKind), name="timing_kind"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"))
    hardware_id: Mapped[int] = mapped_column(ForeignKey("hardware.id"))
    strategy: Mapped[str] = mapped_column(String(32))
    trials: Mapped[int]
    seed: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(16), index=True)  # a restarted coordinator finds its tasks
    trials_done: Mapped[int]
    message: Mapped[str] = mapped_column(Text, server_default="")  # why it failed or was cancelled
    # The traceback of an error in the task's search (a bug, not a refused draw), which failed it.
    traceback: Mapped[str | None] = mapped_column(Text)
    # The coordinator process that runs this task's search loop, and until when its claim holds unless
    # renewed: one owner at a time, and a dead owner's tasks are taken over when the claim lapses.
    owner: Mapped[str | None] = mapped_column(String(200))
    owner_until: Mapped[datetime | None]
    # The token that submitted it: a client token sees and cancels its own tasks only. None for tasks
    # of the embedded tuner and those submitted before tasks had owners (an admin sees them).
    token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"), index=True)
    # Seconds one candidate is estimated to take on a worker, at submission: what a token's quota of
    # worker time counts.
    candidate_secs: Mapped[float] = mapped_column(server_default="0")
    # The model this task is a layer of (None: a task of its own), and how many times one forward
    # pass of the model runs it. A member's `trials` is what the model's scheduler has given it so
    # far; its model's quota counts, not its own.
    model_id: Mapped[int | None] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    weight: Mapped[int] = mapped_column(server_default="1")
    # How its candidates are timed (a model's layer as a forward pass runs it): its records are of
    # this kind, and it ranks and skips only records of this kind.
    timing_kind: Mapped[str] = mapped_column(String(8), server_default=TimingKind.WARM.value)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now(), onupdate=func.now())


class ModelRow(Base):
    """A whole model tuned under one trial budget: its layers are member tasks (`TaskRow.model_id`),
    and the coordinator's model loop gives them batches of that budget as the task scheduler picks.
    `source` is the model as submitted (ONNX bytes): the artifact is rebuilt from it (and `dims`)."""

    __tablename__ = "models"
    __table_args__ = (CheckConstraint(_one_of("status", TaskStatus), name="status"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    source: Mapped[bytes] = mapped_column(LargeBinary)
    source_format: Mapped[str] = mapped_column(String(16))
    # For a model tuned for ranges of sizes, the `dims` it was submitted with (applied to `source`
    # whenever it is built); None for static shapes.
    dims: Mapped[dict[str, Any] | None] = mapped_column(JSON_TYPE, nullable=True)
    hardware_id: Mapped[int] = mapped_column(ForeignKey("hardware.id"))
    scheduler: Mapped[str] = mapped_column(String(32))
    trials: Mapped[int]
    # Trials its members measured, summed (kept by the model loop): what its quota still holds.
    trials_done: Mapped[int] = mapped_column(server_default="0")
    seed: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(16), index=True)
    message: Mapped[str] = mapped_column(Text, server_default="")
    # The batches given so far, in order: {"task": member task id, "trials": n, "done": bool}.
    batches: Mapped[list[Any]] = mapped_column(JSON_TYPE)
    # After each finished batch: [trials measured, estimated latency in seconds or null].
    curve: Mapped[list[Any]] = mapped_column(JSON_TYPE)
    token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"), index=True)
    # The largest estimated seconds of one candidate among its members: what its quota of worker time
    # counts per trial.
    candidate_secs: Mapped[float]
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now(), onupdate=func.now())


class WorkerRow(Base):
    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    hardware_id: Mapped[int] = mapped_column(ForeignKey("hardware.id"))
    # The token that registered it: a worker token acts only for the workers it registered.
    token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"))
    registered_at: Mapped[datetime] = mapped_column(server_default=func.now())
    last_seen_at: Mapped[datetime]
    stopped: Mapped[bool]  # said goodbye (SIGTERM); a worker that died just stops being seen
    # Leases it let expire since its last result; past a limit it is throttled until then.
    strikes: Mapped[int] = mapped_column(server_default="0")
    throttled_until: Mapped[datetime | None]


class CandidateRow(Base):
    """A trace proposed by a task's search, waiting for a worker of the task's hardware: pending, then
    leased to one worker until `lease_expires_at` (renewed by its heartbeats), then done by the result
    of the worker holding the lease. An expired lease makes it available again; so does a result that
    would be the new best, which waits in `held_result` for a second lease to re-measure it."""

    __tablename__ = "candidates"
    __table_args__ = (
        # A program is measured once per workload, hardware and kind of timing, whichever task
        # proposed it.
        # Named: the naming convention's name would pass PostgreSQL's 63 characters (as below).
        UniqueConstraint(
            "workload_id", "hardware_id", "timing_kind", "program_hash", name="uq_candidates_program"
        ),
        # The lease query: a hardware's available candidates, oldest first.
        Index("ix_candidates_queue", "hardware_id", "status", "id"),
        CheckConstraint(_one_of("status", CandidateStatus), name="status"),
        CheckConstraint(_one_of("timing_kind", TimingKind), name="timing_kind"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"))
    hardware_id: Mapped[int] = mapped_column(ForeignKey("hardware.id"))
    trace: Mapped[dict[str, Any]]
    trace_hash: Mapped[str] = mapped_column(String(64))
    # The scheduled program's structural hash (for rows queued before it was kept: the trace hash).
    program_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    worker_id: Mapped[int | None] = mapped_column(ForeignKey("workers.id"))
    lease_expires_at: Mapped[datetime | None]
    leased_at: Mapped[datetime | None]  # when the current lease was given: renewals stop at an age
    attempts: Mapped[int]  # leases given
    # The workers whose lease of it expired: given up once enough different ones lost it.
    lost_by: Mapped[list[int]] = mapped_column(JSON_TYPE, server_default="[]")
    # A result that would be the new best, held until a second lease re-measures the program: only
    # then is a record written (from both measurements), so one forged result never ranks first.
    held_result: Mapped[dict[str, Any] | None]
    # How a worker must time it: its task's kind, which its record takes.
    timing_kind: Mapped[str] = mapped_column(String(8), server_default=TimingKind.WARM.value)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


class TokenRow(Base):
    """A bearer token of the REST API. Only its sha256 is stored: the token itself is shown once."""

    __tablename__ = "api_tokens"
    __table_args__ = (CheckConstraint(_one_of("role", Role), name="role"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    revoked_at: Mapped[datetime | None]


class RecordRow(Base):
    __tablename__ = "tuning_records"
    __table_args__ = (
        # A program is measured once per workload, hardware and kind of timing; concurrent inserts
        # resolve on this.
        UniqueConstraint(
            "workload_id", "hardware_id", "timing_kind", "program_hash", name="uq_tuning_records_program"
        ),
        # best / top-k: equality on both ids and the kind, then ordered by median; also every record
        # of one hardware.
        Index("ix_tuning_records_ranking", "hardware_id", "workload_id", "timing_kind", "median_secs"),
        # best / top-k read only ok records, in this order: a partial index of exactly those.
        Index(
            "ix_tuning_records_best",
            "hardware_id",
            "workload_id",
            "timing_kind",
            "median_secs",
            "id",
            postgresql_where=text("status = 'ok'"),
            sqlite_where=text("status = 'ok'"),
        ),
        CheckConstraint(_one_of("status", Status), name="status"),
        CheckConstraint(
            "(status = 'ok' AND median_secs IS NOT NULL) OR (status <> 'ok' AND median_secs IS NULL)",
            name="median_iff_ok",
        ),
        CheckConstraint(_one_of("timing_kind", TimingKind), name="timing_kind"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"))
    hardware_id: Mapped[int] = mapped_column(ForeignKey("hardware.id"))
    # Indexed: a task's search loop and its curve read the task's records.
    task_id: Mapped[int | None] = mapped_column(ForeignKey("tasks.id", ondelete="SET NULL"), index=True)
    trace: Mapped[dict[str, Any]]
    trace_hash: Mapped[str] = mapped_column(String(64))
    # The scheduled program's structural hash: two traces that make one program are one record.
    # Records written before it was kept carry their trace hash here (their program was never hashed).
    program_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    run_secs: Mapped[list[float]]  # every repeat, so a later reader can judge the noise
    median_secs: Mapped[float | None]
    build_secs: Mapped[float]
    message: Mapped[str] = mapped_column(Text)
    timing: Mapped[dict[str, Any]]
    # What the time means (cold, warm, a model's layer): records rank only against their own kind.
    timing_kind: Mapped[str] = mapped_column(String(8), server_default=TimingKind.WARM.value)
    worker: Mapped[str] = mapped_column(String(200))
    remeasured: Mapped[bool]
    # The queued candidate this measures (service mode); unique, so a result is stored once.
    candidate_id: Mapped[int | None] = mapped_column(
        ForeignKey("candidates.id", ondelete="SET NULL"), unique=True
    )
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
