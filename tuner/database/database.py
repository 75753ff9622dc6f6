"""The tuning database: workloads, hardware, tasks and every measurement, in one SQL database (a SQLite
file for one machine, PostgreSQL for a fleet), brought to the newest schema whenever it is opened."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, Select, create_engine, event, func, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from compiler import target as machine
from runner.results import Status, TimingKind
from tuner.database import outage
from tuner.database.records import (
    HardwareInfo,
    NewRecord,
    NewWorkload,
    Record,
    TaskInfo,
    TaskStatus,
    WorkloadInfo,
    median_secs,
    trace_hash,
)
from tuner.database.schema import Base, HardwareRow, RecordRow, TaskRow, WorkloadRow

MIGRATIONS = Path(__file__).parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000
# Any constant will do: the id of the PostgreSQL advisory lock that concurrent openers queue on.
_MIGRATION_LOCK = 0x74756E65
# INSERT ... ON CONFLICT DO NOTHING is dialect-specific; these are the backends the tuner supports.
_INSERT: dict[str, Callable[[Any], sqlite.Insert | postgresql.Insert]] = {
    "sqlite": sqlite.insert,
    "postgresql": postgresql.insert,
}

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def alembic_config(connection: Connection) -> Config:
    """Alembic's configuration, built in code: the migrations ship inside the package, so nobody needs an
    alembic.ini. They run on `connection`, inside its transaction (see migrations/env.py)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


