"""The SQL tuning database: every measurement kept, best and top-k schedules per workload and hardware."""

from tuner.database.database import Database, absolute_url, alembic_config
from tuner.database.records import (
    CandidateStatus,
    HardwareInfo,
    NewRecord,
    NewWorkload,
    Record,
    Role,
    TaskInfo,
    TaskStatus,
    WorkloadInfo,
    trace_hash,
)

__all__ = [
    "CandidateStatus",
    "Database",
    "HardwareInfo",
    "NewRecord",
    "NewWorkload",
    "Record",
    "Role",
    "TaskInfo",
    "TaskStatus",
    "WorkloadInfo",
    "absolute_url",
    "alembic_config",
    "trace_hash",
]
