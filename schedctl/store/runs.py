"""The queries behind `schedctl runs`, `run`, `logs` and `cancel`."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update

from schedctl.errors import RunNotFound, SchedctlError
from schedctl.jobs.job import CancelResult, Job, RunState, StopReason
from schedctl.store import Store
from schedctl.store.dialect import db_now
from schedctl.store.history import RUN_COLUMNS, run_record
from schedctl.store.rows import RunRecord
from schedctl.store.runrows import queue_runs
from schedctl.store.schema import job_runs
from schedctl.text.printable import quoted
from schedctl.timing.timetext import instant_text


def list_runs(
    store: Store, job_id: str | None = None, state: str | None = None, limit: int = 20
) -> list[RunRecord]:
    """The newest runs first (by tick), optionally of one job and in one state."""
    r = job_runs.c
    query = select(*RUN_COLUMNS).order_by(r.scheduled_for.desc(), r.job_id).limit(limit)
    if job_id is not None:
        query = query.where(r.job_id == job_id)
    if state is not None:
        query = query.where(r.state == state)
    with store.read() as conn:
        return [run_record(row) for row in conn.execute(query)]


def run_output(store: Store, job_id: str, scheduled_for: datetime | None) -> tuple[RunRecord, str | None]:
    """A run and its stored output tail; without ``scheduled_for``, the job's latest run that started."""
    r = job_runs.c
    query = select(*RUN_COLUMNS, r.output_tail).where(r.job_id == job_id)
    if scheduled_for is not None:
        query = query.where(r.scheduled_for == scheduled_for)
    else:
        query = query.where(r.started_at.is_not(None)).order_by(r.scheduled_for.desc()).limit(1)
    with store.read() as conn:
        row = conn.execute(query).first()
    if row is None:
        raise RunNotFound(_missing(job_id, scheduled_for))
    return run_record(row), row.output_tail


def run_progress(
    store: Store, job_id: str, scheduled_for: datetime
) -> tuple[RunRecord, str | None, int | None]:
    """One run, its output tail and how many characters its attempt printed so far (``output_size``, of
    which the tail is the end; None when the worker that wrote the row did not count): what ``logs -f``
    polls. One primary-key read."""
    r = job_runs.c
    query = select(*RUN_COLUMNS, r.output_tail, r.output_size).where(
        r.job_id == job_id, r.scheduled_for == scheduled_for
    )
    with store.read() as conn:
        row = conn.execute(query).first()
    if row is None:
        raise RunNotFound(_missing(job_id, scheduled_for))
    return run_record(row), row.output_tail, row.output_size


def current_run(store: Store, job_id: str) -> datetime:
    """The run ``logs -f JOB`` follows: the newest running one, else the next to start (the oldest queued:
    a run just queued by ``schedctl run``), else the newest that started."""
    r = job_runs.c
    with store.read() as conn:
        for state, order in ((RunState.RUNNING, r.scheduled_for.desc()), (RunState.QUEUED, r.scheduled_for)):
            found = conn.execute(
                select(r.scheduled_for).where(r.job_id == job_id, r.state == state).order_by(order).limit(1)
            ).scalar_one_or_none()
            if found is not None:
                return found  # type: ignore[no-any-return]
        found = conn.execute(
            select(r.scheduled_for)
            .where(r.job_id == job_id, r.started_at.is_not(None))
            .order_by(r.scheduled_for.desc())
            .limit(1)
        ).scalar_one_or_none()
    if found is None:
        raise RunNotFound(f"job {quoted(job_id)} has no run queued, running or started")
    return found  # type: ignore[no-any-return]


def queue_manual(store: Store, job: Job, now: datetime) -> datetime:
    """Queue a manual run keyed by ``now`` to the microsecond; returns that key."""
    with store.begin() as conn:
        queue_runs(conn, job, [now], manual=True)
    return now


def cancel(store: Store, job_id: str, scheduled_for: datetime) -> str:
    """Cancel a queued run at once or ask the worker of a running one to stop it.

    Returns the ``CancelResult``, or the run's state when it had already ended (nothing changed).
    """
    r = job_runs.c
    key = (r.job_id == job_id, r.scheduled_for == scheduled_for)
    with store.begin() as conn:
        queued = conn.execute(
            update(job_runs)
            .where(*key, r.state == RunState.QUEUED)
            .values(
                state=RunState.CANCELLED,
                finished_at=db_now(),
                reason=StopReason.CANCELLED,  # as the worker records a cancelled running run
                error="cancelled on request",
                exclusive=None,
            )
        )
        if queued.rowcount:
            return CancelResult.CANCELLED
        running = conn.execute(
            update(job_runs).where(*key, r.state == RunState.RUNNING).values(cancel_requested=True)
        )
        if running.rowcount:
            return CancelResult.CANCEL_REQUESTED
        state = conn.execute(select(r.state).where(*key)).scalar_one_or_none()
    if state is None:
        raise RunNotFound(_missing(job_id, scheduled_for))
    return str(state)


def resolve_tick(store: Store, job_id: str, given: datetime) -> datetime:
    """The run key ``given`` names. A manual run is keyed to the microsecond; a tick typed to the second
    (no fraction) names the one run of the job inside that second, and several there are an error that
    lists them. A time with a fraction is taken as exact."""
    if given.microsecond:
        return given
    r = job_runs.c
    with store.read() as conn:
        found = list(
            conn.execute(
                select(r.scheduled_for)
                .where(
                    r.job_id == job_id,
                    r.scheduled_for >= given,
                    r.scheduled_for < given + timedelta(seconds=1),
                )
                .order_by(r.scheduled_for)
                .limit(11)
            ).scalars()
        )
    if len(found) <= 1:
        return found[0] if found else given
    listed = ", ".join(instant_text(f) for f in found[:10])
    more = " (and more)" if len(found) > 10 else ""
    raise SchedctlError(
        f"{len(found)} runs of {quoted(job_id)} fall in {instant_text(given)}: {listed}{more}; give one"
    )


def _missing(job_id: str, scheduled_for: datetime | None) -> str:
    if scheduled_for is None:
        return f"job {quoted(job_id)} has no run that started"
    return f"no run of {quoted(job_id)} scheduled for {instant_text(scheduled_for)}"
