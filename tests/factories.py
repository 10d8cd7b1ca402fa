"""Rows the store tests seed by hand, and the run a worker's executor tests start, written once.

Tests import this as ``factories`` (``pythonpath = ["tests"]`` in pyproject's pytest options).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, select

from schedctl.jobs.job import Job
from schedctl.store import runrows
from schedctl.store.dialect import insert_ignore
from schedctl.store.schema import job_events, job_runs, job_state, job_versions, lease_terms, scheduler_lease
from schedctl.worker.executor import RunIdentity

LEASE_NAME = "cron"
# The seeded terms were last renewed this long before they expire, unless a test says otherwise.
RENEW_BEFORE_EXPIRY = timedelta(seconds=15)


def add_term(
    conn,
    term: int,
    holder: str,
    acquired: datetime,
    expires: datetime,
    ended: datetime | None = None,
    end_reason: str | None = None,
    *,
    current: bool = False,
    renewed: datetime | None = None,
    grace: float | None = None,
    tzdata: str = "2025b",
) -> None:
    """One leader term in lease_terms; with ``current``, also the live lease row it holds (replacing any)."""
    renewed = renewed if renewed is not None else expires - RENEW_BEFORE_EXPIRY
    conn.execute(
        insert(lease_terms).values(
            name=LEASE_NAME,
            term=term,
            holder=holder,
            acquired_at=acquired,
            renewed_at=renewed,
            expires_at=expires,
            ended_at=ended,
            end_reason=end_reason,
            schedctl_version="0.1.0",
            tzdata_version=tzdata,
            catch_up_grace=grace,
        )
    )
    if current:
        conn.execute(scheduler_lease.delete())
        conn.execute(
            insert(scheduler_lease).values(
                name=LEASE_NAME,
                holder=holder,
                term=term,
                acquired_at=acquired,
                renewed_at=renewed,
                expires_at=expires,
            )
        )


def add_state(conn, job: Job, defined_at: datetime, last_dispatched: datetime | None, **extra) -> None:
    """The job's job_state row and its `defined` event, as the scheduler writes them on first sight."""
    row = dict(
        job_id=job.id,
        schedule_key=job.schedule_key,
        defined_at=defined_at,
        last_dispatched=last_dispatched,
        paused_by_file=job.paused,
        updated_at=defined_at,
    )
    conn.execute(insert(job_state).values(**{**row, **extra}))
    conn.execute(insert(job_events).values(job_id=job.id, at=defined_at, kind="defined", detail=None))


def run_row(
    job: Job,
    t: datetime,
    state: str,
    *,
    term: int | None = 1,
    finished_after: timedelta = timedelta(seconds=4),
    failed_exit: int = 2,
    timed_out_exit: int | None = 2,
    **extra,
) -> dict:
    """A job_runs row for the tick ``t`` in ``state``: started a second after its tick by worker w1:1:aa, and,
    when it ended, finished ``finished_after`` the tick. Every row has every key (one multi-row insert)."""
    row = dict(
        job_id=job.id,
        scheduled_for=t,
        state=state,
        manual=False,
        term=term,
        attempt=0 if state in ("queued", "skipped") else 1,
        failures=0,
        queued_at=t,
        version=runrows.shared_values(job)[0],
        labels_key=job.labels_key,
        concurrency=str(job.concurrency),
        reason=None,
        reason_detail=None,
        started_at=None,
        worker=None,
        finished_at=None,
        exit_status=None,
    )
    if state not in ("queued", "skipped"):
        row.update(started_at=t + timedelta(seconds=1), worker="w1:1:aa")
    if state in ("succeeded", "failed", "timed_out", "cancelled"):
        exits = {"succeeded": 0, "timed_out": timed_out_exit}
        row.update(finished_at=t + finished_after, exit_status=exits.get(state, failed_exit))
    return {**row, **extra}


def add_runs(conn, job: Job, ticks: list[datetime], state: str = "succeeded", **row) -> None:
    """Rows the way the scheduler inserts them (insert_ignore), then the worker's outcome."""
    rows = [run_row(job, t, state, **row) for t in ticks]
    runrows.write_versions(conn, [job.id], [runrows.shared_values(job)])
    assert insert_ignore(conn, job_runs, rows) == len(rows)


