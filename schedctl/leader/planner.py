"""What to do with each tick: pure functions of a job, its persisted state, its schedule and ``now``.

Nothing here reads a clock or a database. The scheduler loop hands in ``now`` (the database's clock, as the
leader tracks it) and the ticks come from the persisted last dispatched tick, never from "now", so a new
leader after a failover or an outage can name every tick it has to decide about.

Vocabulary:
- a tick is *late* when it is at most ``grace`` old: it is dispatched normally (a failover loses nothing);
- a tick is *missed* when it is older than that: it goes through the job's ``catch_up`` policy.

Every tick a catch-up pass queues (late or missed: after an outage, a failover, a resume) is marked
``Tick.late``: it is a backlog, not a tick due now, so ``concurrency = "forbid"`` queues it behind the job's
other runs (the workers execute them one after another, oldest first) instead of skipping it, and
``concurrency = "replace"`` does not cancel the executing run for it.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import islice
from typing import Any, Protocol

from schedctl.jobs.job import DEFAULT_MAX_CATCH_UP, CatchUp, Job, RunState, SkipReason, Tick

# At most this many skipped rows per job per pass (the newest): a year of downtime of an every-second job
# must not write 31 million rows; `missed` explains the older ones from the lease history.
MAX_SKIPPED_ROWS = 1000


class FireSource(Protocol):
    """What the planner needs of a schedule: ``cron.Schedule`` is one; tests pass lists of datetimes."""

    def next_after(self, after: datetime) -> datetime | None: ...

    def fires(self, after: datetime, until: datetime | None = None) -> Iterator[object]: ...


@dataclass(frozen=True)
class Window:
    """The ticks of one schedule in ``(after, until)``, split at ``now - grace``.

    ``missed`` holds at most ``keep`` of the missed ticks, the newest, ascending; ``missed_more`` says older
    missed ticks exist beyond them. ``late`` holds every tick younger than the grace.
    """

    after: datetime
    missed: tuple[datetime, ...]
    missed_more: bool
    late: tuple[datetime, ...]


@dataclass(frozen=True)
class CatchUpPlan:
    ticks: tuple[Tick, ...]  # in scheduled order
    last_dispatched: datetime | None  # the newest tick decided about; None = leave job_state as it is
    refused: str | None = None  # set when catch_up = "all" refused: the sentence for job_state.refused_detail


def utc_ticks(fires: Iterator[object]) -> Iterator[datetime]:
    """``FireSource.fires`` yields ``Fire`` objects (with ``.utc``); plain datetimes are accepted for tests."""
    for fire in fires:
        yield fire if isinstance(fire, datetime) else fire.utc  # type: ignore[attr-defined]


def window(
    schedule: FireSource,
    after: datetime,
    until: datetime,
    now: datetime,
    grace: float,
    keep: int = MAX_SKIPPED_ROWS,
) -> Window:
    """Ticks strictly after ``after`` and strictly before ``until``, without enumerating a year of them."""
    cutoff = min(now - timedelta(seconds=grace), until)
    late_from = max(after, cutoff - _TINY)
    late = tuple(utc_ticks(schedule.fires(late_from, until))) if late_from < until else ()
    late = tuple(t for t in late if t > after and t >= cutoff)
    if cutoff <= after:
        return Window(after, (), False, late)
    missed, more = newest_fires(schedule, after, cutoff, keep)
    return Window(after, missed, more, late)


_TINY = timedelta(microseconds=1)


def newest_fires(
    schedule: FireSource, after: datetime, before: datetime, keep: int
) -> tuple[tuple[datetime, ...], bool]:
    """The newest ``keep`` fires in ``(after, before)``, ascending, and whether older ones exist.

    Searches backwards from ``before`` with a doubling window, so the cost is about ``keep`` evaluations
    (times a logarithm), whatever the length of the outage.
    """
    first = list(islice(utc_ticks(schedule.fires(after, before)), keep + 1))
    if len(first) <= keep:
        return tuple(first), False
    # Bisect the look-back span between "too few" and "too many": cron fires at most once a second, so
    # the bounds meet at a window holding between keep and cap fires.
    few, many = timedelta(0), None
    span = max(first[-1] - after, timedelta(seconds=1))
    cap = keep * 3
    while True:
        lo = max(after, before - span)
        found = list(islice(utc_ticks(schedule.fires(lo, before)), cap + 1))
        if len(found) > cap:
            many = span
        elif len(found) >= keep:
            return tuple(found[-keep:]), True
        else:
            few = span
        span = span * 2 if many is None else (few + many) / 2


def forward_fires(schedule: FireSource, after: datetime, before: datetime, limit: int) -> list[datetime]:
    """Up to ``limit`` fires in ``(after, before)``, oldest first."""
    return list(islice(utc_ticks(schedule.fires(after, before)), limit))


def jitter_offset(job_id: str, tick: datetime, jitter: float | None) -> float:
    """A delay in ``[0, jitter)`` from a hash of the job and the tick: every leader computes the same one."""
    if not jitter:
        return 0.0
    digest = hashlib.blake2b(f"{job_id}\x00{tick.isoformat()}".encode(), digest_size=8).digest()
    fraction = int.from_bytes(digest, "big") / 2**64
    return round(fraction * jitter, 6)


def not_before(job: Job, tick: datetime) -> datetime | None:
    offset = jitter_offset(job.id, tick, job.jitter)
    return tick + timedelta(seconds=offset) if offset else None


def decide(job: Job, tick: datetime, now: datetime, late: bool = False) -> Tick:
    """A tick to queue, unless dispatching it now would break the job's starting deadline."""
    if not job.jitter and job.starting_deadline is None:  # most jobs: nothing to compute
        return Tick(job.id, tick, _QUEUED, late=late)
    nb = not_before(job, tick)
    due = nb or tick
    if job.starting_deadline is not None and (now - due).total_seconds() > job.starting_deadline:
        late_by = (now - due).total_seconds()
        return Tick(
            job.id,
            tick,
            RunState.SKIPPED,
            SkipReason.STARTING_DEADLINE,
            f"dispatch would have been {late_by:.1f}s after the tick, past the starting deadline of "
            f"{job.starting_deadline:g}s",
        )
    return Tick(job.id, tick, RunState.QUEUED, not_before=nb, late=late)


