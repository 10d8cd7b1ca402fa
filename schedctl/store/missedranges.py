"""Reading the lasting record of missed ticks (``missed_ranges``, see ``store.missedrecord``): which ticks a
range stands for, by the schedule it was counted by. Pure, so `missed` explains ranges without the store."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from schedctl.store.rows import RangeRecord

if TYPE_CHECKING:
    from schedctl.timing.cron import Schedule

_TINY = timedelta(microseconds=1)


def schedule_of(key: str) -> Schedule | None:
    """The schedule a ``Job.schedule_key`` names (``expr|zone|gap/overlap``); None when it no longer parses."""
    from schedctl.errors import ScheduleError
    from schedctl.timing.cron import schedule_for
    from schedctl.timing.zones import DstGap, DstOverlap, DstPolicy

    expr, _, rest = key.partition("|")
    zone, _, dst = rest.partition("|")
    policy = None
    if dst:
        gap, _, overlap = dst.partition("/")
        policy = DstPolicy(DstGap(gap) if gap else None, DstOverlap(overlap) if overlap else None)
    try:
        return schedule_for(expr, zone, policy)
    except (ScheduleError, ValueError):
        return None


def fires_in(schedule: Schedule, first: datetime, last: datetime) -> Iterator[datetime]:
    """The fires in ``[first, last]``."""
    for fire in schedule.fires(first - _TINY, last + _TINY):
        yield fire.utc


class RangeIndex:
    """A job's missed ranges by first tick (they never overlap), for `missed` to look ticks up in."""

    def __init__(self, ranges: list[RangeRecord]) -> None:
        self.ranges = sorted(ranges, key=lambda r: r.first_tick)
        self._starts = [r.first_tick for r in self.ranges]

    def at(self, tick: datetime) -> RangeRecord | None:
        i = bisect.bisect_right(self._starts, tick) - 1
        if i >= 0 and tick <= self.ranges[i].last_tick:
            return self.ranges[i]
        return None

    def ticks_in(self, after: datetime, until: datetime) -> list[datetime]:
        """The ticks the ranges stand for in ``(after, until)``, by the schedule each was counted by."""
        out: list[datetime] = []
        for r in self.ranges:
            first, last = max(r.first_tick, after + _TINY), min(r.last_tick, until - _TINY)
            if last < first:
                continue
            if r.ticks == 1:
                out.append(r.first_tick)
                continue
            schedule = schedule_of(r.schedule_key)
            if schedule is not None:
                out.extend(fires_in(schedule, first, last))
        return [t for t in out if after < t < until]
