"""Trust and fair use: tasks owned by the token that submitted them, hardware approved by an admin, and a
would-be best held until a second lease re-measures it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24

- tasks.token_id: the token that submitted the task (a client token sees and cancels its own tasks
  only). Tasks submitted before have none: only admins see them.
- tasks.candidate_secs: the seconds one candidate of the task is estimated to take on a worker, which
  a token's quota of worker time counts. Older tasks count 0.
- hardware.approved_at: when an admin approved the kind of machine; tasks target approved hardware
  only. Every kind already registered is approved (tasks and clients already use them), as of its
  registration.
- hardware.peak_gflops: the machine's peak, if an admin registered it: faster measurements are refused.
- candidates.held_result: a result that would be the new best, waiting for its re-measurement.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("token_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("candidate_secs", sa.Double(), server_default="0", nullable=False))
        batch.create_foreign_key(
            op.f("fk_tasks_token_id_api_tokens"), "api_tokens", ["token_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_index(op.f("ix_tasks_token_id"), ["token_id"], unique=False)
    with op.batch_alter_table("hardware") as batch:
        batch.add_column(sa.Column("approved_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("peak_gflops", sa.Double(), nullable=True))
    op.execute(sa.text("UPDATE hardware SET approved_at = created_at"))
    with op.batch_alter_table("candidates") as batch:
        batch.add_column(sa.Column("held_result", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("candidates") as batch:
        batch.drop_column("held_result")
    with op.batch_alter_table("hardware") as batch:
        batch.drop_column("peak_gflops")
        batch.drop_column("approved_at")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_index(op.f("ix_tasks_token_id"))
        batch.drop_constraint(op.f("fk_tasks_token_id_api_tokens"), type_="foreignkey")
        batch.drop_column("candidate_secs")
        batch.drop_column("token_id")
