"""The rows of ``schedctl jobs``: each job with its next fire and, when a current database is there, its last run.

It must work before any database exists, and must not create one: a SQLite URL whose file is missing is
"no database" without opening anything (SQLite would create the file), and SQLAlchemy is imported only when a
database is actually read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from schedctl.errors import StoreError
from schedctl.jobs.job import Job
from schedctl.timing.zones import load_zone

if TYPE_CHECKING:
    from schedctl.store import Store


@dataclass(frozen=True)
class JobRow:
    job: Job
    when: str  # the schedule in plain English ("at 02:30 every day"); the job's own description is job's
    next_fire: datetime | None  # in the job's zone; None when it never fires again or is paused
    last_run_at: datetime | None  # aware UTC scheduled_for of the last run a worker took up
    last_run_state: str | None
    paused_at: datetime | None  # set by `schedctl pause`, from the database

    @property
    def paused(self) -> bool:
        return self.job.paused or self.paused_at is not None

    def to_json(self) -> dict[str, Any]:
        job = self.job
        return {
            "id": job.id,
            "schedule": job.schedule,
            "when": self.when,
            "description": job.description,
            "timezone": job.timezone,
            "catch_up": str(job.catch_up),
            "max_catch_up": job.max_catch_up,
            "concurrency": str(job.concurrency),
            "paused": self.paused,
            "paused_at": _iso(self.paused_at),
            "next_fire": _iso(self.next_fire),
            "next_fire_utc": _iso(self.next_fire.astimezone(UTC) if self.next_fire else None),
            "last_run_scheduled_for": _iso(self.last_run_at),
            "last_run_state": self.last_run_state,
        }


@dataclass(frozen=True)
class Listing:
    rows: list[JobRow]
    database_read: bool
    warning: str | None  # one line for stderr when a database was there but could not be read


def list_jobs(
    jobs: Mapping[str, Job], now: datetime, open_database: Callable[[], Store | None] | None = None
) -> Listing:
    """Rows sorted like ``systemctl list-timers``: by next fire, jobs that will not fire last, then by id.
    ``open_database`` gives a checked store, or None when there is no database to read (yet)."""
    from schedctl.timing.cron import schedule_for

    last: dict[str, Any] = {}
    paused: dict[str, datetime] = {}
    read, warning = False, None
    if jobs and open_database is not None:
        try:
            store = open_database()
            if store is not None:
                last, paused = _read_database(store, list(jobs))
                read = True
        except StoreError as exc:
            warning = f"last runs not shown: {exc}".splitlines()[0]
    rows = []
    for job in jobs.values():
        schedule = schedule_for(job.schedule, job.timezone, job.dst)
        next_fire = None
        if not job.paused and job.id not in paused:
            fire = schedule.next_after(now)
            next_fire = fire.astimezone(load_zone(job.timezone)) if fire else None
        run = last.get(job.id)
        rows.append(
            JobRow(
                job=job,
                when=schedule.describe(),
                next_fire=next_fire,
                last_run_at=run.scheduled_for if run else None,
                last_run_state=run.state if run else None,
                paused_at=paused.get(job.id),
            )
        )
    rows.sort(key=lambda r: (r.next_fire is None, r.next_fire.timestamp() if r.next_fire else 0.0, r.job.id))
    return Listing(rows=rows, database_read=read, warning=warning)


def _read_database(store: Store, job_ids: list[str]) -> tuple[dict[str, Any], dict[str, datetime]]:
    from schedctl.store.listing import last_runs, paused_in_database

    try:
        return last_runs(store, job_ids), paused_in_database(store, job_ids)
    finally:
        store.dispose()


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None
