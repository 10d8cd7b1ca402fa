"""Cron expressions as Vixie cron / cronie read them: fields, ranges, steps, names, macros.

Everything is checked here, before croniter sees an expression: croniter accepts other dialects (Quartz
``L``, ``W``, ``#``, ``?``; Jenkins ``H``) and silently wraps reversed ranges, which cron refuses. The result is
a ``Spec``: the value sets cron would use, and the two flags cronie derives from the text (which rule joins the
day fields, and whether the entry is "wildcard" for DST).
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

from schedctl.errors import ScheduleError
from schedctl.timing.crondialect import CRONIE, DEBIAN

__all__ = ["NEVER_YEARS", "Spec", "never_message", "parse_expression"]

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
NEVER_YEARS = 10


@dataclass(frozen=True)
class Spec:
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

    @functools.cached_property
    def first_in_day(self) -> int:
        """The first matching second of any day."""
        return self.hours[0] * 3600 + self.minutes[0] * 60 + self.seconds[0]

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


def _item(text: str, field: _Field, dialect: str) -> set[int]:
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
        if end is None and match["step"] is not None:
            # cronie entry.c get_range: after a single number only ',', '-' or a blank may follow (get_number's
            # terminators), so '5/15' is "bad minute"; Debian's crontab(1) 3.0pl1-162 rejects it the same way.
            raise ScheduleError(
                f"{field.name}: '{text}': cron reads a step only after a range or '*' (it rejects this line);"
                f" write '{start}-{field.high}/{match['step']}'",
                field=field.name,
            )
        high = _number(end, field) if end is not None else low
        if low > high and dialect == CRONIE and field is _DOW and high == 0:
            high = 7  # cronie get_range: `if (low_ > high_ && high_ == 0) high_ = 7`, so mon-sun is 1-7
        if low > high:
            raise ScheduleError(_reversed(text, field, dialect), field=field.name)
    return set(range(low, high + 1, step))


def _reversed(text: str, field: _Field, dialect: str) -> str:
    if dialect == DEBIAN:
        # Vixie cron 3.0 get_range sets `for (i = num1; i <= num2; ...)`: nothing for a reversed range, and
        # Debian's crontab(1) accepts the line (checked: `0 22-6 * * *`, `* * * * fri-mon`).
        return (
            f"{field.name}: range '{text}' is reversed: Debian's cron accepts this line and never runs it "
            "for that range (it never wraps a range); split it, e.g. '22-23,0-6'"
        )
    return (
        f"{field.name}: range '{text}' is reversed: cronie rejects this line (it never wraps a range);"
        " split it, e.g. '22-23,0-6'"
    )


def _field(text: str, field: _Field, dialect: str = CRONIE) -> tuple[int, ...]:
    text = text.lower()
    for mark, why in _FOREIGN.items():
        if mark.lower() in text and not (mark.lower() in "lwh" and _is_name_char(text, mark.lower(), field)):
            raise ScheduleError(f"{field.name}: {why}", field=field.name)
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise ScheduleError(f"{field.name}: empty list item in '{text}'", field=field.name)
        values |= _item(part, field, dialect)
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
def parse_expression(expr: str, dialect: str = CRONIE) -> Spec:
    """The validated expression, read as ``dialect``'s cron reads it (a job file's: cronie); raises
    ScheduleError naming the field at fault."""
    text = expr.strip()
    if text.startswith("@"):
        return _parse_macro(text)
    parts = text.split()
    fields: tuple[_Field, ...] = _FIVE
    seconds: tuple[str, ...] = ("0",)
    if len(parts) == 6:
        fields, seconds = (_SECOND, *_FIVE), ()
    elif len(parts) != 5:
        raise ScheduleError(
            f"expected 5 fields (or 6 with seconds first), got {len(parts)}: '{expr}'"
            if parts
            else "the schedule is empty"
        )
    texts = [*seconds, *parts]
    try:
        values = [_field(t, f, dialect) for t, f in zip(parts, fields, strict=True)]
    except ScheduleError as exc:
        if seconds:
            raise
        raise ScheduleError(f"{exc} (6 fields: the first is seconds)", field=exc.field) from None
    if seconds:
        values.insert(0, (0,))
    minute, hour, dom, dow = texts[1], texts[2], texts[3], texts[5]
    return Spec(
        values[0],
        values[1],
        values[2],
        values[3],
        values[4],
        values[5],
        wildcard=minute.startswith("*") or hour.startswith("*"),
        day_and=dom.startswith("*") or dow.startswith("*"),
        has_seconds=not seconds,
    )


def _parse_macro(text: str) -> Spec:
    macro = text
    if macro.lower() in _MACROS and macro not in _MACROS:
        # cronie entry.c compares with strcmp; Debian's crontab(1) says "bad time specifier" for '@Daily'.
        raise ScheduleError(f"cron reads @-macros in lower case only: '{text}' (write '{text.lower()}')")
    if macro == "@reboot":
        raise ScheduleError("@reboot is not a schedule: schedctl runs jobs at times, not at boot")
    if macro.startswith("@every"):
        raise ScheduleError("@every is not cron syntax; use a step such as '*/5 * * * *'")
    if macro not in _MACROS:
        raise ScheduleError(f"unknown macro '{text}' (cron knows {', '.join(_MACROS)})")
    return parse_expression(_MACROS[macro])


def never_message(spec: Spec, dialect: str | None = None) -> str:
    """Why ``spec`` never fires; for a crontab line (``dialect`` given), also what its cron did with it: both
    crons accept such a line and never run it (Debian's crontab(1) installs `0 0 30 2 *`)."""
    who = "Debian's cron" if dialect == DEBIAN else "cron"
    did = f"{who} accepts this line and never runs it" if dialect else ""
    if not any(d <= _DAYS_IN_MONTH[m] for d in spec.doms for m in spec.months):
        days = ", ".join(str(d) for d in spec.doms)
        months = ", ".join(_month_name(m) for m in spec.months)
        return f"never fires: day {days} does not occur in {months}" + (f" ({did})" if did else "")
    return (
        f"does not fire within {NEVER_YEARS} years: those days of the month never fall on those days of the week"
        " (cron ANDs the day fields when either starts with '*'" + (f"; {did})" if did else ")")
    )


_DAYS_IN_MONTH = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


def _month_name(month: int) -> str:
    return "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()[month - 1]