_QUEUED = RunState.QUEUED


def decided_ahead(job: Job, tick: datetime) -> Tick | None:
    """``decide`` before the instant of dispatch, for a tick that does not depend on it; None when it does
    (jitter, a starting deadline): decide it then."""
    if job.jitter or job.starting_deadline is not None:
        return None
    return Tick(job.id, tick, _QUEUED)


def keys_firing_at(heap: list[tuple[datetime, str]], fire: datetime) -> list[str]:
    """The group keys whose heap entry is ``fire``, the heap's smallest: a walk of the heap's top only."""
    keys: list[str] = []
    stack = [0]
    while stack:
        i = stack.pop()
        if i < len(heap) and heap[i][0] == fire:
            keys.append(heap[i][1])
            stack += (2 * i + 1, 2 * i + 2)
    return keys


def skipped(job: Job, tick: datetime, reason: SkipReason, detail: str) -> Tick:
    return Tick(job.id, tick, RunState.SKIPPED, reason, detail)


def plan_catch_up(job: Job, win: Window, now: datetime, schedule: FireSource | None = None) -> CatchUpPlan:
    """Decide every tick of ``win`` for ``job`` by its catch-up policy.

    ``schedule`` is needed only for catch_up = "all" when more missed ticks exist than ``win`` kept (a
    ``max_catch_up`` above MAX_SKIPPED_ROWS).
    """
    if job.catch_up is CatchUp.ALL:
        ticks, refused = _catch_up_all(job, win, now, schedule)
    elif job.catch_up is CatchUp.LATEST:
        ticks, refused = _catch_up_latest(job, win, now), None
    else:
        ticks, refused = _catch_up_skip(job, win, now), None
    last = ticks[-1].scheduled_for if ticks else None
    if last is None and (win.missed or win.late):
        last = (win.late or win.missed)[-1]
    return CatchUpPlan(tuple(ticks), last, refused)


def _catch_up_skip(job: Job, win: Window, now: datetime) -> list[Tick]:
    why = 'missed while no scheduler was dispatching; catch_up = "skip"'
    ticks = [skipped(job, t, SkipReason.CATCH_UP_SKIP, why) for t in win.missed]
    return ticks + [decide(job, t, now, late=t < now) for t in win.late]


