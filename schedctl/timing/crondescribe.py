"""Plain English for a cron expression: the common shapes, and the expression itself for anything else.

cron-descriptor was considered and not taken: it reads ``0 0 */2 * 1`` as "every 2 days, or on Monday" (cron
ANDs those fields) and costs ~0.15 s to import.
"""

from __future__ import annotations

from schedctl.timing.cronexpr import Spec

__all__ = ["describe"]

_DAY_NAMES = "Sunday Monday Tuesday Wednesday Thursday Friday Saturday".split()
_MONTH_NAMES = "January February March April May June July August September October November December".split()


def describe(spec: Spec, expr: str) -> str:
    when = _describe_time(spec)
    if when is None:
        return f"cron '{expr}'"
    days = _describe_days(spec)
    if days == "every day" and when.startswith("every"):
        return when
    return f"{when} {days}"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _every_nth(values: tuple[int, ...], low: int, high: int) -> int | None:
    """n when ``values`` is exactly every n-th value of the field from its start (``*/n``), n > 1."""
    if len(values) < 2:
        return None
    n = values[1] - values[0]
    return n if values[0] == low and values == tuple(range(low, high + 1, n)) and n > 1 else None


def _runs(values: tuple[int, ...], name: list[str] | None = None, low: int = 0) -> str:
    """``1-5, 9`` style, with names when given; long progressions as ``1, 3, 5, …, 31``."""
    text = (lambda v: name[v - low]) if name else str  # noqa: E731
    if (
        len(values) > 4
        and len({b - a for a, b in zip(values, values[1:], strict=False)}) == 1
        and values[1] - values[0] > 1
    ):
        return f"{text(values[0])}, {text(values[1])}, {text(values[2])}, …, {text(values[-1])}"
    parts, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[i - 1] + 1:
            a, b = values[start], values[i - 1]
            parts.append(text(a) if a == b else f"{text(a)}{' to ' if name else '-'}{text(b)}" if b - a > 1 or not name
                         else f"{text(a)} and {text(b)}")  # fmt: skip
            start = i
    return _and(parts)


def _describe_time(spec: Spec) -> str | None:
    secs, mins, hours = spec.seconds, spec.minutes, spec.hours
    every_min, every_hour = len(mins) == 60, len(hours) == 24
    if spec.has_seconds and len(secs) > 1:
        n = _every_nth(secs, 0, 59)
        if every_min and every_hour and (len(secs) == 60 or n):
            return "every second" if len(secs) == 60 else f"every {n} seconds"
        return None
    sec = f":{secs[0]:02d}" if spec.has_seconds else ""
    n = _every_nth(mins, 0, 59)
    window = (
        f"from {hours[0]:02d}:00 to {hours[-1]:02d}:59"
        if hours == tuple(range(hours[0], hours[-1] + 1))
        else None
    )
    if every_hour:
        if every_min:
            return "every minute"
        if n:
            return f"every {n} minutes"
        if len(mins) <= 4:
            return f"every hour at {_and([f':{m:02d}{sec}' for m in mins])}"
        return None
    if len(hours) * len(mins) <= 6:
        return "at " + _and([f"{h:02d}:{m:02d}{sec}" for h in hours for m in mins])
    if window and (every_min or n):
        return f"{'every minute' if every_min else f'every {n} minutes'} {window}"
    hn = _every_nth(hours, 0, 23)
    if len(mins) == 1 and hn:
        return f"every {hn} hours at :{mins[0]:02d}{sec}"
    if len(mins) == 1 and window:
        # Name the last fire itself ("to 17:00"), not the end of the hour: nothing runs at 17:59.
        first, last = f"{hours[0]:02d}:{mins[0]:02d}{sec}", f"{hours[-1]:02d}:{mins[0]:02d}{sec}"
        return f"every hour at :{mins[0]:02d}{sec} from {first} to {last}"
    return None


def _describe_days(spec: Spec) -> str:
    all_dom, all_dow = len(spec.doms) == 31, len(spec.dows) == 7
    if not spec.day_and and (all_dom or all_dow):
        all_dom = all_dow = True
    dom = f"{'day' if len(spec.doms) == 1 else 'days'} {_runs(spec.doms)} of the month"
    dow = _runs(spec.dows, _DAY_NAMES)
    if all_dom and all_dow:
        days = "every day"
    elif all_dom:
        days = f"on {dow}"
    elif all_dow:
        days = f"on {dom}"
    elif spec.day_and:
        days = f"on {dow}, if it is {dom.replace('days', 'one of days')}"
    else:
        days = f"on {dom} and on every {dow}"
    if len(spec.months) < 12:
        days += f" in {_runs(spec.months, _MONTH_NAMES, low=1)}"
    return days
