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

import bisect
import copy
import difflib
import math
import functools
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from importlib import resources
from zoneinfo import ZoneInfo

from croniter import croniter
from croniter.croniter import CroniterBadDateError

from schedctl.errors import ScheduleError, ZoneError
from schedctl.job import DstGap, DstOverlap, DstPolicy

__all__ = [
    "Fire",
    "Schedule",
    "dst_adjusted_fires",
    "load_zone",
    "schedule_for",
    "validate_expression",
    "validate_zone",
]

# --------------------------------------------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------------------------------------------

_MONTHS = {m: i + 1 for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}
_DAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int] | None = None


_SECOND = _Field("second", 0, 59)
_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DOM = _Field("day of month", 1, 31)
_MONTH = _Field("month", 1, 12, _MONTHS)
_DOW = _Field("day of week", 0, 7, _DAYS)  # 7 is Sunday too, as in Vixie cron
_FIVE = (_MINUTE, _HOUR, _DOM, _MONTH, _DOW)

# cronie's macros; @hourly is the only wildcard one (cronie sets HR_STAR for it).
_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

# Other dialects' syntax, named so the error says where the expression came from.
_FOREIGN = {
    "L": "'L' (last) is Quartz syntax, not cron",
    "W": "'W' (nearest weekday) is Quartz syntax, not cron",
    "#": "'#' (nth weekday) is Quartz syntax, not cron",
    "?": "'?' is Quartz syntax, not cron; use '*'",
    "H": "'H' is Jenkins hash syntax, not cron",
}

_ITEM = re.compile(r"^(?P<start>\*|[0-9]+|[a-z]+)(?:-(?P<end>[0-9]+|[a-z]+))?(?:/(?P<step>[^/]*))?$")

# "Fires at least once in the next ten years" (issue 2): leap days are at most 8 years apart (2096 -> 2104).
_NEVER_YEARS = 10


@dataclass(frozen=True)
class _Spec:
    """A validated expression: the value sets cron would use and the flags its DST and day rules read."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    doms: tuple[int, ...]
    months: tuple[int, ...]
    dows: tuple[int, ...]
    wildcard: bool  # minute or hour begins with '*' (cronie's DST rule)
    day_and: bool  # either day field begins with '*' (Vixie: AND the day fields, else OR)
    has_seconds: bool

    @property
    def every_day(self) -> bool:
        """True when only the time of day is restricted: then the next wall time needs no calendar."""
        days = len(self.doms) == 31 and len(self.dows) == 7
        if not self.day_and:
            days = len(self.doms) == 31 or len(self.dows) == 7
        return days and len(self.months) == 12

    def next_in_day(self, after: int) -> int | None:
        """The first second of the day strictly after ``after`` (seconds since midnight) that matches."""
        hour, rest = divmod(after, 3600)
        minute, second = divmod(rest, 60)
        if hour in self.hours:
            if minute in self.minutes:
                i = bisect.bisect_right(self.seconds, second)
                if i < len(self.seconds):
                    return hour * 3600 + minute * 60 + self.seconds[i]
            j = bisect.bisect_right(self.minutes, minute)
            if j < len(self.minutes):
                return hour * 3600 + self.minutes[j] * 60 + self.seconds[0]
        k = bisect.bisect_right(self.hours, hour)
        if k < len(self.hours):
            return self.hours[k] * 3600 + self.minutes[0] * 60 + self.seconds[0]
        return None

    def croniter_expr(self) -> str:
        """Explicit value lists, so croniter's own reading of the syntax never matters."""
        doms, dows = self.doms, self.dows
        if not self.day_and and (len(doms) == 31 or len(dows) == 7):
            # OR with an unrestricted side matches every day.
            doms, dows = tuple(range(1, 32)), tuple(range(7))
        parts = [self.minutes, self.hours, doms, self.months, dows]
        if self.has_seconds:
            parts.insert(0, self.seconds)
        return " ".join(_join(p) for p in parts)


def _join(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values)