class Database:
    """Every method is one transaction and returns plain frozen values, so it is safe to share one
    Database between threads, and no ORM object or session ever outlives a call.

    Open with `Database.open(url)`; `engine` is public for migrations and tests."""

    def __init__(self, engine: Engine) -> None:
        if engine.dialect.name not in _INSERT:
            raise ValueError(f"unsupported database {engine.dialect.name!r}: use sqlite or postgresql")
        self.engine = engine
        self.insert = _INSERT[engine.dialect.name]  # with on_conflict_do_nothing on both backends
        self._session = sessionmaker(engine)
        self._workloads: dict[int, WorkloadInfo] = {}
        conflict = [
            RecordRow.workload_id,
            RecordRow.hardware_id,
            RecordRow.timing_kind,
            RecordRow.program_hash,
        ]
        self._record_insert = (
            self.insert(RecordRow).on_conflict_do_nothing(index_elements=conflict).returning(RecordRow.id)
        )
        self._file = _sqlite_file(engine)
        self._file_identity: tuple[int, int] | None = None  # known once the file exists: `open`

    @classmethod
    def open(cls, url: str, *, timeout_seconds: float | None = None) -> Database:
        """Connect and migrate to the newest schema: opening is the only set-up step, for a new file as
        for a database an older tensor-tuner wrote. `sqlite://` opens a private in-memory database for tests:
        one connection, so use it from one thread at a time.

        With `timeout_seconds`, every transaction after the migration (which may take long) waits that
        long at most for the database, then fails as an outage (`outage.is_outage`)."""
        db = cls(_create_engine(url, timeout_seconds))
        try:
            _migrate(db.engine)
        except BaseException:
            db.close()  # a caller that retries while the database is away leaks no engine per try
            raise
        if timeout_seconds is not None:
            outage.limit_waits(db.engine, timeout_seconds)
        if db._file is not None:
            db._file_identity = _identity(db._file)  # the migration has created the file
        return db

    def close(self) -> None:
        self.engine.dispose()

    def clock(self) -> datetime:
        """The database server's current time (PostgreSQL's clock_timestamp, not the transaction's
        start), in UTC."""
        with self.engine.connect() as connection:
            found = connection.scalar(text("SELECT clock_timestamp()"))
        assert isinstance(found, datetime)
        return found.astimezone(UTC)

    def file_problem(self) -> str | None:
        """For a SQLite file: why the file this database writes is no longer the one at its path
        (deleted, or replaced), else None. Deleted under a running coordinator, the file lives on
        while it is open: every request succeeds, and everything is gone at the next start."""
        if self._file is None:
            return None
        found = _identity(self._file)
        if found is None:
            return f"the database file {self._file} was deleted"
        if found != self._file_identity:
            return f"the database file {self._file} was replaced by another file"
        return None

    def transaction(self) -> AbstractContextManager[Session]:
        """A session in one transaction, committed on success: for the data-access modules beside this
        one (queue, fleet, tokens), which follow the same rule of returning plain values."""
        return self._session.begin()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Workloads, hardware and tasks.

    def add_workload(self, *, hash: str, name: str, spec: dict[str, Any], flops: float) -> int:
        """Get or create by structural hash: the same program is the same workload whatever it is called,
        so an existing row keeps its name and spec."""
        with self._session.begin() as session:
            return self.workload_in(session, NewWorkload(hash, name, spec, flops))

    def workload_in(self, session: Session, workload: NewWorkload) -> int:
        """`add_workload` inside the caller's transaction: a submission that is then refused (over its
        quota) rolls back and leaves no workload row behind."""
        w = workload
        insert = self.insert(WorkloadRow).values(hash=w.hash, name=w.name, spec=w.spec, flops=w.flops)
        session.execute(insert.on_conflict_do_nothing(index_elements=[WorkloadRow.hash]))
        return session.scalars(select(WorkloadRow.id).where(WorkloadRow.hash == w.hash)).one()

    def add_hardware(self, hardware: machine.Hardware, *, approved: bool = True) -> int:
        """Get or create by key: records are only comparable between machines of the same key.

        `approved`: the caller may decide which kinds of machine are tuned for (the embedded tuner, on
        its own database; an admin), so the key is approved if it was not; otherwise (a worker token)
        a new key waits for an admin's approval, and a known key stays as it is."""
        t = hardware.target
        values = {"key": t.key, "cpu_model": hardware.cpu_model, "triple": t.triple, "mcpu": t.mcpu}
        with self._session.begin() as session:
            insert = self.insert(HardwareRow).values(**values, features=t.features, cores=t.cores)
            session.execute(insert.on_conflict_do_nothing(index_elements=[HardwareRow.key]))
            row = session.scalars(select(HardwareRow).where(HardwareRow.key == t.key)).one()
            if approved and row.approved_at is None:
                row.approved_at = func.now()
            return row.id

    def approve_hardware(self, hardware_id: int, *, peak_gflops: float | None = None) -> HardwareInfo:
        """An admin's decision that tasks may target this kind of machine (and, if given, its peak,
        beyond which no measurement is believed). Raises KeyError for an unknown id."""
        with self._session.begin() as session:
            row = session.get(HardwareRow, hardware_id)
            if row is None:
                raise KeyError(hardware_id)
            if row.approved_at is None:
                row.approved_at = func.now()
            if peak_gflops is not None:
                row.peak_gflops = peak_gflops
            session.flush()
            session.refresh(row)
            return _plain(HardwareInfo, row)

    def add_task(
        self,
        *,
        workload_id: int,
        hardware_id: int,
        strategy: str,
        trials: int,
        seed: int,
        timing_kind: str = TimingKind.WARM.value,
    ) -> int:
        """A new pending task of no token: a budget of `trials` measurements of one workload on one
        hardware, timed as `timing_kind` says. The service adds its clients' tasks with
        `quotas.submit_task`."""
        with self._session.begin() as session:
            task = new_task(
                workload_id=workload_id,
                hardware_id=hardware_id,
                strategy=strategy,
                trials=trials,
                seed=seed,
                token_id=None,
                candidate_secs=0.0,
                timing_kind=timing_kind,
            )
            session.add(task)
            session.flush()
            return task.id

    def update_task(self, task_id: int, *, status: str | None = None, trials_done: int | None = None) -> None:
        """Record a task's progress; raises KeyError for an unknown task, ValueError for an unknown status."""
        with self._session.begin() as session:
            task = session.get(TaskRow, task_id)
            if task is None:
                raise KeyError(task_id)
            if status is not None:
                task.status = TaskStatus(status).value
            if trials_done is not None:
                task.trials_done = trials_done

    def get_task(self, task_id: int) -> TaskInfo:
        """Raises KeyError for an unknown task."""
        with self._session.begin() as session:
            row = session.execute(_tasks_query().where(TaskRow.id == task_id)).one_or_none()
            if row is None:
                raise KeyError(task_id)
            return _task_info(*row)

    def tasks(
        self,
        status: str | None = None,
        *,
        token_id: int | None = None,
        after: int | None = None,
        limit: int | None = None,
    ) -> list[TaskInfo]:
        """Every task, oldest first; those of one status, or submitted with one token, if given; a
        page of them: ids above `after`, `limit` at most."""
        query = _tasks_query()
        if status is not None:
            query = query.where(TaskRow.status == TaskStatus(status).value)
        if token_id is not None:
            query = query.where(TaskRow.token_id == token_id)
        if after is not None:
            query = query.where(TaskRow.id > after)
        with self._session.begin() as session:
            return [_task_info(*row) for row in session.execute(query.order_by(TaskRow.id).limit(limit))]

    def task_owners(self, task_ids: Iterable[int]) -> dict[int, int | None]:
        """The token that submitted each of these tasks (None: none did), by task id."""
        with self._session.begin() as session:
            rows = session.execute(select(TaskRow.id, TaskRow.token_id).where(TaskRow.id.in_(list(task_ids))))
            return {task: token for task, token in rows}

    def get_workload(self, workload_id: int) -> WorkloadInfo:
        """Raises KeyError for an unknown workload."""
        with self._session.begin() as session:
            row = session.get(WorkloadRow, workload_id)
            if row is None:
                raise KeyError(workload_id)
            return _plain(WorkloadInfo, row)

    def workloads(self) -> list[WorkloadInfo]:
        with self._session.begin() as session:
            return [
                _plain(WorkloadInfo, w) for w in session.scalars(select(WorkloadRow).order_by(WorkloadRow.id))
            ]

    def hardware_list(self) -> list[HardwareInfo]:
        with self._session.begin() as session:
            return [
                _plain(HardwareInfo, h) for h in session.scalars(select(HardwareRow).order_by(HardwareRow.id))
            ]

    # Tuning records.

    def add_record(self, record: NewRecord) -> int | None:
        """Store a measurement; None when this program is already stored for the workload, hardware and
        timing kind.

        The unique constraint decides, in the same statement as the insert (ON CONFLICT DO NOTHING), so
        two workers reporting the same trace at once store it once and neither sees an error."""
        with self._session.begin() as session:
            return self.insert_records(session.connection(), [record]).scalar_one_or_none()

    def insert_records(self, connection: Connection, records: Sequence[NewRecord]) -> Any:
        """Insert records on `connection`, skipping any whose trace is stored already; the result holds
        the ids of those inserted. One cached statement run for many rows, executed as plain Core:
        a multi-row VALUES statement compiled per call, or the ORM's bulk machinery, cost more than
        the insert itself."""
        rows = []
        for record in records:
            status = Status(record.status)
            ranked = None
            if status is Status.OK:
                ranked = median_secs(record.run_secs) if record.ranked_secs is None else record.ranked_secs
            columns = {f.name: getattr(record, f.name) for f in fields(record) if f.name != "ranked_secs"}
            rows.append(
                {
                    **columns,  # not asdict: it deep-copies traces
                    "status": status.value,
                    "trace_hash": trace_hash(record.trace),
                    "median_secs": ranked,
                }
            )
        return connection.execute(self._record_insert, rows)

    def workload(self, workload_id: int) -> WorkloadInfo:
        """A workload, cached: a workload row never changes once written. Raises KeyError if unknown."""
        found = self._workloads.get(workload_id)
        if found is None:
            found = self._workloads[workload_id] = self.get_workload(workload_id)
        return found

    def measured_program_hashes(self, workload_id: int, hardware_id: int, *, timing_kind: str) -> set[str]:
        """Every stored program of the pair timed as `timing_kind`, whatever its status: a failed
        program fails again, so the search must not propose it either."""
        query = select(RecordRow.program_hash).where(
            RecordRow.workload_id == workload_id,
            RecordRow.hardware_id == hardware_id,
            RecordRow.timing_kind == TimingKind(timing_kind).value,
        )
        with self._session.begin() as session:
            return set(session.scalars(query))

    def best(self, workload_hash: str, hardware_key: str, *, timing_kind: str) -> Record | None:
        """The ok record of `timing_kind` with the lowest median time, or None before any candidate
        timed that way ran correctly."""
        top = self.top_k(workload_hash, hardware_key, 1, timing_kind=timing_kind)
        return top[0] if top else None

    def top_k(self, workload_hash: str, hardware_key: str, k: int, *, timing_kind: str) -> list[Record]:
        """The `k` fastest ok records of `timing_kind`, fastest first (ties in the order they were
        stored). Records that failed or computed a wrong result never rank, however fast; nor do
        records timed another way (a warm time is not a layer's time)."""
        # The ids as scalar subqueries, so the planner walks the partial index ix_tuning_records_best
        # for that one pair in order and stops after k rows, however many records the pair has.
        workload_id = select(WorkloadRow.id).where(WorkloadRow.hash == workload_hash).scalar_subquery()
        hardware_id = select(HardwareRow.id).where(HardwareRow.key == hardware_key).scalar_subquery()
        query = (
            _records_query()
            .where(
                RecordRow.workload_id == workload_id,
                RecordRow.hardware_id == hardware_id,
                RecordRow.timing_kind == TimingKind(timing_kind).value,
                RecordRow.status == Status.OK.value,
            )
            .order_by(RecordRow.median_secs, RecordRow.id)
            .limit(k)
        )
        return self._records(query)

    def best_of_tasks(self, task_ids: Sequence[int]) -> dict[int, tuple[int, float]]:
        """For each task that has one, the fastest ok record of its workload on its hardware timed as
        the task times: (record id, median seconds). One query for a whole task list, each pair's best
        found through the partial index of ok records, as `top_k` finds it."""
        best = (
            select(RecordRow.id)
            .where(
                RecordRow.workload_id == TaskRow.workload_id,
                RecordRow.hardware_id == TaskRow.hardware_id,
                RecordRow.timing_kind == TaskRow.timing_kind,
                RecordRow.status == Status.OK.value,
            )
            .order_by(RecordRow.median_secs, RecordRow.id)
            .limit(1)
            .correlate(TaskRow)
            .scalar_subquery()
        )
        query = (
            select(TaskRow.id, RecordRow.id, RecordRow.median_secs)
            .join(RecordRow, RecordRow.id == best)
            .where(TaskRow.id.in_(task_ids))
        )
        with self._session.begin() as session:
            rows = session.execute(query).all()
        # Every ok record has a median (constraint median_iff_ok): the filter only narrows the type.
        return {task: (record, secs) for task, record, secs in rows if secs is not None}

    def records(self, *, workload_id: int, hardware_id: int) -> list[Record]:
        """Every record of the pair, any status, oldest first: what the cost model trains on."""
        return self._records(
            _records_query()
            .where(RecordRow.workload_id == workload_id, RecordRow.hardware_id == hardware_id)
            .order_by(RecordRow.id)
        )

    def task_records(self, task_id: int, *, after_id: int = 0) -> list[Record]:
        """A task's records with ids above `after_id`, oldest first: what arrived since the last look."""
        return self._records(
            _records_query()
            .where(RecordRow.task_id == task_id, RecordRow.id > after_id)
            .order_by(RecordRow.id)
        )

    def task_timings(self, task_id: int) -> list[float | None]:
        """The median seconds of each of a task's records, oldest first (None where it failed): its
        tuning curve, without reading the traces, which a dashboard polling it does not need."""
        query = select(RecordRow.median_secs).where(RecordRow.task_id == task_id).order_by(RecordRow.id)
        with self._session.begin() as session:
            return list(session.scalars(query))

    def get_record(self, record_id: int) -> Record:
        """Raises KeyError for an unknown record."""
        records = self._records(_records_query().where(RecordRow.id == record_id))
        if not records:
            raise KeyError(record_id)
        return records[0]

    def records_of_other_workloads(
        self, hardware_id: int, exclude_workload_id: int, limit: int
    ) -> list[Record]:
        """The newest `limit` records of other workloads on the same hardware, any status: they warm-start
        the cost model of a new workload, since what runs fast on a machine transfers between programs."""
        return self._records(
            _records_query()
            .where(RecordRow.hardware_id == hardware_id, RecordRow.workload_id != exclude_workload_id)
            .order_by(RecordRow.id.desc())
            .limit(limit)
        )

    def _records(self, query: Select[RecordRow, str, dict[str, Any], float, str]) -> list[Record]:
        with self._session.begin() as session:
            return [_record(*row) for row in session.execute(query)]


