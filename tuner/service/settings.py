"""Every setting of the service, in one place: the coordinator (`tuner serve`), the worker daemon
(`tuner worker`) and the client commands read this one object. Each field can be set by an environment
variable `TENSOR_TUNER_<NAME>` (e.g. `TENSOR_TUNER_DATABASE_URL`) or by the command line flag of the
same name; flags win. `deploy/SETTINGS.md` lists them all: `python -m tuner.service.settings` renders
it from this class (a test keeps the two in step).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args, get_origin

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tuner.database.queue import LeasePolicy

# A lease must outlast this many heartbeats: one late or lost heartbeat must not hand a candidate that
# is being measured to a second worker.
HEARTBEATS_PER_LEASE = 3


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TENSOR_TUNER_", extra="ignore")

    # Coordinator.
    database_url: str = Field(
        "sqlite:///tensor-tuner.db",
        description="SQLAlchemy URL of the tuning database: a SQLite file for one machine, "
        "postgresql+psycopg://user@host/db for several coordinators and a fleet.",
    )
    database_url_file: str | None = Field(
        None,
        description="A file holding the database URL (its first line), e.g. a Docker secret or a systemd "
        "credential, so its password is in no environment variable; instead of database_url.",
    )
    host: str = Field("127.0.0.1", description="Address the coordinator binds; 0.0.0.0 to serve the network.")
    port: int = Field(8000, ge=0, le=65535, description="Port the coordinator listens on.")
    lease_seconds: float = Field(
        60.0,
        gt=0,
        description="How long a worker holds a leased candidate without a heartbeat; after that the "
        f"candidate goes to another worker. At least {HEARTBEATS_PER_LEASE} times heartbeat_seconds.",
    )
    heartbeat_seconds: float = Field(
        10.0, gt=0, description="How often workers send heartbeats (the coordinator tells them on register)."
    )
    max_attempts: int = Field(
        3,
        ge=1,
        description="Different workers a candidate may lose its lease with (each died, hung or never "
        "answered) before it is recorded as a timeout; one worker losing it again and again does not count.",
    )
    max_leases_per_worker: int = Field(
        16,
        ge=1,
        description="Candidates one worker may hold leased at once: a worker that leases and never answers "
        "cannot take the whole queue.",
    )
    max_lease_seconds: float = Field(
        1800.0,
        gt=0,
        description="Longest a lease lasts however its worker heartbeats: a worker that holds leases "
        "without answering loses them then. Above the time a worker takes for max_leases_per_worker "
        "candidates (each up to 30 s of build and 60 s of runs).",
    )
    worker_strikes: int = Field(
        8,
        ge=1,
        description="Leases a worker may let expire in a row (no result in between) before it is "
        "throttled: given no lease for worker_throttle_seconds, and logged.",
    )
    worker_throttle_seconds: float = Field(
        600.0, gt=0, description="How long a worker that keeps letting leases expire gets no lease."
    )
    claim_seconds: float = Field(
        30.0,
        gt=0,
        description="How long a coordinator's claim on a task's search loop lasts unless renewed; a dead "
        "coordinator's tasks are taken over after this.",
    )
    queue_depth: int = Field(
        16, ge=1, le=1024, description="Candidates kept queued per running task, ahead of the workers."
    )
    max_queued: int = Field(
        256,
        ge=1,
        description="Pending candidates a coordinator's search loop keeps queued across all its tasks: "
        "with many tasks, each gets a few candidates soon instead of the first ones queue_depth each.",
    )
    max_searches: int = Field(
        32,
        ge=1,
        description="Tasks whose search (cost model, population) a coordinator's search loop keeps in "
        "memory, those advanced last; another task's search is rebuilt from the database when it next "
        "needs candidates. Bounds the loop's memory whatever the number of tasks.",
    )
    tick_seconds: float = Field(0.2, gt=0, description="How often the search loop looks at its tasks.")
    max_request_bytes: int = Field(
        1 << 20, ge=1024, description="Largest request body accepted; larger ones get 413."
    )
    header_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="How long a client may take to send a request's headers (from connecting, or from "
        "its previous response) before its connection is closed: a slow client cannot hold a connection.",
    )
    body_timeout_seconds: float = Field(
        120.0,
        gt=0,
        description="How long a client may take to send a request's body once its headers are in: a "
        "model upload of max_model_bytes must arrive within it.",
    )
    max_connections: int = Field(
        4096,
        ge=1,
        description="Connections the API holds at once; past it, requests get 503. Kept below the "
        "process's file descriptor limit, which `tuner serve` raises to its hard limit (LimitNOFILE).",
    )
    max_trials: int = Field(10_000, ge=1, description="Largest trial budget of one task.")
    quota_active_tasks: int = Field(
        16,
        ge=1,
        description="Active (pending or running) tasks one client token may have at once. Admin tokens "
        "have no quotas.",
    )
    quota_trials: int = Field(
        50_000, ge=1, description="Trials still to measure, summed over one client token's active tasks."
    )
    quota_worker_hours: float = Field(
        24.0,
        gt=0,
        description="Worker time one client token's active tasks may hold: their trials still to measure "
        "times the estimated seconds of one candidate.",
    )
    candidate_gflops_per_core: float = Field(
        2.0,
        gt=0,
        description="Throughput a candidate is assumed to reach per core of its hardware, when a task is "
        "submitted: the estimate of one candidate's time (worker_repeat + 4 runs) that refuses a workload "
        "whose candidates cannot finish within a worker's 60 s run timeout. Conservative: a slow "
        "candidate, not the best.",
    )
    candidate_gbytes_per_second: float = Field(
        2.0, gt=0, description="Memory bandwidth a candidate is assumed to reach, for the same estimate."
    )
    max_gflops_per_core: float = Field(
        1000.0,
        gt=0,
        description="No measurement is believed faster than this per core of its hardware (unless an "
        "admin registered the hardware's peak): such a result is refused and counted in /metrics.",
    )
    max_model_bytes: int = Field(
        64 << 20,
        ge=1024,
        description="Largest ONNX model `POST /v1/models` accepts (its bytes, before base64; the request "
        "body may be 4/3 of this plus 64 KiB, whatever max_request_bytes says).",
    )
    max_model_nodes: int = Field(10_000, ge=1, description="Most nodes an ONNX model's graph may have.")
    model_import_seconds: float = Field(
        120.0,
        gt=0,
        description="Longest the coordinator spends importing one submitted model (in a child process) "
        "before it refuses it.",
    )
    model_memory_bytes: int = Field(
        4 << 30,
        ge=256 << 20,
        description="Address space of the child process that imports a submitted model or builds its "
        "artifact: a model whose import would need more is refused, not the coordinator's memory.",
    )
    max_concurrent_imports: int = Field(
        2,
        ge=1,
        description="Model uploads an API process takes at once (each holds its body, up to 4/3 of "
        "max_model_bytes, and its import child, up to model_memory_bytes); more get 503 with "
        "Retry-After before their body is read.",
    )
    max_concurrent_builds: int = Field(
        1,
        ge=1,
        description="Model artifacts an API process builds at once (each in a child of up to "
        "model_memory_bytes); a download that needs another build gets 503 with Retry-After. Built "
        "artifacts are served from memory whatever this is.",
    )
    model_batches_in_flight: int = Field(
        2,
        ge=1,
        le=64,
        description="Batches of 16 trials a model task keeps out at once after every layer's first: "
        "more keeps a larger fleet busy, fewer follows the task scheduler's choices more closely.",
    )
    cancelled_model_days: float = Field(
        7.0,
        ge=0,
        description="How long a cancelled model keeps its file (an artifact can be built from its "
        "records meanwhile); then its bytes are dropped, so cancelled uploads do not fill the disk.",
    )
    artifact_cache_bytes: int = Field(
        512 << 20,
        ge=0,
        description="Memory each API process keeps built model artifacts in (the newest first), so a "
        "repeated download is not a rebuild.",
    )
    database_timeout_seconds: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="Longest an API request waits on the database (to connect, for a lock, for an "
        "answer) before it gets 503 with Retry-After; /healthz waits at most a second.",
    )

    # Worker daemon and client commands.
    coordinator_url: str = Field(
        "http://127.0.0.1:8000",
        description="Where workers and clients find the coordinator. Several URLs separated by commas "
        "(coordinators of one database): a worker moves to the next when the one it uses cannot be "
        "reached or fails; client commands use the first.",
    )
    token: str | None = Field(
        None,
        description="Bearer token of a worker or client (see `tuner token create`). Prefer token_file: "
        "a token given as a flag is on the command line, which every user of the machine can read.",
    )
    token_file: str | None = Field(
        None,
        description="A file holding the bearer token (its first line), e.g. a systemd credential or a "
        "Docker secret; instead of token.",
    )
    worker_name: str | None = Field(
        None, description="The worker's name in the fleet (default: host name and pid)."
    )
    worker_batch: int = Field(4, ge=1, le=64, description="Candidates a worker leases at a time.")
    worker_cpus: str | None = Field(
        None, description="CPUs the worker and its measurements are pinned to, e.g. '0-3' or '0,2'."
    )
    worker_runner: Literal["local", "null"] = Field(
        "local",
        description="'local' builds and times candidates; 'null' returns fixed times (for benchmarks).",
    )
    worker_repeat: int = Field(5, ge=1, le=100, description="Timed repeats per candidate.")
    worker_min_repeat_ms: float = Field(
        5.0, ge=0, description="A repeat's calls are grown until it lasts this long."
    )
    worker_max_backoff_seconds: float = Field(
        30.0, gt=0, description="Longest wait between retries when the coordinator cannot be reached."
    )

    @model_validator(mode="after")
    def _database_url_from_file(self) -> Settings:
        if self.database_url_file is None:
            return self
        if "database_url" in self.model_fields_set:
            raise ValueError("give database_url or database_url_file, not both")
        try:
            first = next(iter(Path(self.database_url_file).read_text().splitlines()), "").strip()
        except OSError as e:
            raise ValueError(f"database_url_file: {e}") from None
        if not first:
            raise ValueError(f"database_url_file: {self.database_url_file} is empty")
        self.database_url = first
        return self

    @model_validator(mode="after")
    def _one_token(self) -> Settings:
        if self.token is not None and self.token_file is not None:
            raise ValueError("give token or token_file, not both")
        return self

    def bearer_token(self) -> str | None:
        """The token: token_file's first line if that is given, else token; None if neither (or the
        file is empty). Raises OSError for a file that cannot be read."""
        if self.token_file is None:
            return self.token
        first = next(iter(Path(self.token_file).read_text().splitlines()), "").strip()
        return first or None

    @model_validator(mode="after")
    def _lease_outlasts_heartbeats(self) -> Settings:
        if self.lease_seconds < HEARTBEATS_PER_LEASE * self.heartbeat_seconds:
            raise ValueError(
                f"lease_seconds ({self.lease_seconds:g}) must be at least {HEARTBEATS_PER_LEASE} times "
                f"heartbeat_seconds ({self.heartbeat_seconds:g}), or a late heartbeat hands a candidate "
                "being measured to a second worker"
            )
        return self

    def lease_policy(self) -> LeasePolicy:
        """The queue's rules for leases, from these settings."""
        return LeasePolicy(
            lease_secs=self.lease_seconds,
            max_attempts=self.max_attempts,
            max_leases=self.max_leases_per_worker,
            max_age_secs=self.max_lease_seconds,
            strikes=self.worker_strikes,
            throttle_secs=self.worker_throttle_seconds,
        )

    def environment(self) -> dict[str, str]:
        """These settings as the environment variables that reproduce them in another process."""
        # A URL read from its file stays in the file: the child reads it there too.
        secret = {"database_url"} if self.database_url_file is not None else set()
        values = self.model_dump(exclude=secret)
        return {f"TENSOR_TUNER_{k.upper()}": str(v) for k, v in values.items() if v is not None}