def _number(token: str, field: _Field) -> int:
    if token.isdigit():
        value = int(token)
    elif field.names is not None and token in field.names:
        value = field.names[token]
    elif field.names is not None:
        raise ScheduleError(f"{field.name}: unknown name '{token}'", field=field.name)
    else:
        raise ScheduleError(f"{field.name}: '{token}' is not a number", field=field.name)
    if not field.low <= value <= field.high:
        raise ScheduleError(
            f"{field.name}: {value} is out of range ({field.low}-{field.high})", field=field.name
        )
    return value


def _step(token: str | None, field: _Field) -> int:
    if token is None:
        return 1
    if not token.isdigit():
        raise ScheduleError(f"{field.name}: step '/{token}' is not a number", field=field.name)
    if int(token) < 1:
        raise ScheduleError(f"{field.name}: step '/{token}' must be at least 1", field=field.name)
    return int(token)


def _item(text: str, field: _Field) -> set[int]:
    match = _ITEM.match(text)
    if match is None:
        raise ScheduleError(f"{field.name}: cannot read '{text}'", field=field.name)
    start, end, step = match["start"], match["end"], _step(match["step"], field)
    if start == "*":
        if end is not None:
            raise ScheduleError(f"{field.name}: cannot read '{text}'", field=field.name)
        low, high = field.low, field.high
    else:
        low = _number(start, field)
        # 'N/step' is N through the field's end (cronie, Debian cron, cronsim agree).
        high = _number(end, field) if end is not None else (field.high if match["step"] is not None else low)
        if low > high:
            raise ScheduleError(
                f"{field.name}: range '{text}' is reversed; cron does not wrap ranges", field=field.name
            )
    return set(range(low, high + 1, step))


def _field(text: str, field: _Field) -> tuple[int, ...]:
    text = text.lower()
    for mark, why in _FOREIGN.items():
        if mark.lower() in text and not (mark.lower() in "lwh" and _is_name_char(text, mark.lower(), field)):
            raise ScheduleError(f"{field.name}: {why}", field=field.name)
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise ScheduleError(f"{field.name}: empty list item in '{text}'", field=field.name)
        values |= _item(part, field)
    if field is _DOW and 7 in values:
        values.discard(7)
        values.add(0)
    return tuple(sorted(values))


def _is_name_char(text: str, letter: str, field: _Field) -> bool:
    """True when ``letter`` only occurs inside a month or day name (``jul``, ``wed``, ``thu``)."""
    if field.names is None:
        return False
    stripped = text
    for name in field.names:
        stripped = stripped.replace(name, "")
    return letter not in stripped


@functools.lru_cache(maxsize=65536)
def _parse(expr: str) -> _Spec:
    text = expr.strip()
    if text.startswith("@"):
        return _parse_macro(text)
    parts = text.split()
    if len(parts) == 5:
        fields, seconds = _FIVE, ("0",)
    elif len(parts) == 6:
        fields, seconds = (_SECOND, *_FIVE), ()
    else:
        raise ScheduleError(
            f"expected 5 fields (or 6 with seconds first), got {len(parts)}: '{expr}'" if parts
            else "the schedule is empty"
        )
    texts = [*seconds, *parts]
    try:
        values = [_field(t, f) for t, f in zip(parts, fields, strict=True)]
    except ScheduleError as exc:
        if seconds:
            raise
        raise ScheduleError(f"{exc} (6 fields: the first is seconds)", field=exc.field) from None
    if seconds:
        values.insert(0, (0,))
    minute, hour, dom, dow = texts[1], texts[2], texts[3], texts[5]
    return _Spec(
        *values,
        wildcard=minute.startswith("*") or hour.startswith("*"),
        day_and=dom.startswith("*") or dow.startswith("*"),
        has_seconds=not seconds,
    )


def _parse_macro(text: str) -> _Spec:
    macro = text.lower()
    if macro == "@reboot":
        raise ScheduleError("@reboot is not a schedule: schedctl runs jobs at times, not at boot")
    if macro.startswith("@every"):
        raise ScheduleError("@every is not cron syntax; use a step such as '*/5 * * * *'")
    if macro not in _MACROS:
        raise ScheduleError(f"unknown macro '{text}' (cron knows {', '.join(_MACROS)})")
    return _parse(_MACROS[macro])


