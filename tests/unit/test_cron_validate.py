"""What cron accepts, and what it does not: a table, one line a case."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schedctl.errors import ScheduleError, ZoneError
from schedctl.timing.cron import load_zone, validate_expression, validate_zone

NOW = datetime(2026, 6, 1, tzinfo=UTC)

ACCEPTED = [
    "* * * * *",
    "*/5 * * * *",
    "0 0 * * *",
    "0-59/15 0-23 1-31 1-12 0-7",
    "0 0 * * mon-fri",
    "0 0 * * MON-Fri",
    "0 0 * * mon-5",  # Vixie cron reads a name or a number at each end of a range
    "0 0 * JAN-mar *",
    "0 0 * jul,aug *",
    "0 0 * * 7",
    "0 0 * * 5-7",
    "0 0 29 2 *",  # leap day: fires every four years
    "0 0 31 * *",
    "0 0 31 1,4 *",  # OK: January has a 31st
    "0 0 30 2 1",  # OR: every Monday in February
    "*/60 * * * *",
    "15 30 2 * * *",  # six fields: seconds first
    "@hourly",
    "@daily",
    "@midnight",
    "@weekly",
    "@monthly",
    "@yearly",
    "@annually",
    "0 0 * * mon-sun",  # cronie reads an end of 0 (Sunday) in a day-of-week range as 7
]

REFUSED = [
    # (expression, field, part of the message)
    ("60 * * * *", "minute", "60 is out of range (0-59)"),
    ("* 24 * * *", "hour", "24 is out of range (0-23)"),
    ("* * 0 * *", "day of month", "0 is out of range (1-31)"),
    ("* * 32 * *", "day of month", "out of range"),
    ("* * * 13 *", "month", "13 is out of range (1-12)"),
    ("* * * 0 *", "month", "0 is out of range"),
    ("* * * * 8", "day of week", "8 is out of range (0-7)"),
    ("5-1 * * * *", "minute", "reversed"),
    ("* * * * fri-mon", "day of week", "reversed"),
    ("5/10 * * * *", "minute", "a step only after a range or '*'"),  # cronie get_range; Debian the same
    ("*/0 * * * *", "minute", "at least 1"),
    ("*/x * * * *", "minute", "not a number"),
    ("*/mon * * * *", "minute", "not a number"),
    ("1,,2 * * * *", "minute", "empty"),
    ("1, * * * *", "minute", "empty"),
    ("jan * * * *", "minute", "not a number"),
    ("0 0 * * monday", "day of week", "unknown name 'monday'"),
    ("0 0 * foo *", "month", "unknown name"),
    ("0 0 L * *", "day of month", "Quartz"),
    ("0 0 15W * *", "day of month", "Quartz"),
    ("0 0 LW * *", "day of month", "Quartz"),
    ("0 0 * * 5L", "day of week", "Quartz"),
    ("0 0 * * 1#2", "day of week", "Quartz"),
    ("0 0 ? * *", "day of month", "Quartz"),
    ("0 0 * * ?", "day of week", "Quartz"),
    ("H * * * *", "minute", "Jenkins"),
    ("H/15 * * * *", "minute", "Jenkins"),
    ("0 H(0-7) * * *", "hour", "Jenkins"),
    ("-1 * * * *", "minute", "cannot read"),
    ("1-2-3 * * * *", "minute", "cannot read"),
    ("*-5 * * * *", "minute", "cannot read"),
    ("1/2/3 * * * *", "minute", "cannot read"),
    ("0 0 30 2 *", "day of month", "never fires: day 30 does not occur in Feb"),
    ("0 0 31 4 *", "day of month", "never fires: day 31 does not occur in Apr"),
    ("0 0 31 4,6,9,11 *", "day of month", "never fires"),
    ("0 0 30,31 2 */2", "day of month", "never fires"),  # AND (dow starts with '*')
    ("0 0 1 1 * 2026", "day of week", "6 fields: the first is seconds"),
    ("60 * * * * *", "second", "60 is out of range"),
]

REFUSED_WHOLE = [
    ("", "empty"),
    ("* * * *", "expected 5 fields"),
    ("* * * * * * *", "expected 5 fields"),
    ("@reboot", "@reboot is not a schedule"),
    ("@every 5m", "@every is not cron syntax"),
    ("@fortnightly", "unknown macro"),
    ("@Daily", "lower case only"),  # a job file reads cron syntax as cronie does (strcmp)
]


@pytest.mark.parametrize("expr", ACCEPTED)
def test_accepted(expr: str) -> None:
    validate_expression(expr, now=NOW)


@pytest.mark.parametrize(("expr", "field", "message"), REFUSED)
def test_refused_names_the_field(expr: str, field: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=None) as info:
        validate_expression(expr, now=NOW)
    assert info.value.field == field
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("expr", "message"), REFUSED_WHOLE)
def test_refused_whole_expression(expr: str, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        validate_expression(expr, now=NOW)
    assert message in str(info.value)


def test_never_fires_within_ten_years_is_measured_from_now() -> None:
    # 29 February on a Sunday (AND: the day-of-week field starts with '*'): 2032, then 2060.
    validate_expression("0 0 29 2 */7", now=datetime(2026, 6, 1, tzinfo=UTC))
    with pytest.raises(ScheduleError, match="does not fire within 10 years"):
        validate_expression("0 0 29 2 */7", now=datetime(2032, 3, 1, tzinfo=UTC))


ZONES_OK = [
    "Europe/London",
    "UTC",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "America/Argentina/Buenos_Aires",
]

ZONES_REFUSED = [
    ("Europe/Londn", "unknown zone 'Europe/Londn' (did you mean 'Europe/London'?)"),
    ("europe/london", "unknown zone 'europe/london' (did you mean 'Europe/London'?)"),
    ("utc", "unknown zone 'utc' (did you mean 'UTC'?)"),
    ("Mars/Olympus_Mons", "unknown zone 'Mars/Olympus_Mons'"),
    ("+02:00", "fixed offset"),
    ("-0500", "fixed offset"),
    ("UTC+2", "fixed offset"),
    ("GMT+1", "fixed offset"),
    ("Etc/GMT+1", "fixed offset"),
    ("Etc/GMT-14", "fixed offset"),
    ("GMT0", "fixed offset"),
    ("/etc/localtime", "path"),
    ("/usr/share/zoneinfo/Europe/London", "path"),
    ("../../etc/passwd", "path"),
    ("Europe/../Europe/London", "path"),
    ("localtime", "host"),
    ("local", "host"),
    ("posixrules", "host"),
    ("Factory", "no real place"),
    ("posix/Europe/London", "write 'Europe/London'"),
    ("right/Europe/London", "write 'Europe/London'"),
    ("Etc/UTC", "write 'UTC'"),
    ("Zulu", "write 'UTC'"),
    ("GMT", "write 'UTC'"),
    ("EST5EDT", "not a region"),
    ("CET", "not a region"),
    ("EST", "not a region"),
    ("", "empty"),
]


@pytest.mark.parametrize("name", ZONES_OK)
def test_zone_accepted(name: str) -> None:
    validate_zone(name)
    assert load_zone(name) is load_zone(name)


@pytest.mark.parametrize(("name", "message"), ZONES_REFUSED)
def test_zone_refused(name: str, message: str) -> None:
    with pytest.raises(ZoneError) as info:
        validate_zone(name)
    assert message in str(info.value)
    assert len(str(info.value)) < 100


def test_zone_names_come_from_tzdata_not_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    import zoneinfo

    monkeypatch.setattr(zoneinfo, "TZPATH", ())
    load_zone.cache_clear()
    assert load_zone("Europe/London").utcoffset(datetime(2026, 7, 1)).total_seconds() == 3600  # type: ignore[union-attr]


# Where Debian's cron and cronie read a schedule differently, each dialect follows its own cron.
DIALECT_CASES = [
    # (expression, cronie: None = accepted / message part, debian: None / message part)
    ("0 0 * * mon-sun", None, "Debian's cron accepts this line and never runs it"),
    ("0 0 * * 1-0", None, "Debian's cron accepts this line and never runs it"),
    ("0 22-6 * * *", "cronie rejects this line", "Debian's cron accepts this line and never runs it"),
    ("5/15 * * * *", "a step only after a range", "a step only after a range"),
    ("0 0 30 2 *", "cron accepts this line and never runs it", "Debian's cron accepts this line and never"),
]


@pytest.mark.parametrize(("expr", "cronie", "debian"), DIALECT_CASES)
def test_each_dialect_reads_schedules_as_its_cron(expr: str, cronie: str | None, debian: str | None) -> None:
    for dialect, expected in (("cronie", cronie), ("debian", debian)):
        if expected is None:
            validate_expression(expr, now=NOW, dialect=dialect)
            continue
        with pytest.raises(ScheduleError) as info:
            validate_expression(expr, now=NOW, dialect=dialect)
        assert expected in str(info.value), (dialect, str(info.value))


def test_cronie_mon_sun_is_every_day() -> None:
    from schedctl.timing.cronexpr import parse_expression

    assert parse_expression("0 0 * * mon-sun").dows == (0, 1, 2, 3, 4, 5, 6)