# Which commands read each setting, for deploy/SETTINGS.md. A new field needs an entry here: the deploy
# tests fail until it has one and the document is regenerated.
READ_BY: dict[str, str] = {
    "database_url": "serve, token, hardware; tune, best, show, submit, status, evaluate-model (embedded)",
    "database_url_file": "as database_url",
    "host": "serve",
    "port": "serve",
    "lease_seconds": "serve",
    "heartbeat_seconds": "serve",
    "max_attempts": "serve",
    "max_leases_per_worker": "serve",
    "max_lease_seconds": "serve",
    "worker_strikes": "serve",
    "worker_throttle_seconds": "serve",
    "claim_seconds": "serve",
    "queue_depth": "serve",
    "max_queued": "serve",
    "max_searches": "serve",
    "tick_seconds": "serve",
    "max_request_bytes": "serve",
    "header_timeout_seconds": "serve",
    "body_timeout_seconds": "serve",
    "max_connections": "serve",
    "max_trials": "serve",
    "quota_active_tasks": "serve",
    "quota_trials": "serve",
    "quota_worker_hours": "serve",
    "candidate_gflops_per_core": "serve",
    "candidate_gbytes_per_second": "serve",
    "max_gflops_per_core": "serve",
    "max_model_bytes": "serve",
    "max_model_nodes": "serve",
    "model_import_seconds": "serve",
    "max_concurrent_imports": "serve",
    "cancelled_model_days": "serve",
    "max_concurrent_builds": "serve",
    "model_memory_bytes": "serve",
    "model_batches_in_flight": "serve",
    "artifact_cache_bytes": "serve",
    "database_timeout_seconds": "serve",
    "coordinator_url": "worker; submit, submit-model, status, cancel, best, show (remote)",
    "token": "worker; submit, submit-model, status, cancel, best, show (remote)",
    "token_file": "worker; submit, submit-model, status, cancel, best, show (remote)",
    "worker_name": "worker",
    "worker_batch": "worker",
    "worker_cpus": "worker",
    "worker_runner": "worker",
    "worker_repeat": "worker; serve (the estimate of a candidate's time)",
    "worker_min_repeat_ms": "worker",
    "worker_max_backoff_seconds": "worker",
}
REGENERATE = "python -m tuner.service.settings > deploy/SETTINGS.md"