def validate_expression(expr: str, now: datetime | None = None) -> None:
    """Raise ScheduleError unless cron would run ``expr`` and it fires within ten years of ``now``."""
    spec = _parse(expr)
    start = (now or datetime.now(UTC)).astimezone(UTC)
    try:
        first = _cron(spec, max_years=_NEVER_YEARS).get_next(float, start.timestamp())
    except CroniterBadDateError:
        first = None
    if first is None or first > (start + timedelta(days=366 * _NEVER_YEARS)).timestamp():
        raise ScheduleError(_never_message(spec), field="day of month")


def _never_message(spec: _Spec) -> str:
    if not any(d <= _DAYS_IN_MONTH[m] for d in spec.doms for m in spec.months):
        days = ", ".join(str(d) for d in spec.doms)
        months = ", ".join(_month_name(m) for m in spec.months)
        return f"never fires: day {days} does not occur in {months}"
    return (
        f"does not fire within {_NEVER_YEARS} years: those days of the month never fall on those days of the week"
        " (cron ANDs the day fields when either starts with '*')"
    )


_DAYS_IN_MONTH = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


def _month_name(month: int) -> str:
    return "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()[month - 1]


def _cron(spec: _Spec, max_years: int | None = None) -> croniter:
    return croniter(
        spec.croniter_expr(),
        0.0,
        ret_type=float,
        day_or=not spec.day_and,
        second_at_beginning=spec.has_seconds,
        max_years_between_matches=max_years,
    )


# --------------------------------------------------------------------------------------------------------------
# Zones
# --------------------------------------------------------------------------------------------------------------

_HOST = {
    "localtime": "stands for the host's zone",
    "local": "stands for the host's zone",
    "posixrules": "stands for the host's default rules",
    "factory": "is no real place",
}
_ABBREVIATIONS = {"CET", "EET", "MET", "WET", "EST", "MST", "HST", "CST6CDT", "EST5EDT", "MST7MDT", "PST8PDT"}
_UTC_ALIASES = {
    "Etc/UTC", "Etc/UCT", "UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu",
    "GMT", "Etc/GMT", "Greenwich", "Etc/Greenwich",
}  # fmt: skip
_OFFSET = re.compile(r"^(?:(?:Etc/)?(?:GMT|UTC|UT)\s*)?[+-]?\d{1,2}(?::?\d{2})?$|^(?:Etc/)?(?:GMT|UTC|UT)[+-]?\d*$")


