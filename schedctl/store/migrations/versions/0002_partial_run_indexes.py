"""job_runs indexes that hold only the rows they serve, and a claim index in the claim's order.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

Before: (state, not_before), (state, scheduled_for) and (state, heartbeat_at) over every row, and a unique
constraint (job_id, exclusive) with an entry for every row. A claim could use none of the state indexes
(it asked for queued or stale runs in one OR) and sorted the whole queue: 220 ms a claim with 100,000
queued runs on PostgreSQL. After: a queued index in claim order, a running index by heartbeat, and the
unique index only over executing `forbid` runs; partial on PostgreSQL and SQLite.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_OLD_INDEXES = {
    "ix_job_runs_state_not_before": ["state", "not_before"],
    "ix_job_runs_state_scheduled": ["state", "scheduled_for"],
    "ix_job_runs_state_heartbeat": ["state", "heartbeat_at"],
}


def _partial(predicate: str) -> dict[str, Any]:
    return {"postgresql_where": sa.text(predicate), "sqlite_where": sa.text(predicate)}


def upgrade() -> None:
    for name in _OLD_INDEXES:
        op.drop_index(name, table_name="job_runs")
    # SQLite cannot drop a table constraint: batch mode rebuilds the table without it.
    with op.batch_alter_table("job_runs") as batch:
        batch.drop_constraint("uq_job_runs_exclusive", type_="unique")
    op.create_index(
        "uq_job_runs_exclusive",
        "job_runs",
        ["job_id", "exclusive"],
        unique=True,
        **_partial("exclusive IS NOT NULL"),
    )
    op.create_index(
        "ix_job_runs_queued", "job_runs", ["state", "scheduled_for", "job_id"], **_partial("state = 'queued'")
    )
    op.create_index(
        "ix_job_runs_running", "job_runs", ["state", "heartbeat_at"], **_partial("state = 'running'")
    )


def downgrade() -> None:
    for name in ("ix_job_runs_running", "ix_job_runs_queued", "uq_job_runs_exclusive"):
        op.drop_index(name, table_name="job_runs")
    with op.batch_alter_table("job_runs") as batch:
        batch.create_unique_constraint("uq_job_runs_exclusive", ["job_id", "exclusive"])
    for name, columns in _OLD_INDEXES.items():
        op.create_index(name, "job_runs", columns)
