"""When does a job fire: cron expressions, IANA zones and the DST rule. The only module that imports croniter.

Expressions are validated here, field by field, the way Vixie cron / cronie read them, before croniter sees
them: croniter accepts other dialects (``L``, ``W``, ``#``, ``?``, ``H``) and silently wraps reversed ranges.
croniter then only walks *wall-clock* times, on a zone without DST (UTC stands in for the wall clock); this
module maps each wall time to real instants with zoneinfo and applies the DST rule itself. croniter's own DST
handling is not used: it fires fixed-time entries twice in a fall-back overlap and fires wildcard entries at
the jump of a spring-forward gap, which cron does not.

The DST rule (cronie's, the default; ``DstPolicy`` overrides either half per job):

* An entry is *wildcard* when its minute or hour field literally begins with ``*`` (cronie's MIN_STAR /
  HR_STAR flags); otherwise it is *fixed-time*.
* Fixed-time: a wall time that a spring-forward gap skips fires once, at the first instant after the gap; a
  wall time that a fall-back overlap repeats fires once, at its first occurrence.
* Wildcard: fires at every real instant whose wall-clock reading matches: nothing for the skipped minutes,
  the repeated ones twice.

All arithmetic is on UTC timestamps; aware local datetimes are only produced for display (``Fire.local``).
"""

from __future__ import annotations

import copy
import functools
import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from schedctl.errors import ScheduleError
from schedctl.timing.crondescribe import describe
from schedctl.timing.cronexpr import NEVER_YEARS, Spec, never_message, parse_expression
from schedctl.timing.zones import DstGap, DstOverlap, DstPolicy, load_zone, validate_zone

__all__ = [
    "Fire",
    "Schedule",
    "dst_adjusted_fires",
    "load_zone",
    "schedule_for",
    "validate_expression",
    "validate_zone",
]


def validate_expression(expr: str, now: datetime | None = None, dialect: str | None = None) -> None:
    """Raise ScheduleError unless cron would run ``expr`` and it fires within ten years. ``dialect``: the cron
    a crontab line is read for (import); None for a job file (read as cronie reads it)."""
    spec = parse_expression(expr, dialect or "cronie")
    if spec.every_day:
        return  # a time of day on every day: fires within a day
    from croniter.croniter import CroniterBadDateError  # type: ignore[import-untyped]

    start = (now or datetime.now(UTC)).astimezone(UTC)
    try:
        first = _cron(spec, max_years=NEVER_YEARS).get_next(float, start.timestamp())
    except CroniterBadDateError:
        first = None
    if first is None or first > (start + timedelta(days=366 * NEVER_YEARS)).timestamp():
        raise ScheduleError(never_message(spec, dialect), field="day of month")


def _cron(spec: Spec, max_years: int | None = None) -> Any:
    # Imported here: an every-day schedule never needs croniter, and `schedctl next` starts ~0.1 s sooner.
    from croniter import croniter  # type: ignore[import-untyped]

    return croniter(
        spec.croniter_expr(),
        0.0,
        ret_type=float,
        day_or=not spec.day_and,
        second_at_beginning=spec.has_seconds,
        max_years_between_matches=max_years,
    )


# --------------------------------------------------------------------------------------------------------------
# Fires
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fire:
    """One tick. ``utc`` is the instant; ``local`` the same instant in the job's zone (for display)."""

    utc: datetime
    local: datetime
    gap_moved: bool = False  # the wall time fell in a spring-forward gap; fired at the first instant after it
    overlap: str | None = None  # DstOverlap FIRST/LAST: the wall time was repeated by a fall-back transition


_DAY = 86400.0
_MEMO_SIZE = 256  # recent answers per schedule: jobs sharing a schedule usually ask about the same tick
_UNKNOWN = object()
_Tick = tuple[float, bool, str | None]


