"""``job_runs`` in aggregate, for the metrics sampler and ``schedctl top``: each an aggregate or a LIMITed
list, so its cost does not grow with the number of jobs or of kept runs.

A run counts as due once it is queued with ``not_before`` unset or passed, by the database's clock: the rule
the worker claims by, so a retry waiting out its backoff is neither depth nor "stuck".
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.engine import Connection

from schedctl.jobs.job import RunState
from schedctl.store.schema import QUEUED, RUNNING, job_runs
from schedctl.store.types import UTCDateTime


def _due(now: datetime) -> tuple[Any, Any]:
    r = job_runs.c
    # QUEUED inline, so the partial queued index serves the count.
    return (r.state == QUEUED, or_(r.not_before.is_(None), r.not_before <= now))


def due_depth_and_oldest_wait(conn: Connection, now: datetime) -> tuple[int, datetime | None]:
    """How many runs are due, and since when the longest-waiting one waits (its not_before, else its tick)."""
    r = job_runs.c
    waiting_since = func.coalesce(r.not_before, r.scheduled_for, type_=UTCDateTime())
    depth, oldest = conn.execute(
        select(func.count(), func.min(waiting_since, type_=UTCDateTime())).where(*_due(now))
    ).one()
    return int(depth), oldest


def due_depth_and_oldest_queued(conn: Connection, now: datetime) -> tuple[int, datetime | None]:
    """How many runs are due, and the oldest ``queued_at`` among them."""
    r = job_runs.c
    depth, oldest = conn.execute(
        select(func.count(), func.min(r.queued_at, type_=UTCDateTime())).where(*_due(now))
    ).one()
    return int(depth), oldest


def running_per_worker(conn: Connection) -> dict[str, int]:
    """Worker identity ("" for none recorded) -> how many runs it is executing."""
    r = job_runs.c
    query = select(r.worker, func.count()).where(r.state == RUNNING).group_by(r.worker)
    return {worker or "": int(n) for worker, n in conn.execute(query)}


def newest_in_states(conn: Connection, states: Sequence[str], newest: str, limit: int) -> list[Any]:
    """The ``limit`` runs in ``states`` with the greatest ``newest`` column (``finished_at``,
    ``scheduled_for``), newest first: job_id, scheduled_for, state, finished_at, exit_status,
    reason_detail, error."""
    r = job_runs.c
    query = (
        select(r.job_id, r.scheduled_for, r.state, r.finished_at, r.exit_status, r.reason_detail, r.error)
        .where(r.state.in_(states))
        .order_by(job_runs.c[newest].desc())
        .limit(limit)
    )
    return list(conn.execute(query))


def last_success_per_job(conn: Connection) -> list[tuple[str, datetime | None]]:
    """Each job's newest ``finished_at`` of a succeeded run (pruning always keeps the newest success)."""
    r = job_runs.c
    query = (
        select(r.job_id, func.max(r.finished_at, type_=UTCDateTime()))
        .where(r.state == RunState.SUCCEEDED, r.finished_at.is_not(None))
        .group_by(r.job_id)
    )
    return [(job_id, finished_at) for job_id, finished_at in conn.execute(query)]