def settings_markdown() -> str:
    """deploy/SETTINGS.md: every field of `Settings` as an environment variable, rendered from the class
    so the document cannot drift from the code."""
    rows = [
        "| Variable | Default | Values | Read by `tuner ...` | What it does |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, field in Settings.model_fields.items():
        cells = (
            f"`{Settings.model_config['env_prefix']}{name.upper()}`",
            "(unset)" if field.default is None else f"`{field.default}`",
            _values(field.annotation, field.metadata),
            READ_BY.get(name, "**?** (add it to READ_BY)"),
            field.description or "**?** (give the field a description)",
        )
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(
        [
            "# Settings",
            "",
            f"<!-- Generated from tuner.service.settings.Settings by `{REGENERATE}`; do not edit. -->",
            "",
            "Every tensor-tuner process (`tuner serve`, `tuner worker` and the client commands) reads its",
            "configuration from one object, `tuner.service.settings.Settings`, filled from these environment",
            "variables. A command's flag, where it has one (`tuner <command> --help`), wins over the",
            "variable. Variables with the prefix but an unknown name are ignored, so check the spelling",
            "here. In systemd units they come from `EnvironmentFile=`, in `compose.yaml` from",
            "`environment:`.",
            "",
            *rows,
            "",
        ]
    )


def _values(annotation: object, metadata: list[object]) -> str:
    args = get_args(annotation)
    if get_origin(annotation) is Literal:
        return " or ".join(f"`{a}`" for a in args)
    types = [a for a in args if a is not type(None)] or [annotation]
    text = " or ".join(getattr(t, "__name__", str(t)) for t in types)
    bounds = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    limits = [
        f"{sign} {getattr(m, key)}" for m in metadata for key, sign in bounds.items() if hasattr(m, key)
    ]
    return ", ".join([text, *limits])


if __name__ == "__main__":
    print(settings_markdown(), end="")
