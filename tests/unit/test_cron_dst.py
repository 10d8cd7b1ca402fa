"""The DST rule, pinned to real zones and real transitions. Each table reads like the spec.

Transitions used (tzdata; instants in UTC):
  Europe/London        2026-03-29 01:00Z  01:00 GMT -> 02:00 BST  (gap 01:00-02:00 local)
                       2026-10-25 01:00Z  02:00 BST -> 01:00 GMT  (01:00-02:00 local twice)
  America/New_York     2026-03-08 07:00Z  02:00 EST -> 03:00 EDT  (gap 02:00-03:00)
                       2026-11-01 06:00Z  02:00 EDT -> 01:00 EST  (01:00-02:00 twice)
  Australia/Sydney     2026-04-04 16:00Z  03:00 AEDT -> 02:00 AEST on Apr 5  (02:00-03:00 twice)
                       2026-10-03 16:00Z  02:00 AEST -> 03:00 AEDT on Oct 4  (gap 02:00-03:00)
  Australia/Lord_Howe  2026-04-04 15:00Z  02:00 +11 -> 01:30 +10:30 on Apr 5  (01:30-02:00 twice)
                       2026-10-03 15:30Z  02:00 +10:30 -> 02:30 +11 on Oct 4  (gap 02:00-02:30)
  Asia/Tokyo           no transitions
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedctl.timing.cron import Fire, Schedule, dst_adjusted_fires, schedule_for
from schedctl.timing.zones import DstGap, DstOverlap, DstPolicy


def at(iso: str) -> datetime:
    return datetime.fromisoformat(iso).astimezone(UTC)


def local(expr: str, zone: str, start: str, end: str, dst: DstPolicy | None = None) -> list[str]:
    """Fires in (start, end), as local ISO strings with a mark: '>' moved by a gap, '1'/'2' overlap pass."""
    out = []
    for f in schedule_for(expr, zone, dst).fires(at(start), at(end)):
        mark = ">" if f.gap_moved else {"first": "1", "last": "2", None: ""}[f.overlap]
        out.append(f.local.isoformat() + mark)
    return out


# --- Europe/London ------------------------------------------------------------------------------------------


def test_london_fixed_time_in_gap_runs_once_at_end_of_gap() -> None:
    assert local("30 1 * * *", "Europe/London", "2026-03-28T00:00Z", "2026-03-31T00:00Z") == [
        "2026-03-28T01:30:00+00:00",
        "2026-03-29T02:00:00+01:00>",
        "2026-03-30T01:30:00+01:00",
    ]


def test_london_fixed_time_in_overlap_runs_once_at_first_occurrence() -> None:
    assert local("30 1 * * *", "Europe/London", "2026-10-24T00:00Z", "2026-10-27T00:00Z") == [
        "2026-10-24T01:30:00+01:00",
        "2026-10-25T01:30:00+01:00" + "1",
        "2026-10-26T01:30:00+00:00",
    ]


def test_london_wildcard_skips_gap_and_repeats_overlap() -> None:
    assert local("*/30 * * * *", "Europe/London", "2026-03-29T00:00Z", "2026-03-29T02:00Z") == [
        "2026-03-29T00:30:00+00:00",
        "2026-03-29T02:00:00+01:00",
        "2026-03-29T02:30:00+01:00",
    ]
    assert local("*/30 * * * *", "Europe/London", "2026-10-24T22:45Z", "2026-10-25T02:00Z") == [
        "2026-10-25T00:00:00+01:00",
        "2026-10-25T00:30:00+01:00",
        "2026-10-25T01:00:00+01:00" + "1",
        "2026-10-25T01:30:00+01:00" + "1",
        "2026-10-25T01:00:00+00:00" + "2",
        "2026-10-25T01:30:00+00:00" + "2",
    ]


def test_london_several_gap_times_collapse_into_one_tick() -> None:
    # 01:00 and 01:30 are both skipped; both move to 02:00 BST, where the 02:00 entry fires anyway: one tick.
    assert local("0,30 1,2 * * *", "Europe/London", "2026-03-29T00:00Z", "2026-03-29T02:00Z") == [
        "2026-03-29T02:00:00+01:00",
        "2026-03-29T02:30:00+01:00",
    ]


# --- America/New_York: 23 and 25 hourly fires -----------------------------------------------------------------


def day_fires(expr: str, zone: str, day: str) -> list[Fire]:
    from zoneinfo import ZoneInfo

    tz = ZoneInfo(zone)
    start = datetime.fromisoformat(day).replace(tzinfo=tz).astimezone(UTC)
    end = (datetime.fromisoformat(day) + timedelta(days=1)).replace(tzinfo=tz).astimezone(UTC)
    return list(schedule_for(expr, zone).fires(start - timedelta(microseconds=1), end))


@pytest.mark.parametrize(("day", "count"), [("2026-03-07", 24), ("2026-03-08", 23), ("2026-11-01", 25)])
def test_new_york_hourly_fires_per_day(day: str, count: int) -> None:
    assert len(day_fires("0 * * * *", "America/New_York", day)) == count
    assert len(day_fires("@hourly", "America/New_York", day)) == count


def test_new_york_hourly_fires_are_an_hour_apart_in_real_time() -> None:
    fires = day_fires("0 * * * *", "America/New_York", "2026-11-01")
    gaps = {b.utc - a.utc for a, b in zip(fires, fires[1:], strict=False)}
    assert gaps == {timedelta(hours=1)}


def test_new_york_fixed_time_is_once_a_day_through_both_transitions() -> None:
    for day in ("2026-03-08", "2026-11-01"):
        assert len(day_fires("30 1 * * *", "America/New_York", day)) == 1
        assert len(day_fires("30 2 * * *", "America/New_York", day)) == 1
    assert [f.local.isoformat() for f in day_fires("30 2 * * *", "America/New_York", "2026-03-08")] == [
        "2026-03-08T03:00:00-04:00"
    ]


def test_new_york_fixed_step_hours_are_fixed_time() -> None:
    # `0-23/2` does not begin with '*': fixed-time, so the 02:00 inside the gap runs at 03:00.
    assert local("0 0-23/2 * * *", "America/New_York", "2026-03-08T04:00Z", "2026-03-08T09:00Z") == [
        "2026-03-08T00:00:00-05:00",
        "2026-03-08T03:00:00-04:00>",
        "2026-03-08T04:00:00-04:00",
    ]
    # `*/2` begins with '*': wildcard, so 02:00 does not exist that day and nothing fires for it.
    assert local("0 */2 * * *", "America/New_York", "2026-03-08T04:00Z", "2026-03-08T09:00Z") == [
        "2026-03-08T00:00:00-05:00",
        "2026-03-08T04:00:00-04:00",
    ]


# --- Australia/Sydney (southern hemisphere: fall back in April, spring forward in October) --------------------


def test_sydney_overlap_in_april() -> None:
    assert local("30 2 * * *", "Australia/Sydney", "2026-04-04T12:00Z", "2026-04-05T12:00Z") == [
        "2026-04-05T02:30:00+11:00" + "1",
    ]
    assert local("30 2 * * *", "Australia/Sydney", "2026-04-04T12:00Z", "2026-04-05T12:00Z",
                 DstPolicy(overlap=DstOverlap.LAST)) == ["2026-04-05T02:30:00+10:00" + "2"]  # fmt: skip
    assert local("30 * * * *", "Australia/Sydney", "2026-04-04T14:00Z", "2026-04-04T18:00Z") == [
        "2026-04-05T01:30:00+11:00",
        "2026-04-05T02:30:00+11:00" + "1",
        "2026-04-05T02:30:00+10:00" + "2",
        "2026-04-05T03:30:00+10:00",
    ]


def test_sydney_gap_in_october() -> None:
    assert local("30 2 * * *", "Australia/Sydney", "2026-10-02T12:00Z", "2026-10-04T12:00Z") == [
        "2026-10-03T02:30:00+10:00",
        "2026-10-04T03:00:00+11:00>",
    ]
    assert local("30 * * * *", "Australia/Sydney", "2026-10-03T14:00Z", "2026-10-03T17:00Z") == [
        "2026-10-04T00:30:00+10:00",
        "2026-10-04T01:30:00+10:00",
        "2026-10-04T03:30:00+11:00",
    ]


# --- Australia/Lord_Howe: clocks move 30 minutes ---------------------------------------------------------------


def test_lord_howe_hourly_is_90_minutes_apart_across_each_transition() -> None:
    assert local("0 * * * *", "Australia/Lord_Howe", "2026-04-04T13:30Z", "2026-04-04T17:00Z") == [
        "2026-04-05T01:00:00+11:00",
        "2026-04-05T02:00:00+10:30",
        "2026-04-05T03:00:00+10:30",
    ]
    assert local("0 * * * *", "Australia/Lord_Howe", "2026-10-03T14:00Z", "2026-10-03T17:00Z") == [
        "2026-10-04T01:00:00+10:30",
        "2026-10-04T03:00:00+11:00",
    ]
    spring = schedule_for("0 * * * *", "Australia/Lord_Howe").fires(at("2026-10-03T14:00Z"))
    a, b = next(spring), next(spring)
    assert b.utc - a.utc == timedelta(minutes=90)


def test_lord_howe_fixed_times() -> None:
    # 02:00 and 02:15 fall in the 02:00-02:30 gap: both run at 02:30 (one tick); 02:30 itself exists.
    assert local("0,15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00Z", "2026-10-04T12:00Z") == [
        "2026-10-04T02:30:00+11:00>",
    ]
    assert local("30 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00Z", "2026-10-04T12:00Z") == [
        "2026-10-04T02:30:00+11:00",
    ]
    # 01:45 happens twice on 5 April: fixed-time runs at the first, wildcard at both.
    assert local("45 1 * * *", "Australia/Lord_Howe", "2026-04-04T12:00Z", "2026-04-04T18:00Z") == [
        "2026-04-05T01:45:00+11:00" + "1",
    ]
    assert local("45 * * * *", "Australia/Lord_Howe", "2026-04-04T14:00Z", "2026-04-04T16:30Z") == [
        "2026-04-05T01:45:00+11:00" + "1",
        "2026-04-05T01:45:00+10:30" + "2",
        "2026-04-05T02:45:00+10:30",
    ]


# --- no DST, leap days ---------------------------------------------------------------------------------------


def test_tokyo_has_no_adjustments() -> None:
    s = schedule_for("30 2 * * *", "Asia/Tokyo")
    fires = list(s.fires(at("2026-01-01T00:00Z"), at("2027-01-01T00:00Z")))
    assert len(fires) == 365
    assert all(f.local.isoformat().endswith("T02:30:00+09:00") for f in fires)
    assert dst_adjusted_fires(s, at("2026-01-01T00:00Z"), at("2027-01-01T00:00Z")) == []


def test_leap_day_fires_every_four_years() -> None:
    fires = list(schedule_for("0 0 29 2 *", "UTC").fires(at("2026-01-01T00:00Z"), at("2041-01-01T00:00Z")))
    assert [f.utc.isoformat() for f in fires] == [
        "2028-02-29T00:00:00+00:00",
        "2032-02-29T00:00:00+00:00",
        "2036-02-29T00:00:00+00:00",
        "2040-02-29T00:00:00+00:00",
    ]


def test_leap_day_in_a_dst_zone() -> None:
    assert local("0 12 29 2 *", "Europe/London", "2026-01-01T00:00Z", "2033-01-01T00:00Z") == [
        "2028-02-29T12:00:00+00:00",
        "2032-02-29T12:00:00+00:00",
    ]


# --- day-of-month / day-of-week rule (Vixie cron: AND when either starts with '*', else OR) -------------------


def utc_days(expr: str, start: str, end: str) -> list[str]:
    return [f.utc.strftime("%a %d") for f in schedule_for(expr, "UTC").fires(at(start), at(end))]


def test_dom_dow_and_when_a_field_starts_with_star() -> None:
    # June 2026: Mondays are 1, 8, 15, 22, 29; `*/2` days are the odd ones.
    assert utc_days("0 0 */2 * 1", "2026-06-01T00:00Z", "2026-07-01T00:00Z") == ["Mon 15", "Mon 29"]
    assert utc_days("0 0 1-31 * */7", "2026-06-01T00:00Z", "2026-06-30T00:00Z") == [
        "Sun 07", "Sun 14", "Sun 21", "Sun 28",
    ]  # fmt: skip


def test_dom_dow_or_when_neither_starts_with_star() -> None:
    assert utc_days("0 0 1,15 * 1", "2026-06-01T00:00Z", "2026-07-01T00:00Z") == [
        "Mon 08", "Mon 15", "Mon 22", "Mon 29",
    ]  # fmt: skip
    # (June 1 is excluded only because the window is strictly after its midnight.)
    assert len(utc_days("0 0 1-31 * 1", "2026-06-01T00:00Z", "2026-07-01T00:00Z")) == 29  # OR with every day


def test_dow_seven_is_sunday() -> None:
    assert utc_days("0 0 * * 7", "2026-06-01T00:00Z", "2026-06-15T00:00Z") == ["Sun 07", "Sun 14"]
    assert utc_days("0 0 * * 5-7", "2026-06-01T00:00Z", "2026-06-08T00:00Z") == ["Fri 05", "Sat 06", "Sun 07"]


# --- every DstPolicy combination ------------------------------------------------------------------------------

GAP = ("2026-03-08T05:00Z", "2026-03-08T08:00Z")  # New York spring forward: 00:00 EST to 04:00 EDT
OVERLAP = ("2026-11-01T04:00Z", "2026-11-01T07:00Z")  # New York fall back: 00:00 EDT to 02:00 EST


@pytest.mark.parametrize(
    ("expr", "policy", "gap", "overlap"),
    [
        # fixed-time entry; None keeps the cron rule (gap run, overlap first)
        ("30 2 * * *", None, ["03:00-04:00>"], []),
        ("30 1 * * *", None, ["01:30-05:00"], ["01:30-04:001"]),
        ("30 2 * * *", DstPolicy(gap=DstGap.SKIP), [], []),
        ("30 1 * * *", DstPolicy(overlap=DstOverlap.LAST), ["01:30-05:00"], ["01:30-05:002"]),
        ("30 1 * * *", DstPolicy(overlap=DstOverlap.BOTH), ["01:30-05:00"], ["01:30-04:001", "01:30-05:002"]),
        ("30 1 * * *", DstPolicy(gap=DstGap.SKIP, overlap=DstOverlap.FIRST), ["01:30-05:00"], ["01:30-04:001"]),
        # wildcard entry; None keeps the cron rule (gap skip, overlap both)
        ("30 * * * *", None, ["00:30-05:00", "01:30-05:00", "03:30-04:00"],
         ["00:30-04:00", "01:30-04:001", "01:30-05:002"]),
        ("30 * * * *", DstPolicy(gap=DstGap.RUN), ["00:30-05:00", "01:30-05:00", "03:00-04:00>", "03:30-04:00"],
         ["00:30-04:00", "01:30-04:001", "01:30-05:002"]),
        ("30 * * * *", DstPolicy(overlap=DstOverlap.FIRST), ["00:30-05:00", "01:30-05:00", "03:30-04:00"],
         ["00:30-04:00", "01:30-04:001"]),
        ("30 * * * *", DstPolicy(gap=DstGap.RUN, overlap=DstOverlap.LAST),
         ["00:30-05:00", "01:30-05:00", "03:00-04:00>", "03:30-04:00"],
         ["00:30-04:00", "01:30-05:002"]),
        ("30 * * * *", DstPolicy(gap=DstGap.SKIP, overlap=DstOverlap.BOTH),
         ["00:30-05:00", "01:30-05:00", "03:30-04:00"], ["00:30-04:00", "01:30-04:001", "01:30-05:002"]),
    ],
)  # fmt: skip
def test_policy_combinations(expr: str, policy: DstPolicy | None, gap: list[str], overlap: list[str]) -> None:
    def short(window: tuple[str, str]) -> list[str]:
        return [s[11:16] + s[19:25] + s[25:] for s in local(expr, "America/New_York", *window, dst=policy)]

    assert short(GAP) == gap
    assert short(OVERLAP) == overlap


def test_seconds_field_comes_first() -> None:
    s = schedule_for("15 30 2 * * *", "UTC")
    assert s.has_seconds
    assert s.next_after(at("2026-06-01T00:00Z")) == at("2026-06-01T02:30:15Z")
    # fixed-time by its minute and hour, so the gap moves it to the transition instant
    assert local("15 30 2 * * *", "America/New_York", *GAP) == ["2026-03-08T03:00:00-04:00>"]


def test_wildcard_flag_follows_cronie() -> None:
    for expr in ("*/10 * * * *", "0 * * * *", "15 */2 * * *", "@hourly", "0 */1 * * *"):
        assert schedule_for(expr, "UTC").wildcard, expr
    for expr in ("30 2 * * *", "0 0-23/2 * * *", "@daily", "@weekly", "0 1,2 * * *"):
        assert not schedule_for(expr, "UTC").wildcard, expr


# --- restart independence -------------------------------------------------------------------------------------

RESTARTS = [
    "2026-03-08T06:59:59Z",  # just before the jump (New York)
    "2026-03-08T07:00:00Z",  # exactly on the transition
    "2026-11-01T05:00:00Z",  # first pass of the overlap, 01:00 EDT
    "2026-11-01T05:45:00Z",  # inside the first pass
    "2026-11-01T06:00:00Z",  # exactly on the fall-back transition (01:00 EST)
    "2026-11-01T06:30:00Z",  # inside the second pass
]


@pytest.mark.parametrize("expr", ["0 * * * *", "*/15 * * * *", "30 1 * * *", "30 2 * * *", "0 1,2 * * *"])
@pytest.mark.parametrize(
    "policy", [None, DstPolicy(DstGap.SKIP, DstOverlap.BOTH), DstPolicy(DstGap.RUN, DstOverlap.LAST)]
)
def test_fires_do_not_depend_on_where_iteration_starts(expr: str, policy: DstPolicy | None) -> None:
    s = schedule_for(expr, "America/New_York", policy)
    for restart in RESTARTS:
        t = at(restart)
        end = t + timedelta(days=2)
        everything = list(s.fires(t - timedelta(days=3), end))  # from well before the transition
        assert list(s.fires(t, end)) == [f for f in everything if f.utc > t], restart
        assert s.next_after(t) == next(f.utc for f in everything if f.utc > t), restart


@pytest.mark.parametrize("zone", ["Europe/London", "Australia/Lord_Howe", "Australia/Sydney"])
def test_restart_from_every_minute_around_transitions(zone: str) -> None:
    s = schedule_for("*/20 * * * *", zone)
    fresh = Schedule("*/20 * * * *", zone)  # no memo shared with s
    for month in ("2026-03-28", "2026-04-04", "2026-10-03", "2026-10-24"):
        base = at(month + "T00:00Z")
        everything = list(s.fires(base, base + timedelta(days=3)))
        for minute in range(0, 48 * 60, 7):
            t = base + timedelta(minutes=minute)
            expected = next((f.utc for f in everything if f.utc > t), None)
            assert fresh.next_after(t) == expected, (zone, t)


def test_schedule_for_is_shared() -> None:
    assert schedule_for("0 * * * *", "UTC") is schedule_for("0 * * * *", "UTC")
    assert schedule_for("0 * * * *", "UTC", DstPolicy()) is schedule_for("0 * * * *", "UTC", DstPolicy())
    assert schedule_for("0 * * * *", "UTC") is not schedule_for("0 * * * *", "Asia/Tokyo")


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        schedule_for("0 * * * *", "UTC").next_after(datetime(2026, 1, 1))


def test_dst_adjusted_fires_lists_moved_and_repeated_ticks() -> None:
    s = schedule_for("30 1,2 * * *", "America/New_York")
    adjusted = dst_adjusted_fires(s, at("2026-01-01T00:00Z"), at("2027-01-01T00:00Z"))
    assert [(f.local.isoformat(), f.gap_moved, f.overlap) for f in adjusted] == [
        ("2026-03-08T03:00:00-04:00", True, None),
        ("2026-11-01T01:30:00-04:00", False, "first"),
    ]


def test_dst_adjusted_fires_of_an_every_minute_job_over_a_year() -> None:
    # Only the days around transitions are walked; the repeated hour gives 60 first and 60 second passes.
    s = schedule_for("* * * * *", "America/New_York")
    adjusted = dst_adjusted_fires(s, at("2026-01-01T00:00Z"), at("2027-01-01T00:00Z"))
    assert [f.overlap for f in adjusted] == ["first"] * 60 + ["last"] * 60
    assert adjusted[0].local.isoformat() == "2026-11-01T01:00:00-04:00"
    assert adjusted[-1].local.isoformat() == "2026-11-01T01:59:00-05:00"