def new_task(
    *,
    workload_id: int,
    hardware_id: int,
    strategy: str,
    trials: int,
    seed: int,
    token_id: int | None,
    candidate_secs: float,
    timing_kind: str = TimingKind.WARM.value,
) -> TaskRow:
    """A pending task row with nothing done yet: `Database.add_task` and `quotas.submit_task` add it."""
    return TaskRow(
        workload_id=workload_id,
        hardware_id=hardware_id,
        strategy=strategy,
        trials=trials,
        seed=seed,
        token_id=token_id,
        candidate_secs=candidate_secs,
        timing_kind=TimingKind(timing_kind).value,
        status=TaskStatus.PENDING.value,
        trials_done=0,
    )


def absolute_url(url: str) -> str:
    """`url` with a relative SQLite file made absolute against the working directory: the same
    database for a process that works in another directory (the coordinator's isolated children)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return url
    if parsed.database.startswith("file:"):  # a URI filename (?uri=true) is the user's to resolve
        return url
    return parsed.set(database=str(Path(parsed.database).resolve())).render_as_string(hide_password=False)


def _sqlite_file(engine: Engine) -> Path | None:
    """The file of a SQLite database (None for PostgreSQL, or SQLite in memory)."""
    url = engine.url
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database).resolve()


def _identity(path: Path) -> tuple[int, int] | None:
    """The file's device and inode, None if there is none at `path`."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


