"""Timing kinds: records of different timings are kept and ranked apart.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24

A model's layer is timed cold, as a forward pass runs it (`runner.MODEL_TIMING`); a kernel is timed
warm, in a loop. Until now both kinds of record of one workload ranked together, so a layer tuned
both ways took a warm time as its best (and a program measured one way was never measured the other).

- tuning_records.timing_kind: "warm", "cold" or "layer" (`runner.TimingKind`); part of the unique
  constraint and of both ranking indexes. A record timed with a cache flush is a layer's: every
  version that flushed did so to time a model's layers (before `MODEL_TIMING` kept the input warm,
  with the flush alone); the rest are warm, as they were timed.
- tasks.timing_kind: how a task's candidates are timed. A model's member task is "layer", as is a
  task whose records are; the rest are "warm".
- candidates.timing_kind: a measured candidate's is its record's (a model's layer measured before
  layers were leased with their own timing stays warm: it was measured so); one not yet measured
  takes its task's.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

KINDS = "timing_kind IN ('warm', 'cold', 'layer')"
OLD_KEYS = ["workload_id", "hardware_id", "program_hash"]
NEW_KEYS = ["workload_id", "hardware_id", "timing_kind", "program_hash"]
RANKING = ["hardware_id", "workload_id", "median_secs"]
BEST = ["hardware_id", "workload_id", "median_secs", "id"]
OK = sa.text("status = 'ok'")
CHUNK = 500


def upgrade() -> None:
    for table in ("tasks", "candidates", "tuning_records"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("timing_kind", sa.String(length=8), server_default="warm", nullable=False)
            )
            batch.create_check_constraint("timing_kind", KINDS)
    _classify_records()
    op.execute(
        "UPDATE tasks SET timing_kind = 'layer' WHERE model_id IS NOT NULL OR id IN "
        "(SELECT task_id FROM tuning_records WHERE timing_kind = 'layer')"
    )
    op.execute(
        "UPDATE candidates SET timing_kind = 'layer' WHERE task_id IN "
        "(SELECT id FROM tasks WHERE timing_kind = 'layer')"
    )
    op.execute(
        "UPDATE candidates SET timing_kind = (SELECT r.timing_kind FROM tuning_records r "
        "WHERE r.candidate_id = candidates.id) WHERE id IN "
        "(SELECT candidate_id FROM tuning_records WHERE candidate_id IS NOT NULL)"
    )
    with op.batch_alter_table("candidates") as batch:
        batch.drop_constraint(op.f("uq_candidates_workload_id_hardware_id_program_hash"), type_="unique")
        batch.create_unique_constraint(op.f("uq_candidates_program"), NEW_KEYS)
    with op.batch_alter_table("tuning_records") as batch:
        batch.drop_constraint(op.f("uq_tuning_records_workload_id_hardware_id_program_hash"), type_="unique")
        batch.create_unique_constraint(op.f("uq_tuning_records_program"), NEW_KEYS)
        batch.drop_index("ix_tuning_records_ranking")
        batch.drop_index("ix_tuning_records_best")
        batch.create_index("ix_tuning_records_ranking", _with_kind(RANKING))
        batch.create_index("ix_tuning_records_best", _with_kind(BEST), postgresql_where=OK, sqlite_where=OK)


def _with_kind(columns: list[str]) -> list[str]:
    """The index's columns with the kind after the two ids: ranking is by median within one kind."""
    return columns[:2] + ["timing_kind"] + columns[2:]


def _classify_records() -> None:
    """The records timed with a cache flush are layers' (read in Python: JSON is queried differently
    on each backend, and the timings are small)."""
    connection = op.get_bind()
    records = sa.table(
        "tuning_records", sa.column("id"), sa.column("timing", sa.JSON), sa.column("timing_kind")
    )
    rows = connection.execute(sa.select(records.c.id, records.c.timing)).all()
    layers = [row.id for row in rows if (row.timing or {}).get("flush_cache")]
    for start in range(0, len(layers), CHUNK):
        chunk = layers[start : start + CHUNK]
        connection.execute(records.update().where(records.c.id.in_(chunk)).values(timing_kind="layer"))


def downgrade() -> None:
    """Keeps, of each program measured several ways, the record written first: the older unique
    constraint allows one."""
    for table in ("tuning_records", "candidates"):
        op.execute(
            f"DELETE FROM {table} WHERE id NOT IN (SELECT min(id) FROM {table} "
            "GROUP BY workload_id, hardware_id, program_hash)"
        )
    with op.batch_alter_table("tuning_records") as batch:
        batch.drop_index("ix_tuning_records_best")
        batch.drop_index("ix_tuning_records_ranking")
        batch.create_index("ix_tuning_records_ranking", RANKING)
        batch.create_index("ix_tuning_records_best", BEST, postgresql_where=OK, sqlite_where=OK)
        batch.drop_constraint(op.f("uq_tuning_records_program"), type_="unique")
        batch.create_unique_constraint(
            op.f("uq_tuning_records_workload_id_hardware_id_program_hash"), OLD_KEYS
        )
    with op.batch_alter_table("candidates") as batch:
        batch.drop_constraint(op.f("uq_candidates_program"), type_="unique")
        batch.create_unique_constraint(op.f("uq_candidates_workload_id_hardware_id_program_hash"), OLD_KEYS)
    for table in ("tasks", "candidates", "tuning_records"):
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(op.f(f"ck_{table}_timing_kind"), type_="check")
            batch.drop_column("timing_kind")
