"""Property and differential tests. cronsim (healthchecks.io) is the oracle: it follows Debian cron on the
day-of-month/day-of-week rule and on DST for 5-field expressions.

Known cronsim quirks kept out of the generated expressions: a one-value stepped range (``7-7/4``) is read by
cronsim as ``7/4`` (7 to the end); and with Lord Howe's 30-minute shift cronsim skips real wall times after the
fall-back (it misses 02:03 +10:30 on 2028-04-02 for ``3 */2 * * *``), so the DST differential uses 1-hour zones;
and started inside the second pass of an overlap it can answer a time before its start (see below).
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim
from hypothesis import given, settings
from hypothesis import strategies as st

from schedctl.timing.cron import Schedule, _cron, schedule_for
from schedctl.timing.cronexpr import parse_expression
from schedctl.timing.zones import DstGap, DstOverlap, DstPolicy

FIELDS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
SECONDS = (0, 59)


@st.composite
def item(draw: st.DrawFn, bounds: tuple[int, int]) -> str:
    lo, hi = bounds
    kind = draw(st.sampled_from(["*", "*/n", "a", "a-b", "a-b/n"]))
    step = draw(st.integers(1, hi - lo + 1))
    a = draw(st.integers(lo, hi))
    b = draw(st.integers(a, hi))
    if kind == "*":
        return "*"
    if kind == "*/n":
        return f"*/{step}"
    if kind == "a" or (kind == "a-b/n" and a == b):
        return str(a)
    return f"{a}-{b}" if kind == "a-b" else f"{a}-{b}/{step}"


@st.composite
def field(draw: st.DrawFn, bounds: tuple[int, int]) -> str:
    return ",".join(draw(st.lists(item(bounds), min_size=1, max_size=3)))


@st.composite
def expression(draw: st.DrawFn, seconds: bool = False) -> str:
    parts = [draw(field(b)) for b in FIELDS]
    # Keep most expressions sparse enough that 20 fires span more than a few minutes.
    if draw(st.booleans()):
        parts[0] = str(draw(st.integers(0, 59)))
    if seconds:
        parts.insert(0, draw(st.sampled_from(["0", "30", "*/20", "5,45"])))
    return " ".join(parts)


def fires_ok(expr: str, start: datetime) -> bool:
    from schedctl.errors import ScheduleError
    from schedctl.timing.cron import validate_expression

    try:
        validate_expression(expr, now=start)
    except ScheduleError:
        return False
    return True


starts = st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2030, 12, 31)).map(
    lambda d: d.replace(tzinfo=UTC)
)


@settings(max_examples=100, deadline=None)
@given(expression(), starts, st.sampled_from(["UTC", "Asia/Tokyo", "Asia/Kolkata"]))
def test_same_as_cronsim_without_dst(expr: str, start: datetime, zone: str) -> None:
    if not fires_ok(expr, start):
        return
    ours = [f.utc for f in itertools.islice(schedule_for(expr, zone).fires(start), 20)]
    oracle = CronSim(expr, start.astimezone(ZoneInfo(zone)))
    assert ours == [next(oracle).astimezone(UTC) for _ in range(len(ours))]
    assert len(ours) == 20


@settings(max_examples=40, deadline=None)
@given(expression(seconds=True), starts)
def test_seconds_first_same_as_cronsim(expr: str, start: datetime) -> None:
    if not fires_ok(expr, start):
        return
    ours = [f.utc for f in itertools.islice(schedule_for(expr, "UTC").fires(start), 20)]
    oracle = CronSim(expr, start)
    assert ours == [next(oracle) for _ in range(len(ours))]


# Around real transitions: start within two days before one.
TRANSITIONS = {
    "America/New_York": ["2026-03-08T07:00Z", "2026-11-01T06:00Z", "2027-03-14T07:00Z", "2027-11-07T06:00Z"],
    "Europe/London": ["2026-03-29T01:00Z", "2026-10-25T01:00Z"],
    "Australia/Sydney": ["2026-04-04T16:00Z", "2026-10-03T16:00Z"],
    "Australia/Lord_Howe": ["2026-04-04T15:00Z", "2026-10-03T15:30Z"],
}

DST_FIELDS = [
    st.sampled_from(["0", "30", "*/15", "0,30", "*", "45", "*/7"]),
    st.sampled_from(["*", "1", "2", "3", "1,2", "0-23/2", "*/2", "1-3", "*/3"]),
]


@st.composite
def dst_case(draw: st.DrawFn, zones: list[str]) -> tuple[str, str, datetime]:
    zone = draw(st.sampled_from(zones))
    moment = datetime.fromisoformat(draw(st.sampled_from(TRANSITIONS[zone])))
    start = moment - timedelta(seconds=draw(st.integers(0, 2 * 86400)))
    expr = f"{draw(DST_FIELDS[0])} {draw(DST_FIELDS[1])} * * *"
    return expr, zone, start


@settings(max_examples=150, deadline=None)
@given(dst_case(["America/New_York", "Europe/London", "Australia/Sydney"]))
def test_same_as_cronsim_around_dst(case: tuple[str, str, datetime]) -> None:
    expr, zone, start = case
    ours = [f.utc for f in itertools.islice(schedule_for(expr, zone).fires(start), 60)]
    # cronsim started inside the second pass of an overlap walks the naive wall clock and can answer the
    # first pass, before its start (30 1 * * * from 06:00Z on 2026-11-01 gives 05:30Z): drop those.
    oracle = (d.astimezone(UTC) for d in CronSim(expr, start.astimezone(ZoneInfo(zone))))
    assert ours == list(itertools.islice((d for d in oracle if d > start), 60))


policies = st.sampled_from([None, *(DstPolicy(g, o) for g in (None, *DstGap) for o in (None, *DstOverlap))])


@settings(max_examples=150, deadline=None)
@given(dst_case(list(TRANSITIONS)), policies, st.integers(0, 3 * 86400))
def test_fires_are_ordered_in_window_match_the_wall_clock_and_restart_anywhere(
    case: tuple[str, str, datetime], policy: DstPolicy | None, later: int
) -> None:
    expr, zone, start = case
    s = schedule_for(expr, zone, policy)
    spec = parse_expression(expr)
    end = start + timedelta(days=3)
    fires = list(s.fires(start, end))
    utcs = [f.utc for f in fires]
    assert utcs == sorted(set(utcs))  # strictly increasing: one instant per tick
    assert all(start < u < end for u in utcs)
    for f in fires:
        assert f.local.isoformat() == f.utc.astimezone(ZoneInfo(zone)).isoformat()
        if not f.gap_moved:
            assert f.local.minute in spec.minutes and f.local.hour in spec.hours
    # Restarting from any instant (inside a gap, either pass of an overlap, on a transition) changes nothing.
    t = start + timedelta(seconds=later)
    assert list(s.fires(t, end)) == [f for f in fires if f.utc > t]
    assert Schedule(expr, zone, policy).next_after(t) == next((u for u in utcs if u > t), s.next_after(t))


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(["*", "*/5", "0", "7,37", "0-10/3"]), st.sampled_from(["*", "2", "*/6", "9-17"]),
       st.sampled_from(["", "0 ", "*/15 "]), starts)  # fmt: skip
def test_fast_daily_path_equals_croniter(minute: str, hour: str, second: str, start: datetime) -> None:
    expr = f"{second}{minute} {hour} * * *"
    s = Schedule(expr, "UTC")
    assert s._spec.every_day
    cron = _cron(s._spec)
    cron.set_current(start.timestamp(), force=True)
    expected = [cron.get_next(float) for _ in range(50)]
    assert list(itertools.islice(s._walls(start.timestamp()), 50)) == expected


def test_hourly_fires_match_cronsim_for_a_whole_year_in_new_york() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC) - timedelta(microseconds=1)
    ours = [
        f.utc for f in schedule_for("0 * * * *", "America/New_York").fires(start, start + timedelta(days=365))
    ]
    oracle = CronSim("0 * * * *", start.astimezone(ZoneInfo("America/New_York")))
    assert ours == [next(oracle).astimezone(UTC) for _ in range(len(ours))]
    assert len(ours) == 365 * 24  # one lost in March, one extra in November
