"""The prologue the reporting commands share (`missed`, `replay`, `status`, `runs`, `pause`, `resume`, `next`):
the job files (or, for `status` and `missed`, the definitions the leader stored), a store whose schema is
current, the database's clock, and the time options read one way."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

import click

from schedctl.cli._options import resolve_output

if TYPE_CHECKING:
    from schedctl.jobs.job import Job
    from schedctl.store import Store

R = TypeVar("R")


def load_selected(jobs_path: str, job_ids: Iterable[str], now: datetime) -> dict[str, Job]:
    """The named jobs from the job files (all of them when none is named); an unknown id is an error."""
    from schedctl.errors import JobNotFound
    from schedctl.jobs.config import load_jobs
    from schedctl.text.printable import cut, quoted

    jobs = load_jobs(jobs_path, now=now)
    wanted = list(dict.fromkeys(job_ids))
    for job_id in wanted:
        if job_id not in jobs:
            close = difflib.get_close_matches(job_id, list(jobs), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise JobNotFound(f"no job {quoted(job_id)} in {cut(jobs_path)}{hint}")
    return {j: jobs[j] for j in wanted} if wanted else jobs


def jobs_for_report(jobs_path: str, job_ids: Iterable[str], now: datetime, store: Store) -> dict[str, Job]:
    """The jobs a report explains: from the job files, or, where they lack a job (or are missing, or define
    none), as the leader stored it (``inspect.jobsource``); each note on where a definition came from is one
    line on stderr."""
    from schedctl.cli._options import DEFAULT_JOBS
    from schedctl.cli._store import explained
    from schedctl.inspect.jobsource import report_jobs

    with explained(store):
        found = report_jobs(jobs_path, list(job_ids), now, store, default=jobs_path == DEFAULT_JOBS)
    for note in found.notes:
        click.echo(note, err=True)
    return found.jobs


def open_db(db_url: str) -> Store:
    """A store whose schema is current, or one line naming the database and what to run (exit 1)."""
    from schedctl.cli._store import open_checked_store

    return open_checked_store(db_url)


def db_clock(store: Store) -> datetime:
    """The database's clock: what the scheduler judged leases by, so a host whose clock is off still sees the
    lease as the replicas do."""
    from schedctl.store.dialect import select_db_now

    with store.read() as conn:
        now: datetime = select_db_now(conn)
    return now


def parse_time(value: str | None, param: str, now: datetime) -> datetime | None:
    from schedctl.timing.timetext import parse_instant

    if value is None:
        return None
    try:
        return parse_instant(value, now)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=param) from None


@contextmanager
def report_session(
    jobs_path: str, job_id: str | None, db_url: str, output: str, as_json: bool
) -> Iterator[tuple[Store, dict[str, Job], datetime, str]]:
    """The store, the jobs (``job_id`` alone when given), the database's now and the output format of a
    report; the database is named on stderr unless the output is JSON. The store is disposed after."""
    from schedctl.cli._store import say_database

    now = datetime.now(UTC)
    store = open_db(db_url)
    fmt = resolve_output(output, as_json)
    try:
        jobs = jobs_for_report(jobs_path, [job_id] if job_id else [], now, store)
        now = db_clock(store)
        if fmt not in ("json", "jsonl"):
            say_database(store)
        yield store, jobs, now, fmt
    finally:
        store.dispose()


def on_job(
    jobs_path: str, job_id: str, db_url: str, action: Callable[[Store, Job, datetime], R]
) -> tuple[Job, R]:
    """``action(store, job, now)`` for the one job named, at the database's now (`pause`, `resume`)."""
    job = load_selected(jobs_path, [job_id], datetime.now(UTC))[job_id]
    store = open_db(db_url)
    try:
        return job, action(store, job, db_clock(store))
    finally:
        store.dispose()
