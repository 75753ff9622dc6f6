"""Identity from data: workload hashes from the PrimFunc's canonical serialization, programs identified
by their structural hash, hardware described by its target, and the traceback of a failed search.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

- workloads.hash: recomputed from each workload's spec with `compiler.serialize.structural_hash`
  (format version 1). The old hash was a digest of the printer's text, which a cosmetic change to the
  printer would have orphaned. This step builds each workload's PrimFunc with the code this version
  ships; a later change of the serialization format brings its own migration.
- tuning_records.program_hash and candidates.program_hash: the scheduled program's structural hash,
  which replaces the trace hash in the unique constraints (two traces that make the same program are
  one measurement). Rows written before carry their trace hash there: their programs were never
  hashed, and replaying every stored trace here would take minutes on a large database. A program
  measured before may therefore be measured once more, under its real hash.
- hardware.cpu becomes cpu_model (the marketing model string, not LLVM's CPU name), and the target's
  triple and mcpu are kept. Older rows get them back from their key ("<mcpu>-<digest>-<n>c", the
  digest telling which usual triple it was made with); a key of another form leaves them empty,
  which the search does not need (it specializes on features and cores).
- tasks.traceback: the traceback of an error in a task's search (a bug), which failed the task.

Downgrade drops what this adds but cannot restore the old workload hashes (they came from the old
printer's text): an older version opening a downgraded database will not find its workloads by hash.
"""

import hashlib
import logging
import re

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")
TRACE_KEYS = ("workload_id", "hardware_id", "trace_hash")
PROGRAM_KEYS = ("workload_id", "hardware_id", "program_hash")


def upgrade() -> None:
    _rehash_workloads()
    for table in ("tuning_records", "candidates"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("program_hash", sa.String(length=64), nullable=True))
        op.execute(sa.text(f"UPDATE {table} SET program_hash = trace_hash"))
        with op.batch_alter_table(table) as batch:
            batch.alter_column("program_hash", existing_type=sa.String(length=64), nullable=False)
            batch.drop_constraint(op.f(f"uq_{table}_workload_id_hardware_id_trace_hash"), type_="unique")
            batch.create_unique_constraint(
                op.f(f"uq_{table}_workload_id_hardware_id_program_hash"), PROGRAM_KEYS
            )
    with op.batch_alter_table("hardware") as batch:
        batch.alter_column("cpu", new_column_name="cpu_model", existing_type=sa.String(length=200))
        batch.add_column(sa.Column("triple", sa.String(length=200), server_default="", nullable=False))
        batch.add_column(sa.Column("mcpu", sa.String(length=200), server_default="", nullable=False))
    _fill_target()
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("traceback", sa.Text(), nullable=True))


def _rehash_workloads() -> None:
    """Each workload's hash, recomputed from its spec; a spec that no longer builds, or whose new hash
    another workload already has, keeps its old hash (and says so in the log)."""
    from compiler.workloads import WorkloadError, workload_from_spec

    connection = op.get_bind()
    workloads = sa.table("workloads", sa.column("id"), sa.column("hash"), sa.column("spec", sa.JSON))
    rows = connection.execute(sa.select(workloads.c.id, workloads.c.hash, workloads.c.spec)).all()
    taken = {r.hash for r in rows}
    for row in rows:
        try:
            new = workload_from_spec(row.spec).func.structural_hash()
        except WorkloadError as e:
            log.warning("workload %d keeps its old hash: its spec no longer builds (%s)", row.id, e)
            continue
        if new in taken:
            log.warning("workload %d keeps its old hash: another workload has hash %s", row.id, new)
            continue
        connection.execute(workloads.update().where(workloads.c.id == row.id).values(hash=new))
        taken.discard(row.hash)
        taken.add(new)


# The triples a key may have been made with: its digest says which (if any) it was.
TRIPLES = ("x86_64-unknown-linux-gnu", "x86_64-pc-linux-gnu", "aarch64-unknown-linux-gnu")


def _fill_target() -> None:
    """An older key is "<mcpu>-<digest>-<n>c", the digest of "<triple>|<mcpu>|<features>": mcpu is
    read from it, and the triple is the one whose digest matches (none: left empty)."""
    connection = op.get_bind()
    hardware = sa.table(
        "hardware",
        sa.column("id"),
        sa.column("key"),
        sa.column("features"),
        sa.column("mcpu"),
        sa.column("triple"),
    )
    for row in connection.execute(sa.select(hardware.c.id, hardware.c.key, hardware.c.features)).all():
        match = re.fullmatch(r"(.+)-([0-9a-f]{12})-\d+c", row.key)
        if not match:
            continue
        mcpu, digest = match.groups()
        made_with = [t for t in TRIPLES if _digest(t, mcpu, row.features) == digest]
        triple = made_with[0] if made_with else ""
        connection.execute(hardware.update().where(hardware.c.id == row.id).values(mcpu=mcpu, triple=triple))


def _digest(triple: str, mcpu: str, features: str) -> str:
    return hashlib.sha256(f"{triple}|{mcpu}|{features}".encode()).hexdigest()[:12]


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("traceback")
    with op.batch_alter_table("hardware") as batch:
        batch.drop_column("mcpu")
        batch.drop_column("triple")
        batch.alter_column("cpu_model", new_column_name="cpu", existing_type=sa.String(length=200))
    for table in ("candidates", "tuning_records"):
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(op.f(f"uq_{table}_workload_id_hardware_id_program_hash"), type_="unique")
            batch.create_unique_constraint(op.f(f"uq_{table}_workload_id_hardware_id_trace_hash"), TRACE_KEYS)
            batch.drop_column("program_hash")
