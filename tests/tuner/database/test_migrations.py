"""Databases written by earlier versions open and keep their records: the file an older tensor-tuner
wrote (SQLite), and a schema built at revision 0002 with rows in its own columns (both backends)."""

import json
import sqlite3
from dataclasses import asdict
from pathlib import Path

import sqlalchemy as sa
from alembic import command

from compiler.target import Hardware
from compiler.workloads import workload_from_spec
from runner import MODEL_TIMING, NullRunner
from tuner.database import Database, alembic_config
from tuner.database import queue as q
from tuner.tune import tune

# The file `tune` of revision 0002 wrote, kept as its SQL dump (`sqlite3 FILE .dump`) rather than the
# binary database; restored, it is that file's schema and rows.
WRITTEN_BY_0002 = Path(__file__).parent / "data" / "written_by_0002.sql"
MATMUL = {"op": "matmul", "params": {"M": 64, "N": 48, "K": 40}}


def test_a_database_the_previous_version_wrote_keeps_its_records(tmp_path: Path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as restored:
        restored.executescript(WRITTEN_BY_0002.read_text())
    restored.close()
    with Database.open(f"sqlite:///{path}") as db:
        workloads = db.workloads()
        assert [w.name for w in workloads] == ["matmul", "custom"]
        for w in workloads:  # rehashed from their specs: found by what the code computes now
            assert w.hash == workload_from_spec(w.spec).func.structural_hash()
        (hardware,) = db.hardware_list()
        assert (hardware.mcpu, hardware.triple, hardware.cpu_model) == (
            "znver4",
            "x86_64-unknown-linux-gnu",
            "AMD EPYC",
        )
        assert hardware.target.key == hardware.key  # the target is recovered whole
        records = [r for w in workloads for r in db.records(workload_id=w.id, hardware_id=hardware.id)]
        assert len(records) == 24 and all(r.program_hash == r.trace_hash for r in records)
        best = db.best(workloads[0].hash, hardware.key, timing_kind="warm")
        assert best is not None and best.workload_spec["op"] == "matmul"
        # The search goes on from it: the old records are known, new ones join them.
        old = {r.program_hash for r in records}
        assert db.measured_program_hashes(workloads[0].id, hardware.id, timing_kind="warm") == {
            r.program_hash for r in records if r.workload_id == workloads[0].id
        }
    with Database.open(f"sqlite:///{path}") as db:
        machine = Hardware(hardware.target, hardware.cpu_model)
        result = tune(MATMUL, trials=6, database=db, runner=NullRunner(), strategy="random", hardware=machine)
        assert result.trials == 6 and result.hardware.key == hardware.key
        new = db.records(workload_id=workloads[0].id, hardware_id=hardware.id)
        assert len(new) == 18 and not ({r.program_hash for r in new[12:]} & old)


def test_revision_0002_rows_migrate_on_both_backends(database_url: str):
    engine = sa.create_engine(database_url)
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0002")
        connection.execute(
            sa.text(
                "INSERT INTO workloads (hash, name, spec, flops) "
                "VALUES ('old-printer-hash', 'matmul', :spec, 1.0)"
            ),
            {"spec": '{"op": "matmul", "params": {"M": 64, "N": 48, "K": 40}}'},
        )
        connection.execute(
            sa.text(
                "INSERT INTO hardware (key, cpu, features, cores) VALUES "
                "('skylake-avx512-0123456789ab-8c', 'Intel Xeon', '+avx512f', 8), ('bench-hw', 'x', '', 2)"
            )
        )
        connection.execute(
            sa.text(
                "INSERT INTO tuning_records (workload_id, hardware_id, trace, trace_hash, status, run_secs, "
                "median_secs, build_secs, message, timing, worker, remeasured) VALUES "
                "(1, 1, '{}', 'trace-hash-1', 'ok', '[0.001]', 0.001, 0.0, '', '{}', 'local', false)"
            )
        )
    engine.dispose()
    with Database.open(database_url) as db:
        (workload,) = db.workloads()
        assert workload.hash == workload_from_spec(workload.spec).func.structural_hash()
        first, second = db.hardware_list()
        assert (first.mcpu, first.cpu_model, second.mcpu) == ("skylake-avx512", "Intel Xeon", "")
        (record,) = db.records(workload_id=workload.id, hardware_id=first.id)
        assert (record.trace_hash, record.program_hash, record.median_secs) == ("trace-hash-1",) * 2 + (
            0.001,
        )
        assert db.best(workload.hash, first.key, timing_kind="warm") is not None


def test_revision_0003_rows_migrate_on_both_backends(database_url: str):
    """Hardware registered before approvals existed is approved (tasks and clients already use it);
    tasks submitted before they had owners are an admin's alone, and count no worker time."""
    engine = sa.create_engine(database_url)
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0003")
        connection.execute(
            sa.text("INSERT INTO workloads (hash, name, spec, flops) VALUES ('h', 'matmul', :spec, 1.0)"),
            {"spec": '{"op": "matmul", "params": {"M": 64, "N": 48, "K": 40}}'},
        )
        connection.execute(
            sa.text(
                "INSERT INTO hardware (key, cpu_model, triple, mcpu, features, cores) "
                "VALUES ('bench-hw', 'x', '', '', '', 2)"
            )
        )
        connection.execute(
            sa.text(
                "INSERT INTO tasks (workload_id, hardware_id, strategy, trials, seed, status, trials_done) "
                "VALUES (1, 1, 'random', 8, 0, 'pending', 0)"
            )
        )
    engine.dispose()
    with Database.open(database_url) as db:
        (hardware,) = db.hardware_list()
        assert hardware.approved and hardware.approved_at == hardware.created_at
        assert hardware.peak_gflops is None
        (task,) = db.tasks()
        assert (task.token_id, task.candidate_secs) == (None, 0.0)


def test_revision_0005_rows_get_their_timing_kind_on_both_backends(database_url: str):
    """Records read their kind from their timing; a model's member task, a task whose records are a
    layer's and their candidates are layers; the rest stay warm, as they were timed."""
    layer_timing = json.dumps(asdict(MODEL_TIMING))
    engine = sa.create_engine(database_url)
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0005")
        run = connection.execute
        run(
            sa.text("INSERT INTO workloads (hash, name, spec, flops) VALUES ('h', 'matmul', :spec, 1.0)"),
            {"spec": json.dumps(MATMUL)},
        )
        run(
            sa.text(
                "INSERT INTO hardware (key, cpu_model, triple, mcpu, features, cores) "
                "VALUES ('bench-hw', 'x', '', '', '', 2)"
            )
        )
        run(
            sa.text(
                "INSERT INTO models (name, source, source_format, hardware_id, scheduler, trials, seed, "
                "status, batches, curve, candidate_secs) "
                "VALUES ('m', :source, 'onnx', 1, 'gradient', 8, 0, 'pending', '[]', '[]', 0.0)"
            ),
            {"source": b"onnx"},
        )
        tasks = (
            "INSERT INTO tasks (workload_id, hardware_id, strategy, trials, seed, status, trials_done, "
            "model_id)"
        )
        run(
            sa.text(
                f"{tasks} VALUES (1, 1, 'random', 8, 0, 'pending', 0, NULL), (1, 1, 'random', 8, 0, "
                "'pending', 0, 1), (1, 1, 'random', 8, 0, 'done', 8, NULL)"
            )
        )
        run(
            sa.text(
                "INSERT INTO candidates (task_id, workload_id, hardware_id, trace, trace_hash, program_hash, "
                "status, attempts) VALUES (1, 1, 1, '{}', 'a', 'a', 'pending', 0), "
                "(2, 1, 1, '{}', 'b', 'b', 'pending', 0), (2, 1, 1, '{}', 'e', 'e', 'done', 1)"
            )
        )
        records = (
            "INSERT INTO tuning_records (workload_id, hardware_id, task_id, trace, trace_hash, program_hash, "
            "status, run_secs, median_secs, build_secs, message, timing, worker, remeasured, "
            "candidate_id) VALUES "
        )
        # A kernel's; a model's layer (embedded); none's; a member's measured before layers were leased
        # with their own timing (warm); a layer's from before MODEL_TIMING kept the input warm.
        for task, program, timing, candidate in (
            (1, "a", '{"repeat": 5}', None),
            (3, "c", layer_timing, None),
            (None, "d", "{}", None),
            (2, "e", '{"repeat": 5}', 3),
            (None, "f", '{"flush_cache": true}', None),
        ):
            run(
                sa.text(
                    records + "(1, 1, :task, '{}', :p, :p, 'ok', '[0.001]', 0.001, 0.0, '', :timing, '', "
                    "false, :candidate)"
                ),
                {"task": task, "p": program, "timing": timing, "candidate": candidate},
            )
    engine.dispose()
    with Database.open(database_url) as db:
        assert [t.timing_kind for t in db.tasks()] == ["warm", "layer", "layer"]
        kinds = [r.timing_kind for r in db.records(workload_id=1, hardware_id=1)]
        assert kinds == ["warm", "layer", "warm", "warm", "layer"]
        assert q.queued_program_hashes(db, workload_id=1, hardware_id=1, timing_kind="layer") == {"b"}
        assert q.queued_program_hashes(db, workload_id=1, hardware_id=1, timing_kind="warm") == {"a", "e"}
        layer = db.best("h", "bench-hw", timing_kind="layer")
        assert layer is not None and layer.program_hash == "c"
