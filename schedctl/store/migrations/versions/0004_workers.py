"""The worker registry (`workers`) and when a running run last saved its checkpoint (`checkpoint_at`).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Before: an idle worker was invisible and a dead one noticed only when one of its runs went stale. After:
every `serve` process keeps a row refreshed by the database's clock, for `schedctl workers`, `status`
("no alive worker has labels ...") and `schedctl top`.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _timestamp() -> sa.types.TypeEngine[Any]:
    # Frozen copy of UTCDateTime's DDL, as in 0001.
    return (
        sa.DateTime()
        .with_variant(postgresql.TIMESTAMP(timezone=True), "postgresql")
        .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
    )


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("identity", sa.String(255), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("schedctl_version", sa.String(32), nullable=False),
        sa.Column("tzdata_version", sa.String(32), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=True),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("poll_interval", sa.Float(), nullable=False),
        sa.Column("stale_after", sa.Float(), nullable=False),
        sa.Column("started_at", _timestamp(), nullable=False),
        sa.Column("last_seen_at", _timestamp(), nullable=False),
        sa.Column("stopped_at", _timestamp(), nullable=True),
        sa.Column("stop_reason", sa.Text(), nullable=True),
    )
    with op.batch_alter_table("job_runs") as batch:
        batch.add_column(sa.Column("checkpoint_at", _timestamp(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_runs") as batch:
        batch.drop_column("checkpoint_at")
    op.drop_table("workers")
