"""Bounded replay: dispatch a job's missed ticks, oldest first, as an operator's explicit act.

Replay claims ticks the way the scheduler does, so the database decides who got a tick: a tick without a row
is inserted as ``queued`` with the same insert-ignore, a ``skipped`` row becomes ``queued`` only through
``UPDATE ... WHERE state = 'skipped'``. Nothing else is ever touched, so a tick that ran is never dispatched
twice, and two replays racing each other dispatch each tick once between them.

The bound covers the whole invocation and is checked before anything is written: an unbounded catch-up is an
incident of its own, so above the bound replay refuses and changes nothing. The job's ``skip``/``latest``
policy and ``starting_deadline`` do not filter what an operator asked for; its concurrency still holds when
the runs execute (the workers enforce it).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from schedctl.errors import ReplayRefused
from schedctl.inspect.missed import gather
from schedctl.jobs.job import EventKind, Job, RunState
from schedctl.store import Store, jobstate, runrows
from schedctl.store import history as h
from schedctl.store.window import Lookup
from schedctl.timing.timetext import rfc3339

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

log = logging.getLogger("schedctl.replay")

BATCH = 500  # ticks per transaction: short transactions, progress between them
REPLAYED = "replayed by schedctl replay"  # reason_detail of the rows replay queues (term is NULL too)


@dataclass(frozen=True)
class ReplayTick:
    job_id: str
    scheduled_for: datetime
    action: str  # "insert" (no row yet) or "requeue" (a skipped row)
    reason_code: str  # why it was missed


@dataclass(frozen=True)
class ReplayPlan:
    ticks: list[ReplayTick]
    clears: list[str] = field(default_factory=list)  # jobs whose catch-up refusal the replay clears

    def per_job(self) -> dict[str, int]:
        return dict(Counter(t.job_id for t in self.ticks))

    @property
    def empty(self) -> bool:
        return not self.ticks and not self.clears


@dataclass(frozen=True)
class ReplayResult:
    plan: ReplayPlan
    dry_run: bool
    dispatched: int = 0  # ticks this replay turned into queued runs
    already: int = 0  # planned ticks someone else (another replay, a leader) dispatched first


Progress = Callable[[int, int], None]  # (ticks done, ticks planned)


def plan_replay(
    store: Store,
    jobs: Iterable[Job],
    since: datetime | None,
    until: datetime | None,
    now: datetime,
    *,
    grace: float | None = None,
) -> ReplayPlan:
    """Exactly the ticks ``missed`` lists for these jobs in the window, oldest first; writes nothing."""
    ticks: list[ReplayTick] = []
    clears: list[str] = []
    ordered = sorted(jobs, key=lambda j: j.id)
    with store.read() as conn:
        states = h.job_states_of(conn, [j.id for j in ordered])
        gathered = gather(conn, ordered, Lookup(now, since, until, grace), states)
    missed = gathered.explain()  # after the transaction: a long backlog is seconds of CPU (see Gathered)
    for job in ordered:
        for m in missed[job.id]:
            action = "requeue" if m.row_state == RunState.SKIPPED else "insert"
            ticks.append(ReplayTick(job.id, m.scheduled_for, action, m.reason_code))
        state = states.get(job.id)
        if state is not None and state.refused_at is not None:
            clears.append(job.id)
    ticks.sort(key=lambda t: (t.scheduled_for, t.job_id))
    return ReplayPlan(ticks=ticks, clears=clears)


def refusal_message(plan: ReplayPlan, max_n: int) -> str:
    per_job = ", ".join(f"{job} {n}" for job, n in sorted(plan.per_job().items()))
    total = len(plan.ticks)
    return (
        f"{total} missed ticks would be replayed ({per_job}), more than --max {max_n}; nothing was changed. "
        f"Run again with --max {total} to replay them all, or narrow the window with --since/--until."
    )


def replay(
    store: Store,
    jobs: Iterable[Job] | Mapping[str, Job],
    max_n: int,
    since: datetime | None,
    until: datetime | None,
    now: datetime,
    dry_run: bool = False,
    *,
    grace: float | None = None,
    progress: Progress | None = None,
    plan: ReplayPlan | None = None,
) -> ReplayResult:
    """Dispatch the missed ticks of ``jobs`` in the window, at most ``max_n`` of them in all, or raise
    ReplayRefused (having changed nothing). A ``plan`` from ``plan_replay`` (shown to confirm) may be passed in."""
    by_id = {j.id: j for j in (jobs.values() if isinstance(jobs, Mapping) else jobs)}
    if plan is None:
        plan = plan_replay(store, by_id.values(), since, until, now, grace=grace)
    if len(plan.ticks) > max_n:
        raise ReplayRefused(refusal_message(plan, max_n))
    if dry_run or plan.empty:
        return ReplayResult(plan=plan, dry_run=dry_run)
    dispatched = 0
    done = 0
    for job_id in sorted(set(plan.per_job()) | set(plan.clears)):
        job_ticks = [t.scheduled_for for t in plan.ticks if t.job_id == job_id]
        new = 0
        for start in range(0, len(job_ticks), BATCH):
            chunk = job_ticks[start : start + BATCH]
            with store.begin() as conn:
                new += _dispatch(conn, by_id[job_id], chunk, now)
            done += len(chunk)
            if progress is not None:
                progress(done, len(plan.ticks))
        with store.begin() as conn:
            _record(conn, job_id, job_ticks, new, job_id in plan.clears, now)
        dispatched += new
        log.info(
            "replayed %d of %d missed ticks of %s",
            new,
            len(job_ticks),
            job_id,
            extra={"event": "replayed", "job_id": job_id},
        )
    return ReplayResult(plan=plan, dry_run=False, dispatched=dispatched, already=len(plan.ticks) - dispatched)


def _dispatch(conn: Connection, job: Job, ticks: list[datetime], now: datetime) -> int:
    """Claim ``ticks`` for ``job``: insert the missing ones, requeue the skipped ones. Returns how many this
    call dispatched; a tick another process got first counts zero."""
    shared = runrows.shared_values(job)
    n = len(ticks)
    inserted = runrows.insert_runs(
        conn, [job.id] * n, ticks, [shared] * n, term=None, queued_at=now, details=[REPLAYED] * n
    )
    # Every tick of the chunk, not just the planned "requeue" ones: a leader may have written a skipped row for
    # a tick since the plan was made, and our insert then did nothing. Rows just inserted are queued: untouched.
    requeued = runrows.requeue_skipped(conn, job, ticks, REPLAYED, now)
    return inserted + requeued


def _record(
    conn: Connection, job_id: str, ticks: list[datetime], new: int, clear: bool, now: datetime
) -> None:
    """Clear the catch-up refusal, move dispatch past the replayed ticks, and journal what was done."""
    cleared = jobstate.clear_refusal(conn, job_id, now) if clear else False
    if ticks:
        # Only forward: the replayed ticks are decided now, so the scheduler must not weigh them again.
        jobstate.advance_last_dispatched(conn, {job_id: max(ticks)}, now)
    if not new and not cleared:
        return  # another replay got there first: it journals what it did
    detail = f"schedctl replay: {new} of {len(ticks)} missed ticks dispatched"
    if ticks:
        detail += f" ({rfc3339(min(ticks))} .. {rfc3339(max(ticks))})"
    if cleared:
        detail += "; catch-up refusal cleared"
    jobstate.journal(conn, job_id, EventKind.REPLAYED, now, detail)