def snapshot_of(conn, job_id: str, scheduled_for: datetime) -> dict | None:
    """The snapshot the run of ``job_id`` at ``scheduled_for`` was queued with, read through its version."""
    r, v = job_runs.c, job_versions.c
    return conn.execute(
        select(v.snapshot)
        .select_from(job_runs.join(job_versions, (v.job_id == r.job_id) & (v.version == r.version)))
        .where(r.job_id == job_id, r.scheduled_for == scheduled_for)
    ).scalar_one_or_none()


def count_version_writes(monkeypatch) -> list[list[str]]:
    """Spy on the store's one writer of job_versions rows: each call that writes versions appends the job ids
    it wrote, so a test can say which batches wrote a version and which trusted the leader's record."""
    writes: list[list[str]] = []
    real = runrows.insert_ignore_columns

    def counting(conn: Any, table: Any, columns: dict[str, list[Any]], **kw: Any) -> int:
        if table is job_versions:
            writes.append(columns["job_id"])
        return real(conn, table, columns, **kw)

    monkeypatch.setattr(runrows, "insert_ignore_columns", counting)
    return writes


def register_worker(store, identity: str = "w1:1:aa", labels: dict[str, str] | None = None) -> None:
    """An alive worker in the registry, so queued runs read as waiting for it, not stranded."""
    from schedctl.store import workers

    me = workers.Registration(identity, "worker", "h", 1, "0.1.0", "2025b", labels or {}, 4, 1.0, 60.0)
    with store.begin() as conn:
        workers.register(conn, me)


def seed_settled_jobs(
    store,
    n: int,
    now: datetime,
    *,
    job_id: Callable[[int], str],
    schedule_key: Callable[[int], str],
    states: tuple[str, ...] = ("succeeded", "failed", "skipped"),
    spread_minutes: int = 50,
    offset_minutes: int = 1,
) -> None:
    """``n`` jobs as a leader leaves them, for the scale tests and bench/top.py: a job_state row each and one
    settled run each, job ``i`` in ``states[i % len(states)]``, its tick ``i % spread_minutes +
    offset_minutes`` minutes before ``now``, finished a minute after it (a skipped one never ran).
    Inserted 2,000 rows at a time."""
    rows_state, rows_run = [], []
    for i in range(n):
        ident = job_id(i)
        rows_state.append(
            dict(
                job_id=ident,
                schedule_key=schedule_key(i),
                defined_at=now - timedelta(days=1),
                last_dispatched=now - timedelta(minutes=1),
                paused_at=None,
                paused_by_file=False,
                refused_at=None,
                refused_detail=None,
                history_start=None,
                updated_at=now,
            )
        )
        state = states[i % len(states)]
        tick = now - timedelta(minutes=i % spread_minutes + offset_minutes)
        skipped = state == "skipped"
        rows_run.append(
            dict(
                job_id=ident,
                scheduled_for=tick,
                state=state,
                manual=False,
                attempt=1,
                failures=0,
                queued_at=tick,
                finished_at=None if skipped else tick + timedelta(minutes=1),
                exit_status={"succeeded": 0, "failed": 1}.get(state),
                cancel_requested=False,
                labels_key="",
                concurrency="forbid",
                reason="concurrency" if skipped else None,
                reason_detail="a run of the job was still queued or running" if skipped else None,
                error="exited with status 1" if state == "failed" else None,
            )
        )
    with store.begin() as conn:
        for start in range(0, n, 2000):
            conn.execute(insert(job_state), rows_state[start : start + 2000])
            conn.execute(insert(job_runs), rows_run[start : start + 2000])


# A run as the executor tests start it: a microsecond tick, a third attempt.
RUN = RunIdentity("nightly-export", datetime(2026, 3, 29, 1, 30, 0, 5000, tzinfo=UTC), 3)


def snapshot(command, **kw):
    base = {
        "command": command,
        "stdin": None,
        "env": {},
        "pass_env": [],
        "workdir": None,
        "user": None,
        "timeout": None,
        "grace_period": 1.0,
        "retries": 0,
        "retry_backoff": 1.0,
    }
    base.update(kw)
    return base
