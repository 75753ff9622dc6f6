"""The SQL tuning database: every measurement kept, best and top-k schedules per workload and hardware."""

from tuner.database.database import Database, alembic_config
from tuner.database.records import (
    HardwareInfo,
    NewRecord,
    Record,
    TaskInfo,
    TaskStatus,
    WorkloadInfo,
    trace_hash,
)

__all__ = [
    "Database",
    "HardwareInfo",
    "NewRecord",
    "Record",
    "TaskInfo",
    "TaskStatus",
    "WorkloadInfo",
    "alembic_config",
    "trace_hash",
]
