"""How every view says a duration (`jobs` LEFT/LAST, `workers` LAST SEEN, `leases`, `top`): one table, a case a line."""

from __future__ import annotations

import pytest

from schedctl.timing.timetext import ago, parse_duration, short_duration

SPANS = [
    (0, "0s"),
    (0.4, "0s"),
    (0.6, "1s"),  # rounded, not cut: a fire 0.6 s away is "1s" LEFT
    (-5, "0s"),  # a clock a little behind the database's: never "-5s"
    (59, "59s"),
    (60, "1m"),
    (95, "1m35s"),
    (3599, "59m59s"),
    (3600, "1h"),
    (3661, "1h1m"),  # the two largest units: the second is dropped
    (7500, "2h5m"),
    (17 * 3600 + 30, "17h"),  # 30 s is below the second unit
    (86400, "1d"),
    (86400 + 3 * 3600 + 20 * 60, "1d3h"),
    (86400 + 5 * 60, "1d"),  # 1d0h5m: the hours are the second unit, and they are zero
    (40 * 86400, "40d"),
]


@pytest.mark.parametrize(("seconds", "text"), SPANS)
def test_short_duration(seconds: float, text: str) -> None:
    assert short_duration(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0.0s"),
        (2.44, "2.4s"),
        (59.9, "59.9s"),
        (59.96, "1m"),  # would print "60.0s"
        (86400.0, "1d"),  # a day-old lapse is not "86400.0s"
        (-1, "0.0s"),
    ],
)
def test_short_duration_in_tenths_under_a_minute(seconds: float, text: str) -> None:
    assert short_duration(seconds, tenths=True) == text


def test_ago_is_the_short_duration_of_how_long_ago() -> None:
    assert [ago(3), ago(125), ago(2400), ago(1.26, tenths=True)] == [
        "3s ago",
        "2m5s ago",
        "40m ago",
        "1.3s ago",
    ]


@pytest.mark.parametrize(("seconds", "text"), SPANS)
def test_a_short_duration_is_a_duration_a_user_can_type_back(seconds: float, text: str) -> None:
    """`--since 4m12s` takes what a view printed; it is short of the duration by the units it dropped."""
    assert 0 <= max(0, round(seconds)) - parse_duration(text) < 3600
