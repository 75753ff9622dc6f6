"""Models: a whole model tuned as one service task under one trial budget.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24

- models: one row per submitted model (its ONNX source, hardware, budget, scheduler, status, the
  batches its scheduler gave and the estimated-latency curve after each), owned by the token that
  submitted it, as tasks are.
- tasks.model_id and tasks.weight: a model's layers are member tasks, each run `weight` times per
  forward pass. Tasks that exist already are tasks of their own, of weight 1.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
STATUSES = "status IN ('pending', 'running', 'done', 'failed', 'cancelled')"


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("source", sa.LargeBinary(), nullable=False),
        sa.Column("source_format", sa.String(length=16), nullable=False),
        sa.Column("hardware_id", sa.Integer(), nullable=False),
        sa.Column("scheduler", sa.String(length=32), nullable=False),
        sa.Column("trials", sa.Integer(), nullable=False),
        sa.Column("trials_done", sa.Integer(), server_default="0", nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("message", sa.Text(), server_default="", nullable=False),
        sa.Column("batches", JSON, nullable=False),
        sa.Column("curve", JSON, nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=True),
        sa.Column("candidate_secs", sa.Double(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint(STATUSES, name=op.f("ck_models_status")),
        sa.ForeignKeyConstraint(
            ["hardware_id"], ["hardware.id"], name=op.f("fk_models_hardware_id_hardware")
        ),
        sa.ForeignKeyConstraint(
            ["token_id"], ["api_tokens.id"], name=op.f("fk_models_token_id_api_tokens"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_models")),
    )
    op.create_index(op.f("ix_models_status"), "models", ["status"], unique=False)
    op.create_index(op.f("ix_models_token_id"), "models", ["token_id"], unique=False)
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("model_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("weight", sa.Integer(), server_default="1", nullable=False))
        batch.create_foreign_key(
            op.f("fk_tasks_model_id_models"), "models", ["model_id"], ["id"], ondelete="CASCADE"
        )
        batch.create_index(op.f("ix_tasks_model_id"), ["model_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_index(op.f("ix_tasks_model_id"))
        batch.drop_constraint(op.f("fk_tasks_model_id_models"), type_="foreignkey")
        batch.drop_column("weight")
        batch.drop_column("model_id")
    op.drop_index(op.f("ix_models_token_id"), table_name="models")
    op.drop_index(op.f("ix_models_status"), table_name="models")
    op.drop_table("models")
