"""The first schema: lease, lease terms, runs, per-job state, job events.

Revision ID: 0001
Revises:
Create Date: 2026-12-01

"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _timestamp() -> sa.types.TypeEngine[Any]:
    # Frozen copy of UTCDateTime's DDL, so this revision keeps meaning what it meant when types.py changes.
    # PostgreSQL keeps microseconds without a precision; MySQL needs fsp=6 or it drops them.
    return (
        sa.DateTime()
        .with_variant(postgresql.TIMESTAMP(timezone=True), "postgresql")
        .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
    )


def _big_id() -> sa.types.TypeEngine[int]:
    # SQLite autoincrements only an INTEGER PRIMARY KEY.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "scheduler_lease",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("term", sa.BigInteger(), nullable=False),
        sa.Column("acquired_at", _timestamp(), nullable=False),
        sa.Column("renewed_at", _timestamp(), nullable=False),
        sa.Column("expires_at", _timestamp(), nullable=False),
    )
    op.create_table(
        "lease_terms",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("term", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("acquired_at", _timestamp(), nullable=False),
        sa.Column("renewed_at", _timestamp(), nullable=False),
        sa.Column("expires_at", _timestamp(), nullable=False),
        sa.Column("ended_at", _timestamp(), nullable=True),
        sa.Column("end_reason", sa.String(32), nullable=True),
        sa.Column("schedctl_version", sa.String(32), nullable=False),
        sa.Column("tzdata_version", sa.String(32), nullable=False),
    )
    op.create_table(
        "job_runs",
        sa.Column("job_id", sa.String(255), primary_key=True),
        sa.Column("scheduled_for", _timestamp(), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(32), nullable=True),
        sa.Column("reason_detail", sa.Text(), nullable=True),
        sa.Column("manual", sa.Boolean(), nullable=False),
        sa.Column("term", sa.BigInteger(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(255), nullable=True),
        sa.Column("heartbeat_at", _timestamp(), nullable=True),
        sa.Column("queued_at", _timestamp(), nullable=False),
        sa.Column("not_before", _timestamp(), nullable=True),
        sa.Column("started_at", _timestamp(), nullable=True),
        sa.Column("finished_at", _timestamp(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("exit_status", sa.Integer(), nullable=True),
        sa.Column("output_tail", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("checkpoint", sa.JSON(), nullable=True),
        sa.Column("snapshot", sa.JSON(), nullable=True),
        sa.Column("labels_key", sa.String(512), nullable=False),
        sa.Column("concurrency", sa.String(16), nullable=False),
        sa.Column("exclusive", sa.Integer(), nullable=True),
        sa.UniqueConstraint("job_id", "exclusive", name="uq_job_runs_exclusive"),
    )
    op.create_index("ix_job_runs_state_not_before", "job_runs", ["state", "not_before"])
    op.create_index("ix_job_runs_state_scheduled", "job_runs", ["state", "scheduled_for"])
    op.create_index("ix_job_runs_state_heartbeat", "job_runs", ["state", "heartbeat_at"])
    op.create_table(
        "job_state",
        sa.Column("job_id", sa.String(255), primary_key=True),
        sa.Column("schedule_key", sa.String(512), nullable=False),
        sa.Column("defined_at", _timestamp(), nullable=False),
        sa.Column("last_dispatched", _timestamp(), nullable=True),
        sa.Column("paused_at", _timestamp(), nullable=True),
        sa.Column("paused_by_file", sa.Boolean(), nullable=False),
        sa.Column("refused_at", _timestamp(), nullable=True),
        sa.Column("refused_detail", sa.Text(), nullable=True),
        sa.Column("history_start", _timestamp(), nullable=True),
        sa.Column("updated_at", _timestamp(), nullable=False),
    )
    op.create_table(
        "job_events",
        sa.Column("id", _big_id(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(255), nullable=False),
        sa.Column("at", _timestamp(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
    )
    op.create_index("ix_job_events_job_at", "job_events", ["job_id", "at"])


def downgrade() -> None:
    for table in ("job_events", "job_state", "job_runs", "lease_terms", "scheduler_lease"):
        op.drop_table(table)
