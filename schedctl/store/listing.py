"""Read-only queries for ``schedctl jobs``: the last run of each job, and pauses set by ``schedctl pause``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, func, select

from schedctl.jobs.job import RunState
from schedctl.store import Store
from schedctl.store.dialect import id_chunks, in_list
from schedctl.store.history import RUN_COLUMNS, run_record
from schedctl.store.rows import RunRecord
from schedctl.store.schema import job_runs, job_state

# Enough ids per IN (...) list to keep round trips few, few enough for every backend's parameter limit.


def last_runs(store: Store, job_ids: Sequence[str]) -> dict[str, RunRecord]:
    """Each job's latest run that a worker took up (any state but queued or skipped), manual runs included.

    The primary key (job_id, scheduled_for) serves the max per job; the join reads that one row's state.
    """
    found: dict[str, RunRecord] = {}
    with store.read() as conn:
        for chunk in id_chunks(conn, job_ids):
            latest = (
                select(job_runs.c.job_id, func.max(job_runs.c.scheduled_for).label("at"))
                .where(
                    in_list(conn, job_runs.c.job_id, chunk),
                    job_runs.c.state.not_in((RunState.QUEUED, RunState.SKIPPED)),
                )
                .group_by(job_runs.c.job_id)
                .subquery()
            )
            query = select(*RUN_COLUMNS).join(
                latest, and_(job_runs.c.job_id == latest.c.job_id, job_runs.c.scheduled_for == latest.c.at)
            )
            for row in conn.execute(query):
                run = run_record(row)
                found[run.job_id] = run
    return found


def paused_in_database(store: Store, job_ids: Sequence[str]) -> dict[str, datetime]:
    """Jobs paused with ``schedctl pause`` (job_state.paused_at), and since when."""
    found: dict[str, datetime] = {}
    with store.read() as conn:
        for chunk in id_chunks(conn, job_ids):
            query = select(job_state.c.job_id, job_state.c.paused_at).where(
                in_list(conn, job_state.c.job_id, chunk), job_state.c.paused_at.is_not(None)
            )
            for job_id, paused_at in conn.execute(query):
                found[job_id] = paused_at
    return found
