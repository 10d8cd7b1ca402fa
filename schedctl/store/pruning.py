"""Finished runs beyond the history limits, deleted by the workers (``successful_history``/``failed_history``,
like Kubernetes' ``successfulJobsHistoryLimit``), without ever making a pruned tick look missed: the ticks
before the new history mark are folded into the lasting record first (``missedrecord``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import case, delete, exists, func, insert, literal, or_, select, update
from sqlalchemy.engine import Connection

from schedctl.jobs.job import EventKind, RunState
from schedctl.store import missedrecord
from schedctl.store.claims import FAILED_STATES, FINISHED_STATES
from schedctl.store.dialect import db_now, db_now_plus, id_chunks, in_list
from schedctl.store.missedrecord import DEFAULT_KEEP_MISSED
from schedctl.store.runrows import VERSION_HOLD
from schedctl.store.schema import job_events, job_runs, job_state, job_versions


def prune(
    conn: Connection,
    job_ids: Iterable[str],
    keep_succeeded: int,
    keep_failed: int,
    keep_missed: float = DEFAULT_KEEP_MISSED,
    version_hold: float = VERSION_HOLD,
) -> dict[str, int]:
    """Delete finished runs beyond the history limits; returns how many rows went, per job. A job's versions
    that no remaining run names go with them once last written ``version_hold`` seconds ago (see
    ``runrows.VERSION_HOLD``; tests shorten it).

    ``history_start`` moves to just after the newest pruned tick, never to the oldest kept one: the limits
    are kept independently, so a kept old failure can sit before a pruned success, and `missed`/`replay`
    must never see a pruned tick as a hole. Skipped rows and unrecorded ticks before the mark are folded into
    ``missed_ranges`` first (see ``missedrecord``), kept ``keep_missed`` seconds whatever the limits say.
    """
    pruned: dict[str, int] = {}
    ids = sorted(set(job_ids))
    for job_id in _over_limits(conn, ids, keep_succeeded, keep_failed):
        count = _prune_job(conn, job_id, keep_succeeded, keep_failed, keep_missed, version_hold)
        if count:
            pruned[job_id] = count
    missedrecord.expire(conn, ids, keep_missed)
    return pruned


def _over_limits(conn: Connection, ids: list[str], keep_succeeded: int, keep_failed: int) -> list[str]:
    """The jobs among ``ids`` holding more finished runs than a limit keeps: the only ones with anything to
    prune. One grouped query per chunk of ids, not two per job: a worker that ran 10,000 jobs once each in a
    minute otherwise spent a tenth of its time asking each of them whether it had old runs."""
    r = job_runs.c
    succeeded = func.sum(case((r.state == RunState.SUCCEEDED, 1), else_=0))
    failed = func.sum(case((r.state.in_(FAILED_STATES), 1), else_=0))
    over: list[str] = []
    for chunk in id_chunks(conn, ids):
        over.extend(
            conn.execute(
                select(r.job_id)
                .where(in_list(conn, r.job_id, chunk), r.state.in_(FINISHED_STATES))
                .group_by(r.job_id)
                .having(or_(succeeded > max(0, keep_succeeded), failed > max(0, keep_failed)))
            ).scalars()
        )
    return sorted(over)


def _prune_job(
    conn: Connection, job_id: str, keep_succeeded: int, keep_failed: int, keep_missed: float, hold: float
) -> int:
    r = job_runs.c
    doomed: list[datetime] = []
    for states, keep in (((RunState.SUCCEEDED,), keep_succeeded), (FAILED_STATES, keep_failed)):
        rows = conn.execute(
            select(r.scheduled_for)
            .where(r.job_id == job_id, r.state.in_(states))
            .order_by(r.scheduled_for.desc())
            .offset(max(0, keep))
        ).scalars()
        doomed.extend(rows)
    if not doomed:
        return 0
    mark = max(doomed) + timedelta(microseconds=1)
    skipped = conn.execute(
        select(func.count()).where(r.job_id == job_id, r.state == RunState.SKIPPED, r.scheduled_for < mark)
    ).scalar_one()
    missedrecord.fold_before(conn, job_id, mark, doomed, keep_missed)
    deleted = int(skipped)
    for start in range(0, len(doomed), 500):
        chunk = doomed[start : start + 500]
        result = conn.execute(
            delete(job_runs).where(
                r.job_id == job_id, r.scheduled_for.in_(chunk), r.state.in_(FINISHED_STATES)
            )
        )
        deleted += result.rowcount or 0
    _drop_unnamed_versions(conn, job_id, hold)
    _move_history_start(conn, job_id, mark, deleted)
    return deleted


def _drop_unnamed_versions(conn: Connection, job_id: str, hold: float) -> None:
    """Delete the job's versions no committed run row names and nobody wrote for ``hold`` seconds. The
    hold, not the runs, protects the version a leader is dispatching: it writes a version only every half
    hold (dispatch.RowValues), and its newest rows may not be committed yet (runrows.VERSION_HOLD)."""
    v = job_versions.c
    named = exists().where(job_runs.c.job_id == v.job_id, job_runs.c.version == v.version)
    conn.execute(
        delete(job_versions).where(v.job_id == job_id, ~named, v.written_at <= db_now_plus(literal(-hold)))
    )


def _move_history_start(conn: Connection, job_id: str, mark: datetime, deleted: int) -> None:
    s = job_state.c
    moved = conn.execute(
        update(job_state)
        .where(s.job_id == job_id, or_(s.history_start.is_(None), s.history_start < mark))
        .values(history_start=mark, updated_at=db_now())
    )
    if moved.rowcount:
        conn.execute(
            insert(job_events).values(
                job_id=job_id,
                at=db_now(),
                kind=EventKind.PRUNED,
                detail=f"{deleted} old runs pruned; history starts {mark.isoformat()}",
            )
        )