@functools.cache
def _zone_names() -> frozenset[str]:
    # tzdata's list, not the host's: the same names are valid on every OS.
    return frozenset(resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8").split())


def validate_zone(name: str) -> None:
    """Raise ZoneError unless ``name`` is an IANA region name (or ``UTC``) spelled exactly."""
    why = _zone_refusal(name)
    if why is not None:
        raise ZoneError(why)


def _zone_refusal(name: str) -> str | None:
    lower = name.lower()
    if name == "UTC":
        return None
    if not name.strip():
        return "the zone is empty; name a region such as 'Europe/London', or 'UTC'"
    if name.startswith(("/", ".", "~")) or ".." in name or "\\" in name:
        tail = name.rpartition("zoneinfo/")[2]
        if "zoneinfo/" in name and tail in _zone_names():
            return f"'{name}' is a path; write '{tail}'"
        return f"'{name}' is a path, not a zone name; name the region, e.g. 'Europe/London'"
    if lower.startswith(("posix/", "right/")):
        return f"'{name}' is a variant tree of the zone database; write '{name.split('/', 1)[1]}'"
    if lower in _HOST:
        return f"'{name}' {_HOST[lower]}; name the region, e.g. 'Europe/London'"
    if name in _UTC_ALIASES:
        return f"'{name}' means UTC; write 'UTC'"
    if _OFFSET.match(name) and name not in ("GMT", "Etc/GMT"):
        return f"'{name}' is a fixed offset, not a region; name the place, e.g. 'Europe/Berlin'"
    if name in _ABBREVIATIONS:
        return f"'{name}' is an abbreviation, not a region; name the place, e.g. 'Europe/Paris'"
    if name in _zone_names():
        return None
    return f"unknown zone '{name}'{_did_you_mean(name)}"


def _did_you_mean(name: str) -> str:
    names = _zone_names() - _ABBREVIATIONS - _UTC_ALIASES - {"Factory"}
    same_case = [n for n in names if n.lower() == name.lower()]
    close = same_case or difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


@functools.lru_cache(maxsize=1024)
def load_zone(name: str) -> tzinfo:
    """The zone, always from the tzdata package: every host (and every leader) uses the same rules."""
    validate_zone(name)
    if name == "UTC":
        return UTC
    path = resources.files("tzdata").joinpath("zoneinfo", *name.split("/"))
    with path.open("rb") as f:
        return ZoneInfo.from_file(f, key=name)


# --------------------------------------------------------------------------------------------------------------
# Fires
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fire:
    """One tick. ``utc`` is the instant; ``local`` the same instant in the job's zone (for display)."""

    utc: datetime
    local: datetime
    gap_moved: bool = False  # the wall time fell in a spring-forward gap; fired at the first instant after it
    overlap: str | None = None  # "first"/"last": the wall time was repeated by a fall-back transition


_DAY = 86400.0
_MEMO_SIZE = 256


class Schedule:
    """Fire times of one (expression, zone, DST policy). Shared: get one from ``schedule_for``."""

    def __init__(self, expr: str, zone: str, dst: DstPolicy | None = None) -> None:
        self.expr = expr
        self.zone = zone
        self.dst = dst
        self._spec = _parse(expr)
        self._tz = load_zone(zone)
        self.wildcard = self._spec.wildcard
        self.has_seconds = self._spec.has_seconds
        policy = dst or DstPolicy()
        self.gap = policy.gap or (DstGap.SKIP if self.wildcard else DstGap.RUN)
        self.overlap = policy.overlap or (DstOverlap.BOTH if self.wildcard else DstOverlap.FIRST)
        self._prototype = _cron(self._spec)
        self._memo: dict[float, datetime | None] = {}

    def __repr__(self) -> str:
        return f"Schedule({self.expr!r}, {self.zone!r}, {self.dst!r})"

    def next_after(self, after: datetime) -> datetime | None:
        """The first fire strictly after ``after`` (aware), as aware UTC; None when it never fires again."""
        key = _timestamp(after)
        if key in self._memo:
            return self._memo[key]
        fire = next(self._fires(key, None), None)
        result = fire.utc if fire is not None else None
        if len(self._memo) >= _MEMO_SIZE:
            self._memo.clear()
        self._memo[key] = result
        return result

    def fires(self, after: datetime, until: datetime | None = None) -> Iterator[Fire]:
        """Every fire strictly after ``after`` and strictly before ``until`` (unbounded when None), in order."""
        return self._fires(_timestamp(after), None if until is None else _timestamp(until))

    def describe(self) -> str:
        return _describe(self._spec, self.expr)

    # -- internals ---------------------------------------------------------------------------------------------

    def _offset(self, ts: float) -> float:
        """UTC offset in seconds at the instant ``ts``."""
        off = datetime.fromtimestamp(ts, self._tz).utcoffset()
        return off.total_seconds() if off is not None else 0.0

    def _wall_offsets(self, wall: float) -> tuple[float, float]:
        """The offsets zoneinfo gives a wall time with fold=0 and fold=1 (PEP 495)."""
        naive = datetime.fromtimestamp(wall, UTC).replace(tzinfo=self._tz)
        off0, off1 = naive.utcoffset(), naive.replace(fold=1).utcoffset()
        return (off0.total_seconds() if off0 else 0.0, off1.total_seconds() if off1 else 0.0)

    def _start_wall(self, after: float) -> float:
        """A wall time early enough that no wall time before it can fire after ``after``.

        A wall time w fires no later than w - (smallest offset in force around it); the smallest offset near
        ``after`` is the lower of the offsets now and a day later (a fall-back repeats walls already passed).
        """
        return after + min(self._offset(after), self._offset(after + _DAY))

    def _fires(self, after: float, until: float | None) -> Iterator[Fire]:
        held: Fire | None = None  # a gap-moved fire waits: a real match at the same instant replaces it
        for fire in self._ordered(self._start_wall(after) - 1e-6):
            ts = fire.utc.timestamp()
            if ts <= after:
                continue
            if held is not None:
                if fire.utc == held.utc:
                    held = held if fire.gap_moved else fire
                    continue
                yield held
                held = None
            if until is not None and ts >= until:
                return
            if fire.gap_moved:
                held = fire
            else:
                yield fire
        if held is not None:
            yield held

    def _walls(self, start: float) -> Iterator[float]:
        """Matching wall-clock times strictly after ``start``, as seconds on a clock without DST."""
        if self._spec.every_day:
            yield from self._daily_walls(start)
            return
        cron = copy.copy(self._prototype)  # croniter is stateful; the prototype keeps the parsed fields
        cron.set_current(start, force=True)
        while True:
            try:
                yield cron.get_next(float)
            except CroniterBadDateError:
                return

    def _daily_walls(self, start: float) -> Iterator[float]:
        day, second = divmod(math.floor(start), 86400)
        first = self._spec.next_in_day(-1)
        assert first is not None
        while True:
            nxt = self._spec.next_in_day(second)
            if nxt is None:
                day, nxt = day + 1, first
            second = nxt
            yield float(day * 86400 + nxt)

    def _ordered(self, start_wall: float) -> Iterator[Fire]:
        """Candidate fires in UTC order (duplicates possible), from the wall times after ``start_wall``.

        Walking wall times in order gives UTC order except for the second occurrences of an overlap, which
        come after every first occurrence of it: they wait in ``later`` until a candidate passes them.
        """
        later: deque[Fire] = deque()
        for wall in self._walls(start_wall):
            for fire in self._for_wall(wall, later):
                while later and later[0].utc < fire.utc:
                    yield later.popleft()
                yield fire
        yield from later

    def _for_wall(self, wall: float, later: deque[Fire]) -> list[Fire]:
        off0, off1 = self._wall_offsets(wall)
        if off0 == off1:
            return [self._fire(wall - off0)]
        if off0 > off1:  # fall-back overlap: fold=0 is the first occurrence
            first, last = self._fire(wall - off0, overlap="first"), self._fire(wall - off1, overlap="last")
            if self.overlap is DstOverlap.FIRST:
                return [first]
            if self.overlap is DstOverlap.LAST:
                return [last]
            later.append(last)
            return [first]
        if self.gap is DstGap.SKIP:
            return []
        return [self._fire(self._gap_end(wall - off1, wall - off0), gap_moved=True)]

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

    def _fire(self, ts: float, gap_moved: bool = False, overlap: str | None = None) -> Fire:
        utc = datetime.fromtimestamp(ts, UTC)
        return Fire(utc=utc, local=utc.astimezone(self._tz), gap_moved=gap_moved, overlap=overlap)


def _describe(spec: _Spec, expr: str) -> str:
    return expr


def _timestamp(moment: datetime) -> float:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime {moment.isoformat()}: pass an aware one (UTC)")
    return moment.timestamp()


@functools.lru_cache(maxsize=65536)
def schedule_for(expr: str, zone: str, dst: DstPolicy | None = None) -> Schedule:
    """One shared Schedule per (expression, zone, policy): 100,000 jobs on ten schedules make ten objects."""
    return Schedule(expr, zone, dst)


def dst_adjusted_fires(schedule: Schedule, after: datetime, until: datetime) -> list[Fire]:
    """The fires in the window that DST moved (gap) or that sit in an overlap, for the import summary."""
    return [f for f in schedule.fires(after, until) if f.gap_moved or f.overlap is not None]
