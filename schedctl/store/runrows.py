"""The one builder of queued run rows: the leader's dispatch, `schedctl replay` and `schedctl run` (and
``queue_runs`` in tests and benchmarks) all write a ``job_runs`` row through ``insert_runs``.

A row is what its tick decided (state, reason, detail, not_before) plus what its job definition shares with
every other row of it (``Shared``: computed once per definition, see ``dispatch.RowValues``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from schedctl.job import Concurrency, Job, RunState
from schedctl.store.dialect import insert_ignore_columns
from schedctl.store.schema import job_runs

# (snapshot as JSON text, labels_key, str(concurrency), concurrency): what every run row of a definition shares.
Shared = tuple[str, str, str, Concurrency]

_JSON_TEXT = frozenset({"snapshot"})
_QUEUED = str(RunState.QUEUED)


def shared_values(job: Job) -> Shared:
    return (json.dumps(job.snapshot()), job.labels_key, str(job.concurrency), job.concurrency)


def insert_runs(
    conn: Connection,
    job_ids: Sequence[str],
    scheduled_for: Sequence[datetime],
    shared: Sequence[Shared],
    *,
    term: int | None,
    queued_at: datetime | Sequence[datetime],
    states: Sequence[str] | None = None,
    reasons: Sequence[str | None] | None = None,
    details: Sequence[str | None] | None = None,
    not_before: Sequence[datetime | None] | None = None,
    manual: bool = False,
) -> int:
    """Insert-ignore one run row per (job id, tick), built column by column: per row only what differs
    between rows is touched. Omitted per-row columns mean a plain queued run. Returns how many rows were new
    (a tick someone else claimed first counts zero)."""
    n = len(job_ids)
    if not n:
        return 0
    columns: dict[str, list[Any]] = {
        "job_id": list(job_ids),
        "scheduled_for": list(scheduled_for),
        "state": [_QUEUED] * n if states is None else list(states),
        "reason": [None] * n if reasons is None else list(reasons),
        "reason_detail": [None] * n if details is None else list(details),
        "manual": [manual] * n,
        "term": [term] * n,
        "attempt": [0] * n,
        "failures": [0] * n,
        "queued_at": [queued_at] * n if isinstance(queued_at, datetime) else list(queued_at),
        "not_before": [None] * n if not_before is None else list(not_before),
        "cancel_requested": [False] * n,
        "snapshot": [s[0] for s in shared],
        "labels_key": [s[1] for s in shared],
        "concurrency": [s[2] for s in shared],
    }
    return insert_ignore_columns(conn, job_runs, columns, json_text=_JSON_TEXT)


def requeue_values(job: Job, detail: str | None, now: datetime) -> dict[str, Any]:
    """What turning an existing (skipped) row into a queued run writes: the row ``insert_runs`` would have
    written for it, term NULL (no leader dispatched it)."""
    return {
        "state": RunState.QUEUED,
        "reason": None,
        "reason_detail": detail,
        "term": None,
        "queued_at": now,
        "not_before": None,
        "snapshot": job.snapshot(),
        "labels_key": job.labels_key,
        "concurrency": str(job.concurrency),
    }


def queue_runs(conn: Connection, job: Job, instants: Iterable[datetime], manual: bool = False) -> int:
    """Queue runs of ``job`` at ``instants`` the way the scheduler does (term NULL: no lease dispatched them).

    ``schedctl run`` uses it with one instant, now to the microsecond; returns how many rows were new.
    """
    ticks = list(instants)
    shared = shared_values(job)
    return insert_runs(
        conn, [job.id] * len(ticks), ticks, [shared] * len(ticks), term=None, queued_at=ticks, manual=manual
    )
