"""Pause and resume, recorded in the database so every replica and ``missed`` see them.

A pause set here holds until ``resume``, whatever the job file says (the file's ``paused = true`` pauses too,
independently). The scheduler dispatches nothing for a paused job and, on resume, puts the ticks paused over
through the job's catch-up policy like any downtime.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from schedctl.jobs.job import EventKind, Job, PauseSource
from schedctl.store import Store, jobstate
from schedctl.store import history as h

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

log = logging.getLogger("schedctl.jobcontrol")


@dataclass(frozen=True)
class PauseResult:
    job_id: str
    changed: bool  # False when it already was in the state asked for
    paused_at: datetime | None  # the pause in force after the call (None: not paused in the database)
    paused_by_file: bool  # the job file says paused = true (that pause is not lifted by `resume`)


def actor() -> str:
    """``user@host`` of whoever runs this command, for `status` to say who paused a job."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (a bare container's uid)
        import os

        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()}"[:255]


def pause(store: Store, job: Job, now: datetime, by: str | None = None) -> PauseResult:
    """Set ``job_state.paused_at`` (creating the job's state row if no leader has seen it yet); ``by``
    (default: this user@host) is kept for `status`."""
    with store.begin() as conn:
        _ensure_state(conn, job, now)
        changed = jobstate.set_paused(conn, job.id, now, by or actor())
        if changed:
            _event(conn, job.id, EventKind.PAUSED, now)
        state = h.job_state_of(conn, job.id)
    assert state is not None
    if changed:
        log.info("paused %s", job.id, extra={"event": "job_paused", "job_id": job.id})
    return PauseResult(job.id, bool(changed), state.paused_at, job.paused)


def resume(store: Store, job: Job, now: datetime) -> PauseResult:
    """Clear ``job_state.paused_at``; a job paused in its file stays paused (the result says so)."""
    with store.begin() as conn:
        changed = jobstate.clear_paused(conn, job.id, now)
        if changed:
            _event(conn, job.id, EventKind.RESUMED, now)
    if changed:
        log.info("resumed %s", job.id, extra={"event": "job_resumed", "job_id": job.id})
    return PauseResult(job.id, bool(changed), None, job.paused)


def _ensure_state(conn: Connection, job: Job, now: datetime) -> None:
    # As a leader's first sight would: ticks count from now, so pausing a new job does not invent a backlog.
    if jobstate.record_first_sight(conn, [(job.id, job.schedule_key, False)], now):
        _event(conn, job.id, EventKind.DEFINED, now, "first recorded by schedctl pause")


def _event(
    conn: Connection, job_id: str, kind: EventKind, now: datetime, detail: str = PauseSource.COMMAND
) -> None:
    jobstate.journal(conn, job_id, kind, now, detail)
