"""What one frame of ``schedctl top`` shows, read from the database in a fixed number of statements.

A frame costs the same ten statements with ten jobs or a hundred thousand (tests/store/test_top.py counts
them): lists are bounded with LIMIT, totals are aggregates, and the next fires come from one read of
``job_state`` and a cache of schedules shared between frames. The whole frame is one read transaction
that never takes SQLite's writer lock (``Store.read``), so refreshing it every second never delays a
dispatch or a claim.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from schedctl.jobs.job import DEFAULT_LEASE_NAME, Role, RunState, WorkerState
from schedctl.store import Store, jobstate, runstats
from schedctl.store import history as h
from schedctl.store import workers as store_workers
from schedctl.store.claims import label_keys
from schedctl.store.dialect import select_db_now
from schedctl.store.rows import LeaseRecord

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

LIST_LIMIT = 10  # rows per list in a frame: running runs, next fires, failures, missed ticks


class NextFire(NamedTuple):
    """A job's next tick, for the frame's "next" list: ``at`` in UTC, shown in the job's own ``timezone``.
    A tuple, not a dataclass: a frame builds one per job, and keeps only the first ``LIST_LIMIT``."""

    job_id: str
    timezone: str
    at: datetime


@dataclass(frozen=True)
class FinishedRun:
    """A run row of the frame's "failures" or "missed" list: ``at`` is when it finished, if it did, and
    ``detail`` why (its reason, else its error, else its state)."""

    job_id: str
    scheduled_for: datetime
    state: str
    at: datetime | None
    exit_status: int | None
    detail: str | None


@dataclass
class Frame:
    now: datetime
    lease: LeaseRecord | None
    processes: list[store_workers.WorkerRecord]
    running: list[store_workers.RunningRun]  # the oldest LIST_LIMIT
    running_total: int
    running_by_worker: dict[str, int]
    queue_depth: int
    oldest_queued: datetime | None
    without_worker: int  # due queued runs (queued for longer than a poll) that no alive worker may take
    next_fires: list[NextFire]
    failures: list[FinishedRun]
    missed: list[FinishedRun]
    job_count: int
    skew: list[str] = field(default_factory=list)

    @property
    def leader_held(self) -> bool:
        return self.lease is not None and self.lease.held_at(self.now)

    def standbys(self) -> list[store_workers.WorkerRecord]:
        holder = self.lease.holder if self.leader_held and self.lease else None
        return [
            p
            for p in self.processes
            if p.role in (Role.SCHEDULER, Role.ALL) and p.state == WorkerState.ALIVE and p.identity != holder
        ]

    def workers(self) -> list[store_workers.WorkerRecord]:
        return [p for p in self.processes if p.runs_jobs]


class ScheduleCache:
    """Each schedule key's next fire, kept across frames and recomputed only once it has passed."""

    def __init__(self) -> None:
        self._next: dict[str, datetime | None] = {}

    def next_after(self, key: str, now: datetime) -> datetime | None:
        at = self._next.get(key, now)
        if key not in self._next or (at is not None and at <= now):
            at = self._compute(key, now)
            self._next[key] = at
        return at

    @staticmethod
    def _compute(key: str, now: datetime) -> datetime | None:
        from schedctl.timing.cron import schedule_for
        from schedctl.timing.zones import DstGap, DstOverlap, DstPolicy

        try:
            expr, zone, dst = key.rsplit("|", 2)
            policy = None
            if dst:
                gap, _, overlap = dst.partition("/")
                policy = DstPolicy(DstGap(gap) if gap else None, DstOverlap(overlap) if overlap else None)
            return schedule_for(expr, zone, policy).next_after(now)
        except Exception:  # noqa: BLE001 - a row written by another version: no next fire shown, no crash
            return None


def read_frame(
    store: Store, lease_name: str = DEFAULT_LEASE_NAME, schedules: ScheduleCache | None = None
) -> Frame:
    schedules = schedules or ScheduleCache()
    with store.read() as conn:
        now = select_db_now(conn)
        lease = h.current_lease(conn, lease_name)
        processes = store_workers.list_workers(conn, now, with_runs=False)
        per_worker = runstats.running_per_worker(conn)
        running = [
            run for runs in store_workers.running_by_worker(conn, limit=LIST_LIMIT).values() for run in runs
        ]
        depth, oldest = runstats.due_depth_and_oldest_queued(conn, now)
        alive = [p for p in processes if p.state == WorkerState.ALIVE and p.runs_jobs]
        poll = max((p.poll_interval for p in alive), default=1.0)
        groups = store_workers.due_queued_groups(conn, now, older_than=poll)
        states = jobstate.schedules(conn)
        failures = _finished(conn, (RunState.FAILED, RunState.TIMED_OUT), "finished_at")
        missed = _finished(conn, (RunState.SKIPPED,), "scheduled_for")
    eligible = set().union(*(label_keys(p.labels) for p in alive)) if alive else set()
    without = sum(g.count for g in groups if g.labels_key not in eligible)
    active = (
        (s.job_id, s.schedule_key)
        for s in states
        if s.paused_at is None and not s.paused_by_file and s.refused_at is None
    )
    fires = (
        NextFire(job_id, key.rsplit("|", 2)[1], at)
        for job_id, key in active
        if (at := schedules.next_after(key, now)) is not None
    )
    running.sort(key=lambda run: (run.started_at or now, run.job_id))
    return Frame(
        now=now,
        lease=lease,
        processes=processes,
        running=running[:LIST_LIMIT],
        running_total=sum(per_worker.values()),
        running_by_worker=per_worker,
        queue_depth=int(depth),
        oldest_queued=oldest,
        without_worker=without,
        next_fires=heapq.nsmallest(LIST_LIMIT, fires, key=lambda f: (f.at, f.job_id)),
        failures=failures,
        missed=missed,
        job_count=len(states),
        skew=store_workers.version_skew(processes),
    )


def _finished(conn: Connection, states: tuple[str, ...], newest: str) -> list[FinishedRun]:
    rows = runstats.newest_in_states(conn, states, newest, LIST_LIMIT)
    return [
        FinishedRun(
            row.job_id,
            row.scheduled_for,
            row.state,
            row.finished_at,
            row.exit_status,
            row.reason_detail or row.error or row.state,
        )
        for row in rows
    ]


def share_rows(budget: int, wanted: list[int]) -> list[int]:
    """Rows each list of a frame gets when only ``budget`` lines are left for them (a terminal's height):
    one row at a time to each list that wants more, in the order given (the first are the most urgent), a
    list's first row costing two lines (its table's header with it). ``share_rows(5, [3, 0, 9])`` -> ``[2, 0, 1]``."""
    given = [0] * len(wanted)
    left = max(0, budget)
    while True:
        progressed = False
        for i, want in enumerate(wanted):
            cost = 2 if given[i] == 0 else 1
            if given[i] < want and left >= cost:
                given[i] += 1
                left -= cost
                progressed = True
        if not progressed:
            return given