def _create_engine(url: str, timeout_seconds: float | None = None) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        # pre_ping: a coordinator outlives restarts of its PostgreSQL server (with a timeout, the ping
        # is outage.limit_waits's). No server-side prepared statements: psycopg prepares a query after
        # 5 runs, and the generic plans PostgreSQL then uses made the best-record query 2.4x slower
        # (3.8 -> 1.6 ms without, bench best_query).
        if timeout_seconds is None:
            return create_engine(parsed, pool_pre_ping=True, connect_args={"prepare_threshold": None})
        return create_engine(
            parsed,
            pool_timeout=timeout_seconds,
            connect_args={
                "prepare_threshold": None,
                "connect_timeout": outage.connect_timeout(timeout_seconds),
            },
        )
    if parsed.database in (None, "", ":memory:"):
        # Each connection to :memory: is a new empty database: share one connection between threads.
        engine = create_engine(parsed, poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        engine = create_engine(parsed)
    event.listen(engine, "connect", _configure_sqlite)
    event.listen(engine, "begin", _begin_sqlite)
    return engine


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    """WAL so readers never block the writer; foreign keys, which SQLite leaves off by default; a busy
    timeout so a second writer waits for the first instead of failing; synchronous NORMAL, which in WAL
    mode syncs at checkpoints instead of every commit (a crash of the process loses nothing, a power
    cut may lose the last commits, never the file's integrity). SQLAlchemy, not the driver,
    begins transactions (see _begin_sqlite)."""
    dbapi_connection.isolation_level = None
    for pragma in (f"busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}", "foreign_keys = ON", "synchronous = NORMAL"):
        dbapi_connection.execute(f"PRAGMA {pragma}")
    _enable_wal(dbapi_connection)


def _enable_wal(dbapi_connection: Any) -> None:
    """Switch a new file to WAL. The switch needs the file to itself and SQLite does not wait for it
    (no busy handler), so a connection opened while another migrates a new file retries; a file
    already in WAL (every open but the first) needs no switch."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if dbapi_connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                dbapi_connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _begin_sqlite(connection: Connection) -> None:
    """Take SQLite's single write lock at BEGIN: a transaction that read and then writes could otherwise
    fail at once on the lock upgrade, where waiting (busy timeout) is what we want. Transactions here
    last milliseconds, so readers waiting on a writer do not notice."""
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def _migrate(engine: Engine) -> None:
    """Upgrade to head in one transaction that concurrent openers queue on (BEGIN IMMEDIATE on SQLite, an
    advisory lock on PostgreSQL): a fleet starting at once migrates once, and the others find head.

    SQLite alters a table by copying it and dropping the original, which rows of other tables refer
    to: its foreign keys are off while it migrates (a pragma that only takes effect outside a
    transaction), and checked in full before the migration commits."""
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            _sqlite_pragma(connection, "foreign_keys = OFF")
        try:
            with connection.begin():
                if connection.dialect.name == "postgresql":
                    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
                command.upgrade(alembic_config(connection), "head")
                if sqlite:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
                    if broken:
                        raise RuntimeError(f"the migration broke foreign keys: {broken[:5]}")
        finally:
            if sqlite:
                _sqlite_pragma(connection, "foreign_keys = ON")


def _sqlite_pragma(connection: Connection, pragma: str) -> None:
    """A pragma on the driver's connection, outside any transaction (SQLAlchemy would begin one)."""
    dbapi = connection.connection.dbapi_connection
    assert dbapi is not None  # None only for an invalidated connection
    dbapi.cursor().execute(f"PRAGMA {pragma}")


def _plain(cls: type[T], row: Base, **joined: Any) -> T:
    """Copy a row's columns into a frozen dataclass while its session is open."""
    names = {f.name for f in fields(cls)} - joined.keys()
    return cls(**{name: getattr(row, name) for name in names}, **joined)


def _records_query() -> Select[RecordRow, str, dict[str, Any], float, str]:
    return (
        select(RecordRow, WorkloadRow.hash, WorkloadRow.spec, WorkloadRow.flops, HardwareRow.key)
        .join(WorkloadRow, RecordRow.workload_id == WorkloadRow.id)
        .join(HardwareRow, RecordRow.hardware_id == HardwareRow.id)
    )


def _record(
    row: RecordRow, workload_hash: str, spec: dict[str, Any], flops: float, hardware_key: str
) -> Record:
    return _plain(
        Record,
        row,
        workload_hash=workload_hash,
        workload_spec=spec,
        workload_flops=flops,
        hardware_key=hardware_key,
    )


def _tasks_query() -> Select[TaskRow, str, str]:
    return (
        select(TaskRow, WorkloadRow.name, HardwareRow.key)
        .join(WorkloadRow, TaskRow.workload_id == WorkloadRow.id)
        .join(HardwareRow, TaskRow.hardware_id == HardwareRow.id)
    )


def _task_info(task: TaskRow, workload_name: str, hardware_key: str) -> TaskInfo:
    return _plain(
        TaskInfo, task, status=TaskStatus(task.status), workload_name=workload_name, hardware_key=hardware_key
    )
