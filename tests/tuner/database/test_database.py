"""The tuning database on SQLite and PostgreSQL: migrations, get-or-create, never a duplicate trace (even
under a race), best/top-k over ok records only, warm-start queries, JSON round trips, task progress."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import insert, inspect
from sqlalchemy.exc import IntegrityError

from compiler.target import Hardware, Target
from tuner.database import Database, NewRecord, TaskStatus, absolute_url, alembic_config, trace_hash
from tuner.database.schema import Base, RecordRow

WORKLOAD = {"op": "matmul", "params": {"M": 64, "N": 48, "K": 40}, "dtype": "float32"}


def add_pair(db: Database, workload: str = "w0", hardware: str = "hw0") -> tuple[int, int]:
    """A workload (hash `workload` padded to 64 chars) and a hardware key: the pair records belong to."""
    wid = db.add_workload(
        hash=workload.ljust(64, "0"), name=workload, spec=WORKLOAD, flops=2.0 * 64 * 48 * 40
    )
    hid = db.add_hardware(machine(hardware))
    return wid, hid


def machine(mcpu: str, cpu_model: str = "Test CPU", cores: int = 2) -> Hardware:
    """A kind of machine whose key starts with `mcpu`."""
    return Hardware(Target("x86_64-unknown-linux-gnu", mcpu, "+avx2,+fma", cores), cpu_model)


def hw_key(mcpu: str) -> str:
    return machine(mcpu).key


def record(wid: int, hid: int, trace: dict, **kw) -> NewRecord:
    """A record whose program is known by its trace (these traces make no program)."""
    return NewRecord(workload_id=wid, hardware_id=hid, trace=trace, program_hash=trace_hash(trace), **kw)


def new(wid: int, hid: int, n: int, status: str = "ok", secs: float = 1e-3, **kw) -> NewRecord:
    trace = {"insts": [{"kind": "split", "decision": [n, 4]}]}
    run_secs = [secs, secs * 1.1, secs * 0.9] if status == "ok" else []
    return record(wid, hid, trace, status=status, run_secs=run_secs, **kw)


def test_open_migrates_to_head_and_reopens(database_url: str):
    for _ in range(2):  # the second open finds head and changes nothing
        with Database.open(database_url) as db, db.engine.connect() as connection:
            config = alembic_config(connection)
            head = ScriptDirectory.from_config(config).get_current_head()
            assert MigrationContext.configure(connection).get_current_revision() == head == "0008"
            tables = set(inspect(connection).get_table_names())
            service = {"candidates", "workers", "api_tokens"}
            assert {"workloads", "hardware", "tasks", "tuning_records", *service} <= tables
            # The hand-reviewed migration builds exactly what the models describe.
            assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []


def test_migrations_downgrade_to_empty_and_back(database_url: str):
    with Database.open(database_url) as db:
        with db.engine.begin() as connection:
            command.downgrade(alembic_config(connection), "base")
            assert set(inspect(connection).get_table_names()) == {"alembic_version"}
            command.upgrade(alembic_config(connection), "head")
        assert add_pair(db) == (1, 1)


def test_concurrent_first_opens_both_succeed(database_url: str):
    with ThreadPoolExecutor(2) as pool:
        for db in pool.map(Database.open, [database_url] * 2):
            db.close()
    with Database.open(database_url) as db:
        assert db.workloads() == []


def test_memory_database():
    with Database.open("sqlite://") as db:
        wid, hid = add_pair(db)
        assert db.add_record(new(wid, hid, 1)) is not None
        assert db.best("w0".ljust(64, "0"), hw_key("hw0"), timing_kind="warm") is not None


def test_get_or_create_is_idempotent(tuning_db: Database):
    wid, hid = add_pair(tuning_db)
    # The hash is the identity: a second name for the same program does not make a second workload.
    assert tuning_db.add_workload(hash="w0".ljust(64, "0"), name="renamed", spec={}, flops=1.0) == wid
    assert tuning_db.add_hardware(machine("hw0", cpu_model="other")) == hid
    wid2, hid2 = add_pair(tuning_db, "w1", "hw1")
    assert wid2 != wid and hid2 != hid
    (first, second) = tuning_db.workloads()
    assert (first.id, first.name, first.spec, first.flops) == (wid, "w0", WORKLOAD, 2.0 * 64 * 48 * 40)
    assert second.name == "w1" and first.created_at.tzinfo is not None
    assert [(h.key, h.cpu_model, h.target) for h in tuning_db.hardware_list()] == [
        (hw_key("hw0"), "Test CPU", machine("hw0").target),
        (hw_key("hw1"), "Test CPU", machine("hw1").target),
    ]


def test_a_trace_is_stored_once_per_workload_and_hardware(tuning_db: Database):
    wid, hid = add_pair(tuning_db)
    wid2, hid2 = add_pair(tuning_db, "w1", "hw1")
    assert tuning_db.add_record(new(wid, hid, 1)) is not None
    # Same trace again, even with another outcome: refused, quietly.
    assert tuning_db.add_record(new(wid, hid, 1, status="timeout")) is None
    # The same trace is a new measurement on other hardware or for another workload.
    assert tuning_db.add_record(new(wid, hid2, 1)) is not None
    assert tuning_db.add_record(new(wid2, hid, 1)) is not None
    assert tuning_db.add_record(new(wid, hid, 2, status="build_error")) is not None
    assert tuning_db.measured_program_hashes(wid, hid, timing_kind="warm") == {
        trace_hash(new(0, 0, n).trace) for n in (1, 2)
    }
    assert tuning_db.measured_program_hashes(wid2, hid2, timing_kind="warm") == set()
    assert [r.status for r in tuning_db.records(workload_id=wid, hardware_id=hid)] == ["ok", "build_error"]


def test_racing_writers_store_each_trace_once(database_url: str):
    """Two engines (as two workers would have) report the same traces at the same moment."""
    with Database.open(database_url) as setup:
        wid, hid = add_pair(setup)
    traces = range(20)
    start = threading.Barrier(2)

    def report(_worker: int) -> list[int | None]:
        with Database.open(database_url) as db:
            start.wait()
            return [db.add_record(new(wid, hid, n)) for n in traces]

    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(report, range(2))
    assert all((x is None) != (y is None) for x, y in zip(a, b, strict=True))
    with Database.open(database_url) as db:
        assert len(db.records(workload_id=wid, hardware_id=hid)) == len(traces)


def test_best_and_top_k_rank_ok_records_by_median(tuning_db: Database):
    wid, hid = add_pair(tuning_db)
    _, other_hid = add_pair(tuning_db, "w0", "hw1")
    key = "w0".ljust(64, "0")
    assert (
        tuning_db.best(key, hw_key("hw0"), timing_kind="warm") is None
        and tuning_db.top_k(key, hw_key("hw0"), 3, timing_kind="warm") == []
    )
    tuning_db.add_record(new(wid, hid, 1, secs=3e-3))
    tuning_db.add_record(new(wid, hid, 2, secs=1e-3))
    tuning_db.add_record(new(wid, hid, 3, secs=2e-3))
    tuning_db.add_record(new(wid, other_hid, 4, secs=1e-6))  # fast, but on another machine
    # Failures never rank, however fast they looked before failing.
    for n, status in enumerate(["build_error", "runtime_error", "timeout", "wrong_result"], start=5):
        fast = record(wid, hid, {"n": n}, status=status, run_secs=[1e-9])
        assert tuning_db.add_record(fast) is not None
    best = tuning_db.best(key, hw_key("hw0"), timing_kind="warm")
    assert best is not None and best.trace == new(0, 0, 2).trace
    assert best.median_secs == 1e-3 and best.hardware_key == hw_key("hw0") and best.workload_hash == key
    assert [r.median_secs for r in tuning_db.top_k(key, hw_key("hw0"), 2, timing_kind="warm")] == [1e-3, 2e-3]
    assert [r.median_secs for r in tuning_db.top_k(key, hw_key("hw0"), 10, timing_kind="warm")] == [
        1e-3,
        2e-3,
        3e-3,
    ]
    assert (
        tuning_db.best(key, "unknown", timing_kind="warm") is None
        and tuning_db.best("unknown", hw_key("hw0"), timing_kind="warm") is None
    )
    failed = [r for r in tuning_db.records(workload_id=wid, hardware_id=hid) if r.status != "ok"]
    assert len(failed) == 4 and all(r.median_secs is None for r in failed)


def test_median_is_an_observed_repeat(tuning_db: Database):
    """The upper median, as the runner computes it: the number the search compared is the one stored."""
    wid, hid = add_pair(tuning_db)
    for n, secs in enumerate([[3.0, 1.0, 2.0], [4.0, 1.0, 3.0, 2.0], [5.0]]):
        tuning_db.add_record(record(wid, hid, {"n": n}, status="ok", run_secs=secs))
    records = tuning_db.records(workload_id=wid, hardware_id=hid)
    assert [r.median_secs for r in records] == [2.0, 3.0, 5.0]


def test_records_of_other_workloads_on_the_same_hardware(tuning_db: Database):
    wid, hid = add_pair(tuning_db, "mine", "hw0")
    other, _ = add_pair(tuning_db, "other", "hw0")
    third, other_hid = add_pair(tuning_db, "third", "hw1")
    tuning_db.add_record(new(wid, hid, 0))
    ids = [tuning_db.add_record(new(other, hid, n, status=s)) for n, s in enumerate(["ok", "timeout", "ok"])]
    tuning_db.add_record(new(third, other_hid, 0))
    tuning_db.add_record(new(third, hid, 7))
    warm = tuning_db.records_of_other_workloads(hid, wid, 3)
    assert [r.workload_hash[:5] for r in warm] == ["third", "other", "other"]  # newest first
    assert [r.id for r in warm[1:]] == ids[:0:-1]
    assert warm[1].workload_spec == WORKLOAD and {r.hardware_id for r in warm} == {hid}
    assert len(tuning_db.records_of_other_workloads(hid, wid, 100)) == 4


def test_json_round_trips(tuning_db: Database):
    wid, hid = add_pair(tuning_db)
    trace = {
        "insts": [
            {
                "kind": "sample_perfect_tile",
                "inputs": ["l0"],
                "attrs": {"n": 4, "max_inner": 16},
                "decision": [2, 4, 2, 4],
            },
            {
                "kind": "annotate",
                "attrs": {"key": "pragma_auto_unroll_max_step", "value": 64},
                "decision": None,
            },
            {"kind": "note", "attrs": {"text": "Schedule für µ-kernels", "flag": True, "ratio": 0.1}},
        ]
    }
    run_secs = [1.2345678901234567e-05, 3.3e-07, 0.1 + 0.2]
    timing = {"number": 7, "repeat": 3, "min_repeat_ms": 5.0, "flush_cache": True}
    rid = tuning_db.add_record(
        record(
            wid,
            hid,
            trace,
            status="ok",
            run_secs=run_secs,
            build_secs=0.25,
            message="confirmed",
            timing=timing,
            worker="bench-7",
            remeasured=True,
        )
    )
    (stored,) = tuning_db.records(workload_id=wid, hardware_id=hid)
    assert stored.id == rid and stored.trace == trace and stored.run_secs == run_secs
    assert stored.trace_hash == trace_hash(trace) and stored.timing == timing
    assert (stored.build_secs, stored.message, stored.worker) == (0.25, "confirmed", "bench-7")
    assert stored.remeasured is True
    assert stored.median_secs == run_secs[0] and stored.task_id is None
    assert stored.created_at.tzinfo == UTC


def test_trace_hash_is_canonical():
    assert trace_hash({"a": 1, "b": [1, 2]}) == trace_hash({"b": [1, 2], "a": 1})
    assert trace_hash({"a": 1, "b": [1, 2]}) != trace_hash({"a": 1, "b": [2, 1]})
    assert len(trace_hash({})) == 64


def test_task_progress(tuning_db: Database):
    wid, hid = add_pair(tuning_db)
    tid = tuning_db.add_task(workload_id=wid, hardware_id=hid, strategy="evolutionary", trials=64, seed=2**40)
    task = tuning_db.get_task(tid)
    assert (task.status, task.trials_done, task.trials, task.seed) == (TaskStatus.PENDING, 0, 64, 2**40)
    assert (task.workload_name, task.hardware_key, task.strategy) == ("w0", hw_key("hw0"), "evolutionary")
    tuning_db.update_task(tid, status="running", trials_done=16)
    tuning_db.update_task(tid, trials_done=32)
    task = tuning_db.get_task(tid)
    assert (task.status, task.trials_done) == ("running", 32)
    assert task.updated_at >= task.created_at and task.updated_at.tzinfo is not None
    done = tuning_db.add_task(workload_id=wid, hardware_id=hid, strategy="random", trials=8, seed=0)
    tuning_db.update_task(done, status=TaskStatus.DONE, trials_done=8)
    assert [t.id for t in tuning_db.tasks()] == [tid, done]
    assert [t.id for t in tuning_db.tasks(status="running")] == [tid]
    assert tuning_db.tasks(status="failed") == []
    # A record can point at the task that measured it.
    tuning_db.add_record(new(wid, hid, 1, task_id=tid))
    assert tuning_db.records(workload_id=wid, hardware_id=hid)[0].task_id == tid
    with pytest.raises(ValueError):
        tuning_db.update_task(tid, status="paused")
    with pytest.raises(KeyError):
        tuning_db.update_task(tid + 100, status="done")
    with pytest.raises(KeyError):
        tuning_db.get_task(tid + 100)


def test_task_timings_are_the_task_records_medians_in_order(tuning_db: Database):
    wid, hid = add_pair(tuning_db)
    tid, other = (
        tuning_db.add_task(workload_id=wid, hardware_id=hid, strategy="random", trials=8, seed=s)
        for s in (0, 1)
    )
    tuning_db.add_record(new(wid, hid, 1, secs=2e-3, task_id=tid))
    tuning_db.add_record(new(wid, hid, 2, status="timeout", task_id=tid))
    tuning_db.add_record(new(wid, hid, 3, secs=5e-3, task_id=other))
    tuning_db.add_record(new(wid, hid, 4, secs=1e-3, task_id=tid))
    assert tuning_db.task_timings(tid) == [pytest.approx(2e-3), None, pytest.approx(1e-3)]
    assert tuning_db.task_timings(tid + 100) == []


def test_best_of_tasks_is_the_fastest_ok_record_of_each_tasks_pair(tuning_db: Database):
    wid, hid = add_pair(tuning_db)
    other_wid, _ = add_pair(tuning_db, "w1")
    tasks = [
        tuning_db.add_task(workload_id=w, hardware_id=hid, strategy="random", trials=8, seed=0)
        for w in (wid, wid, other_wid)
    ]
    slow = tuning_db.add_record(new(wid, hid, 1, secs=3e-3, task_id=tasks[0]))
    tuning_db.add_record(new(wid, hid, 2, status="wrong_result", task_id=tasks[0]))
    fast = tuning_db.add_record(new(wid, hid, 3, secs=1e-3))  # any task's record counts, or none's
    assert slow is not None and fast is not None
    best = tuning_db.best_of_tasks(tasks)
    assert best == {tasks[0]: (fast, pytest.approx(1e-3)), tasks[1]: (fast, pytest.approx(1e-3))}
    assert tuning_db.best_of_tasks([]) == {}


def test_records_of_each_timing_kind_are_kept_and_ranked_apart(tuning_db: Database):
    """A program timed warm (a kernel) and cold as a model's layer is two measurements of different
    things: both are stored, each kind ranks and is skipped on its own, and a task ranks its kind."""
    wid, hid = add_pair(tuning_db)
    key = "w0".ljust(64, "0")
    warm = tuning_db.add_record(new(wid, hid, 1, secs=1e-3))
    layer = tuning_db.add_record(new(wid, hid, 1, secs=4e-3, timing_kind="layer"))
    assert warm is not None and layer is not None
    assert tuning_db.add_record(new(wid, hid, 1, secs=1e-6, timing_kind="layer")) is None
    fastest_layer = tuning_db.add_record(new(wid, hid, 2, secs=3e-3, timing_kind="layer"))
    assert [r.median_secs for r in tuning_db.top_k(key, hw_key("hw0"), 5, timing_kind="layer")] == [
        3e-3,
        4e-3,
    ]
    warm_best = tuning_db.best(key, hw_key("hw0"), timing_kind="warm")
    assert warm_best is not None and (warm_best.id, warm_best.timing_kind) == (warm, "warm")
    assert tuning_db.best(key, hw_key("hw0"), timing_kind="cold") is None
    assert tuning_db.measured_program_hashes(wid, hid, timing_kind="warm") == {trace_hash(new(0, 0, 1).trace)}
    assert len(tuning_db.measured_program_hashes(wid, hid, timing_kind="layer")) == 2
    kernel, member = (
        tuning_db.add_task(
            workload_id=wid, hardware_id=hid, strategy="random", trials=8, seed=0, timing_kind=k
        )
        for k in ("warm", "layer")
    )
    assert tuning_db.get_task(member).timing_kind == "layer"
    best = tuning_db.best_of_tasks([kernel, member])
    assert best == {kernel: (warm, pytest.approx(1e-3)), member: (fastest_layer, pytest.approx(3e-3))}
    with pytest.raises(ValueError):
        new(wid, hid, 3, timing_kind="lukewarm")


def test_bad_records_are_refused_before_and_by_the_database(tuning_db: Database):
    with pytest.raises(ValueError):
        new(1, 1, 0, status="crashed")
    with pytest.raises(ValueError, match="at least one"):
        record(1, 1, {}, status="ok")
    wid, hid = add_pair(tuning_db)
    row = {
        "workload_id": wid,
        "hardware_id": hid,
        "trace": {},
        "trace_hash": "x",
        "program_hash": "x",
        "run_secs": [],
        "build_secs": 0.0,
        "message": "",
        "timing": {},
        "worker": "",
        "remeasured": False,
    }
    # The table's own constraints hold for writers that bypass Database.
    bad_rows = [
        {"status": "crashed"},
        {"status": "ok"},
        {"status": "timeout", "median_secs": 1.0},
        {"status": "timeout", "timing_kind": "lukewarm"},
    ]
    for bad in bad_rows:
        with pytest.raises(IntegrityError), tuning_db.engine.begin() as connection:
            connection.execute(insert(RecordRow).values(**row, **bad))
    with pytest.raises(IntegrityError):
        tuning_db.add_record(new(wid, hid + 100, 0))  # foreign keys are on, on SQLite too


def test_absolute_url_names_the_same_sqlite_file_from_any_directory(tmp_path, monkeypatch):
    """The coordinator's isolated children work in an empty directory: the URL they are given must
    still open the coordinator's database."""
    monkeypatch.chdir(tmp_path)
    with Database.open("sqlite:///tune.db") as db:
        add_pair(db)
    url = absolute_url("sqlite:///tune.db?timeout=5")
    assert url == f"sqlite:///{tmp_path}/tune.db?timeout=5"
    monkeypatch.chdir("/")
    with Database.open(url) as db:
        assert [w.name for w in db.workloads()] == ["w0"]
    for unchanged in ("sqlite://", "sqlite:///:memory:", "postgresql+psycopg://postgres@127.0.0.1/test"):
        assert absolute_url(unchanged) == unchanged