def _catch_up_latest(job: Job, win: Window, now: datetime) -> list[Tick]:
    """One run, for the newest tick of the pass (late or missed); every older one is superseded by it."""
    every = [*win.missed, *win.late]
    if not every:
        return []
    older, newest = every[:-1], every[-1]
    cutoff = win.late[0] if win.late else None
    missed_why = 'missed while no scheduler was dispatching; superseded by a later tick (catch_up = "latest")'
    late_why = (
        "dispatched late (no scheduler was dispatching at its time); superseded by a later tick "
        '(catch_up = "latest")'
    )
    ticks = [
        skipped(job, t, SkipReason.CATCH_UP_LATEST, late_why if cutoff and t >= cutoff else missed_why)
        for t in older[-(MAX_SKIPPED_ROWS - 1) :]
    ]
    return [*ticks, decide(job, newest, now, late=newest < now)]


def _catch_up_all(
    job: Job, win: Window, now: datetime, schedule: FireSource | None
) -> tuple[list[Tick], str | None]:
    bound = job.max_catch_up if job.max_catch_up is not None else DEFAULT_MAX_CATCH_UP
    missed = list(win.missed)
    if win.missed_more:
        if schedule is None or bound <= len(missed):
            return _refuse(job, win, bound, f"more than {len(missed)}", schedule)
        cutoff = win.missed[-1] + _TINY
        missed = forward_fires(schedule, win.after, cutoff, bound + 1)
        if len(missed) > bound:
            return _refuse(job, win, bound, f"more than {bound}", schedule)
    if len(missed) > bound:
        return _refuse(job, win, bound, str(len(missed)), schedule)
    return [decide(job, t, now, late=t < now) for t in [*missed, *win.late]], None


# Counting a refused backlog walks its ticks: at most this many (a fraction of a second), once per refusal.
MAX_COUNTED = 100_000


def _refusal(job: Job, bound: int, count_text: str, total: int | None) -> str:
    """The sentence logged and kept on the job, with the replay command that works: `replay` refuses more
    ticks than its --max, and it lists every refused tick (the missed and the late ones alike)."""
    if total is not None:
        command = f"Run `schedctl replay {job.id} --max {total}` to dispatch them"
    else:
        command = (
            f"Count them with `schedctl missed {job.id}`, then run `schedctl replay {job.id} --max COUNT` "
            "to dispatch them"
        )
    return f"{count_text} missed ticks exceed max_catch_up = {bound}; nothing was queued. {command}"


def _backlog(win: Window, schedule: FireSource | None) -> int | None:
    """How many ticks a refusal leaves to replay, or None when they are too many to count here."""
    if not win.missed_more:
        return len(win.missed) + len(win.late)
    if schedule is None or not win.missed:
        return None
    older = forward_fires(schedule, win.after, win.missed[0], MAX_COUNTED + 1)
    if len(older) > MAX_COUNTED:
        return None
    return len(older) + len(win.missed) + len(win.late)


def _refuse(
    job: Job, win: Window, bound: int, count_text: str, schedule: FireSource | None
) -> tuple[list[Tick], str]:
    detail = _refusal(job, bound, count_text, _backlog(win, schedule))
    every = [*win.missed, *win.late][-MAX_SKIPPED_ROWS:]
    return [skipped(job, t, SkipReason.CATCH_UP_REFUSED, detail) for t in every], detail


# -- the leader's plan: which schedule fires next ----------------------------------------------------------


@dataclass
class Group:
    """Jobs sharing one schedule: one next-fire computation for all of them."""

    key: str
    schedule: Any
    job_ids: list[str] = field(default_factory=list)
    next_fire: datetime | None = None


class Plan:
    """What a leader knows between passes: groups in a heap by next fire, and the jobs held back."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}
        self.heap: list[tuple[datetime, str]] = []
        self.held: set[str] = set()  # paused (file or `schedctl pause`) or refused: skipped by group dispatch
        self.db_held: set[str] = set()

    def push(self, group: Group) -> None:
        if group.next_fire is not None:
            heapq.heappush(self.heap, (group.next_fire, group.key))

    def next_fire(self) -> datetime | None:
        return self.heap[0][0] if self.heap else None


def group_for(plan: Plan, job: Job, now: datetime) -> Group:
    """The job's group, created with its first fire after ``now``; ``schedule_for`` shares the FireSource."""
    group = plan.groups.get(job.schedule_key)
    if group is None:
        from schedctl.timing.cron import schedule_for

        schedule = schedule_for(job.schedule, job.timezone, job.dst)
        group = Group(job.schedule_key, schedule, next_fire=schedule.next_after(now))
        plan.groups[job.schedule_key] = group
    return group