class Schedule:
    """Fire times of one (expression, zone, DST policy). Shared: get one from ``schedule_for``."""

    def __init__(self, expr: str, zone: str, dst: DstPolicy | None = None) -> None:
        self.expr = expr
        self.zone = zone
        self.dst = dst
        self._spec = parse_expression(expr)
        self._tz = load_zone(zone)
        self.wildcard = self._spec.wildcard
        self.has_seconds = self._spec.has_seconds
        policy = dst or DstPolicy()
        self.gap = policy.gap or (DstGap.SKIP if self.wildcard else DstGap.RUN)
        self.overlap = policy.overlap or (DstOverlap.BOTH if self.wildcard else DstOverlap.FIRST)
        self._prototype = None if self._spec.every_day else _cron(self._spec)
        self._memo: dict[float, object] = {}

    def __repr__(self) -> str:
        return f"Schedule({self.expr!r}, {self.zone!r}, {self.dst!r})"

    def next_after(self, after: datetime) -> datetime | None:
        """The first fire strictly after ``after`` (aware), as aware UTC; None when it never fires again."""
        key = _timestamp(after)
        known = self._memo.get(key, _UNKNOWN)  # one lookup: another thread may clear the memo meanwhile
        if known is not _UNKNOWN:
            return known  # type: ignore[return-value]
        tick = next(self._ticks(key, None), None)
        result = None if tick is None else datetime.fromtimestamp(tick[0], UTC)
        if len(self._memo) >= _MEMO_SIZE:
            self._memo.clear()
        self._memo[key] = result
        return result

    def fires(self, after: datetime, until: datetime | None = None) -> Iterator[Fire]:
        """Every fire strictly after ``after`` and strictly before ``until`` (unbounded when None), in order."""
        for ts, gap_moved, overlap in self._ticks(
            _timestamp(after), None if until is None else _timestamp(until)
        ):
            utc = datetime.fromtimestamp(ts, UTC)
            yield Fire(utc=utc, local=utc.astimezone(self._tz), gap_moved=gap_moved, overlap=overlap)

    def describe(self) -> str:
        return describe(self._spec, self.expr)

    def transition_windows(self, after: datetime, until: datetime) -> Iterator[tuple[datetime, datetime]]:
        """Windows (a day either side) around every change of UTC offset between ``after`` and ``until``."""
        lo, hi = _timestamp(after), _timestamp(until)
        t, offset, last_end = lo, self._offset(lo), lo
        while t < hi:
            step = min(t + _DAY, hi)
            if self._offset(step) != offset:
                offset = self._offset(step)
                start, end = max(last_end, t - _DAY), min(hi, step + _DAY)
                yield datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)
                last_end = end
            t = step

    # -- internals: a tick is (UTC timestamp, gap_moved, overlap) ------------------------------------------------

    def _offset(self, ts: float) -> float:
        """UTC offset in seconds at the instant ``ts``."""
        if self._tz is UTC:
            return 0.0
        off = datetime.fromtimestamp(ts, self._tz).utcoffset()
        return off.total_seconds() if off is not None else 0.0

    def _wall_offsets(self, wall: float) -> tuple[float, float]:
        """The offsets zoneinfo gives a wall time with fold=0 and fold=1 (PEP 495)."""
        if self._tz is UTC:
            return 0.0, 0.0
        naive = datetime.fromtimestamp(wall, UTC).replace(tzinfo=self._tz)
        off0, off1 = naive.utcoffset(), naive.replace(fold=1).utcoffset()
        return (off0.total_seconds() if off0 else 0.0, off1.total_seconds() if off1 else 0.0)

    def _start_wall(self, after: float) -> float:
        """A wall time early enough that no wall time before it can fire after ``after``.

        A wall time w fires no later than w - (smallest offset in force around it); the smallest offset near
        ``after`` is the lower of the offsets now and a day later (a fall-back repeats walls already passed).
        """
        return after + min(self._offset(after), self._offset(after + _DAY))

    def _ticks(self, after: float, until: float | None) -> Iterator[_Tick]:
        held: _Tick | None = None  # a gap-moved tick waits: a real match at the same instant replaces it
        for tick in self._ordered(self._start_wall(after) - 1e-6):
            ts = tick[0]
            if ts <= after:
                continue
            if held is not None:
                if ts == held[0]:
                    held = held if tick[1] else tick
                    continue
                yield held
                held = None
            if until is not None and ts >= until:
                return
            if tick[1]:
                held = tick
            else:
                yield tick
        if held is not None:
            yield held

    def _walls(self, start: float) -> Iterator[float]:
        """Matching wall-clock times strictly after ``start``, as seconds on a clock without DST."""
        if self._prototype is None:
            yield from self._daily_walls(start)
            return
        from croniter.croniter import CroniterBadDateError

        cron = copy.copy(self._prototype)  # croniter is stateful; the prototype keeps the parsed fields
        cron.set_current(start, force=True)
        while True:
            try:
                yield cron.get_next(float)
            except CroniterBadDateError:
                return

    def _daily_walls(self, start: float) -> Iterator[float]:
        day, second = divmod(math.floor(start), 86400)
        first, spec = self._spec.first_in_day, self._spec
        while True:
            nxt = spec.next_in_day(second)
            if nxt is None:
                day, nxt = day + 1, first
            second = nxt
            yield float(day * 86400 + nxt)

    def _ordered(self, start_wall: float) -> Iterator[_Tick]:
        """Candidate ticks in UTC order (duplicates possible), from the wall times after ``start_wall``.

        Walking wall times in order gives UTC order except for the second occurrences of an overlap, which
        come after every first occurrence of it: they wait in ``later`` until a candidate passes them.
        """
        later: deque[_Tick] = deque()
        for wall in self._walls(start_wall):
            off0, off1 = self._wall_offsets(wall)
            if off0 == off1:  # the common case: one real instant
                tick: _Tick | None = (wall - off0, False, None)
            else:
                tick = self._adjusted(wall, off0, off1, later)
            if tick is None:
                continue
            while later and later[0][0] < tick[0]:
                yield later.popleft()
            yield tick
        yield from later

    def _adjusted(self, wall: float, off0: float, off1: float, later: deque[_Tick]) -> _Tick | None:
        """The DST rule for a wall time that a transition skips or repeats."""
        if off0 > off1:  # fall-back overlap: fold=0 is the first occurrence
            first: _Tick = (wall - off0, False, DstOverlap.FIRST)
            last: _Tick = (wall - off1, False, DstOverlap.LAST)
            if self.overlap is DstOverlap.FIRST:
                return first
            if self.overlap is DstOverlap.LAST:
                return last
            later.append(last)
            return first
        if self.gap is DstGap.SKIP:
            return None
        return (self._gap_end(wall - off1, wall - off0), True, None)

    def _gap_end(self, low: float, high: float) -> float:
        """The transition instant in (low, high]: the first instant whose offset is the later one."""
        after = self._offset(high)
        lo, hi = int(low), int(high)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._offset(mid) == after:
                hi = mid
            else:
                lo = mid
        return float(hi)


def _timestamp(moment: datetime) -> float:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime {moment.isoformat()}: pass an aware one (UTC)")
    return moment.timestamp()


@functools.lru_cache(maxsize=65536)
def schedule_for(expr: str, zone: str, dst: DstPolicy | None = None) -> Schedule:
    """One shared Schedule per (expression, zone, policy): 100,000 jobs on ten schedules make ten objects."""
    return Schedule(expr, zone, dst)


def dst_adjusted_fires(schedule: Schedule, after: datetime, until: datetime) -> list[Fire]:
    """The fires in the window that DST moved (gap) or that sit in an overlap, for the import summary.

    Only the days around offset changes are walked, so an every-minute job over a year stays cheap.
    """
    out: list[Fire] = []
    for start, end in schedule.transition_windows(after, until):
        out.extend(f for f in schedule.fires(start, end) if f.gap_moved or f.overlap is not None)
    return out
