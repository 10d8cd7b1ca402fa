"""Writes to ``job_state`` shared by the leader, ``pause``/``resume`` and ``replay``, the ``job_events``
line that journals each of them, and the one-scan read of every job's schedule that ``top`` makes.

One builder per kind of write: a job's first sight is recorded the same way whoever sees it first (a leader,
or ``schedctl pause`` before any leader did), and ``last_dispatched`` moves only forward, whoever decided
the ticks (a dispatch pass or a replay).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, insert, or_, select, update
from sqlalchemy.engine import Connection

from schedctl.store.dialect import id_chunks, in_list, insert_ignore_many
from schedctl.store.rows import StateRecord
from schedctl.store.schema import job_events, job_state

STATE_COLUMNS = (
    job_state.c.job_id,
    job_state.c.schedule_key,
    job_state.c.defined_at,
    job_state.c.last_dispatched,
    job_state.c.paused_at,
    job_state.c.paused_by_file,
    job_state.c.refused_at,
    job_state.c.refused_detail,
    job_state.c.history_start,
    job_state.c.paused_by,
)
# Rows become records by position (a new leader loads every job's row): the orders must agree.
assert [f.name for f in fields(StateRecord)] == [c.name for c in STATE_COLUMNS]


def state_record(row: Any) -> StateRecord:
    """A row of ``STATE_COLUMNS`` as a record (the one mapper of ``job_state``)."""
    values = list(row)
    values[5] = bool(values[5])  # paused_by_file
    return StateRecord(*values)


def record_first_sight(conn: Connection, jobs: Sequence[tuple[str, str | None, bool]], now: datetime) -> int:
    """A job_state row for each ``(job_id, schedule_key, paused_by_file)`` that has none; how many were new.

    Ticks count from ``now``: a job seen for the first time has no backlog, whoever sees it first.
    """
    rows = [
        {
            "job_id": job_id,
            "schedule_key": schedule_key,
            "defined_at": now,
            "last_dispatched": now,
            "paused_by_file": paused_by_file,
            "updated_at": now,
        }
        for job_id, schedule_key, paused_by_file in jobs
    ]
    return insert_ignore_many(conn, job_state, rows)


def advance_last_dispatched(conn: Connection, newest: Mapping[str, datetime], now: datetime) -> None:
    """Move each job's last_dispatched to its tick in ``newest``, never back; one UPDATE per distinct tick
    (a boundary pass decides one tick for thousands of jobs), not one per job."""
    by_tick: dict[datetime, list[str]] = defaultdict(list)
    for job_id, at in newest.items():
        by_tick[at].append(job_id)
    for at, ids in by_tick.items():
        for chunk in id_chunks(conn, ids):
            conn.execute(
                update(job_state)
                .where(
                    in_list(conn, job_state.c.job_id, chunk),
                    or_(job_state.c.last_dispatched.is_(None), job_state.c.last_dispatched < at),
                )
                .values(last_dispatched=at, updated_at=now)
            )


def set_paused(conn: Connection, job_id: str, now: datetime, by: str) -> bool:
    """Pause ``job_id`` in the database; False when it was paused there already."""
    return _change(conn, job_id, job_state.c.paused_at.is_(None), now, paused_at=now, paused_by=by)


def clear_paused(conn: Connection, job_id: str, now: datetime) -> bool:
    """Lift the database's pause of ``job_id``; False when there was none."""
    return _change(conn, job_id, job_state.c.paused_at.is_not(None), now, paused_at=None, paused_by=None)


def clear_refusal(conn: Connection, job_id: str, now: datetime) -> bool:
    """Lift the catch-up refusal of ``job_id``; False when there was none."""
    return _change(
        conn, job_id, job_state.c.refused_at.is_not(None), now, refused_at=None, refused_detail=None
    )


def _change(
    conn: Connection, job_id: str, pending: ColumnElement[bool], now: datetime, **values: Any
) -> bool:
    """Write ``values`` to the row of ``job_id`` where ``pending`` says the change is still to be made; False
    when it was made already, so a second pause or resume says so instead of journalling a change again."""
    changed = conn.execute(
        update(job_state).where(job_state.c.job_id == job_id, pending).values(updated_at=now, **values)
    ).rowcount
    return bool(changed)


def journal(conn: Connection, job_id: str, kind: str, at: datetime, detail: str | None) -> None:
    """One job_events line."""
    conn.execute(insert(job_events).values(job_id=job_id, at=at, kind=kind, detail=detail))


def schedules(conn: Connection) -> list[Any]:
    """Every job_state row's job_id, schedule_key, paused_at, paused_by_file and refused_at, in one scan."""
    js = job_state.c
    return list(
        conn.execute(select(js.job_id, js.schedule_key, js.paused_at, js.paused_by_file, js.refused_at))
    )
