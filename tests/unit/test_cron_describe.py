"""describe(): plain English for common shapes, the expression itself otherwise. One line a case."""

from __future__ import annotations

import pytest

from schedctl.timing.cron import schedule_for

CASES = [
    ("30 2 * * *", "at 02:30 every day"),
    ("*/5 * * * *", "every 5 minutes"),
    ("* * * * *", "every minute"),
    ("0 * * * *", "every hour at :00"),
    ("@hourly", "every hour at :00"),
    ("@daily", "at 00:00 every day"),
    ("@weekly", "at 00:00 on Sunday"),
    ("@monthly", "at 00:00 on day 1 of the month"),
    ("@yearly", "at 00:00 on day 1 of the month in January"),
    ("0 0 * * 1-5", "at 00:00 on Monday to Friday"),
    ("0 0 * * 1,3,5", "at 00:00 on Monday, Wednesday and Friday"),
    ("0 0 */2 * 1", "at 00:00 on Monday, if it is one of days 1, 3, 5, …, 31 of the month"),
    ("0 0 1,15 * 1", "at 00:00 on days 1 and 15 of the month and on every Monday"),
    ("15 30 2 * * *", "at 02:30:15 every day"),
    ("*/15 * * * * *", "every 15 seconds"),
    ("*/10 9-17 * * 1-5", "every 10 minutes from 09:00 to 17:59 on Monday to Friday"),
    ("0 */2 * * *", "every 2 hours at :00"),
    ("0 9-17 * * 1-5", "every hour at :00 from 09:00 to 17:00 on Monday to Friday"),
    ("0 0,12 * * 0,6", "at 00:00 and 12:00 on Sunday and Saturday"),
    ("7 3,9 * 6-8 *", "at 03:07 and 09:07 every day in June to August"),
    ("0 0 29 2 *", "at 00:00 on day 29 of the month in February"),
    ("1-10 5 * * *", "cron '1-10 5 * * *'"),
]


@pytest.mark.parametrize(("expr", "text"), CASES)
def test_describe(expr: str, text: str) -> None:
    assert schedule_for(expr, "UTC").describe() == text
