"""The pure parts of `missed`: lease coverage and gap sentences, pause intervals, windows, time parsing; and that
`missed` and `status` load no SQLAlchemy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedctl.inspect.leasecover import LeaseTimeline
from schedctl.inspect.missed import first_clause, pause_intervals
from schedctl.store.rows import EventRecord, StateRecord, TermRecord
from schedctl.store.window import default_window, resolve_window
from schedctl.timing.timetext import clock_text, parse_instant


def T(hour: int, minute: int, second: int = 0, day: int = 1) -> datetime:
    return datetime(2026, 3, day, hour, minute, second, tzinfo=UTC)


def term(
    n: int, holder: str, acquired: datetime, expires: datetime, ended=None, reason=None, grace=None
) -> TermRecord:
    return TermRecord(n, holder, acquired, expires - timedelta(seconds=15), expires, ended, reason, grace)


# Term 7 lapsed at 13:02:11 and was marked ended only when term 8 took over at 16:40:03.
TERMS = [
    term(6, "host-a:99", T(8, 0), T(11, 30), T(11, 30), "released"),
    term(7, "host-b:4711", T(11, 30), T(13, 2, 11), T(16, 40, 3), "expired"),
    term(8, "host-a:99", T(16, 40, 3), T(16, 45, 10)),
]


@pytest.mark.parametrize(
    ("tick", "holder"),
    [
        (T(9, 0), 6),
        (T(11, 30), 7),  # handover instant: the newer term
        (T(13, 2), 7),  # 11 s before the lapse: that leader had the tick
        (T(13, 10), None),
        (T(16, 39), None),  # the next leader came 63 s later: beyond the grace
        (T(16, 39, 30), 8),  # within the grace of term 8's arrival: late, not missed
        (T(16, 44), 8),
    ],
)
def test_holder_near_a_tick(tick, holder):
    got = LeaseTimeline(TERMS, now=T(16, 45)).holder_near(tick)
    assert (got.term if got else None) == holder


def test_gap_sentences():
    lt = LeaseTimeline(TERMS, now=T(16, 45))
    assert lt.gap_text(T(13, 10)) == (
        "no scheduler held the lease from 13:02:11 (term 7, host-b:4711, ended: expired) "
        "until 16:40:03 (term 8, host-a:99)"
    )
    lapsed = LeaseTimeline(TERMS[:2], now=T(16, 45))
    assert lapsed.gap_text(T(13, 10)).endswith("ended: expired) and none has since")
    # a term never marked ended whose expiry passed reads "expired" too
    open_term = LeaseTimeline([term(3, "h:1", T(9, 0), T(10, 0))], now=T(12, 0))
    assert (
        open_term.gap_text(T(11, 0))
        == "no scheduler held the lease from 10:00:00 (term 3, h:1, ended: expired) and none has since"
    )
    assert LeaseTimeline([], now=T(12, 0)).gap_text(T(11, 0)) == "no scheduler has ever held the lease"
    before_any = LeaseTimeline([TERMS[2]], now=T(16, 45))
    assert (
        before_any.gap_text(T(9, 0)) == "no scheduler had held the lease until 16:40:03 (term 8, host-a:99)"
    )


def test_gap_across_days_names_the_date():
    lt = LeaseTimeline(
        [term(1, "h:1", T(22, 0, day=1), T(23, 0, day=1), T(23, 0, day=1), "released")], now=T(9, 0, day=2)
    )
    assert lt.gap_text(T(8, 0, day=2)).startswith(
        "no scheduler held the lease from 2026-03-01 23:00:00 (term 1"
    )


def ev(at: datetime, kind: str, detail: str | None) -> EventRecord:
    return EventRecord("j", at, kind, detail)


def state(**kw) -> StateRecord:
    base = dict(
        job_id="j",
        schedule_key="k",
        defined_at=T(0, 0),
        last_dispatched=None,
        paused_at=None,
        paused_by_file=False,
        refused_at=None,
        refused_detail=None,
        history_start=None,
    )
    return StateRecord(**{**base, **kw})


def test_pause_intervals_per_source():
    events = [
        ev(T(9, 0), "paused", "job file"),
        ev(T(9, 30), "paused", "schedctl pause"),
        ev(T(10, 0), "resumed", "job file"),
        ev(T(11, 0), "resumed", "schedctl pause"),
        ev(T(12, 0), "paused", "schedctl pause"),
    ]
    got = [(p.start, p.end, p.source) for p in pause_intervals(events, state(paused_at=T(12, 0)))]
    assert got == [
        (T(9, 0), T(10, 0), "job file"),
        (T(9, 30), T(11, 0), "schedctl pause"),
        (T(12, 0), None, "schedctl pause"),
    ]


@pytest.mark.parametrize(
    ("grace", "tick", "holder"),
    [
        (300.0, T(16, 36), 8),  # term 8's leader dispatches a 4 min old tick late under a 300 s grace
        (300.0, T(16, 34), None),
        (5.0, T(16, 39, 30), None),  # 33 s before term 8 came: missed under its 5 s grace
        (5.0, T(16, 40), 8),
    ],
)
def test_each_term_is_judged_by_the_grace_its_leader_recorded(grace, tick, holder):
    terms = [*TERMS[:2], term(8, "host-a:99", T(16, 40, 3), T(16, 45, 10), grace=grace)]
    got = LeaseTimeline(terms, now=T(16, 45)).holder_near(tick)
    assert (got.term if got else None) == holder


def test_paused_at_without_an_event_is_an_open_pause():
    got = [(p.start, p.end) for p in pause_intervals([], state(paused_at=T(8, 0)))]
    assert got == [(T(8, 0), None)]


def test_default_window():
    now = T(16, 45, day=9)
    w = default_window(state(defined_at=T(9, 0, day=8)), None, now)
    assert (w.after, w.until) == (T(9, 0, day=8), T(16, 44, day=9))
    old = default_window(state(defined_at=T(9, 0, day=1)), None, now)
    assert old.after == now - timedelta(days=7)
    # The history mark no longer narrows the window: before it, the lasting record of missed ticks speaks.
    marked = default_window(state(defined_at=T(9, 0, day=8), history_start=T(12, 0, day=8)), None, now)
    assert marked.after == T(9, 0, day=8)
    first_dispatch_only = default_window(None, T(10, 0, day=9), now)
    assert first_dispatch_only.after == T(10, 0, day=9) - timedelta(microseconds=1)
    never_seen = default_window(None, None, now)
    assert never_seen.after == never_seen.until


def test_a_user_window_never_crosses_the_grace():
    now = T(16, 45)
    w = resolve_window(state(history_start=T(12, 0)), None, T(9, 0), T(23, 0), now)
    assert (w.after, w.until) == (T(9, 0) - timedelta(microseconds=1), T(16, 44))
    w = resolve_window(state(), None, T(9, 0), T(23, 0), now, grace=300)
    assert w.until == T(16, 40)
    w = resolve_window(state(defined_at=T(10, 0)), None, T(9, 0), None, now)
    assert w.after == T(9, 0) - timedelta(microseconds=1)  # before definition: asked for, so shown


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-01T13:00:00Z", T(13, 0)),
        ("2026-03-01T14:00:00+01:00", T(13, 0)),
        ("2026-03-01 13:00", T(13, 0)),  # no offset: UTC, never the host's zone
        ("2026-03-01", T(0, 0)),
        ("6h", T(10, 45)),
        ("90m ago", T(15, 15)),
        ("1d", T(16, 45) - timedelta(days=1)),
        ("now", T(16, 45)),  # issue 30: `--until now` is what people type
        ("NOW", T(16, 45)),
        ("-2h", T(14, 45)),  # and -2h, as GNU date and journalctl spell it
        ("- 30m", T(16, 15)),
    ],
)
def test_parse_instant(text, expected):
    assert parse_instant(text, T(16, 45)) == expected


def test_parse_instant_refuses_nonsense_with_examples():
    with pytest.raises(ValueError, match=r"invalid time 'yesterday' \(write it as 2026-03-01T13:00:00Z"):
        parse_instant("yesterday", T(16, 45))
    with pytest.raises(ValueError, match="invalid time"):
        parse_instant("-now", T(16, 45))


def test_first_clause_and_clock_text():
    assert first_clause("21 missed ticks exceed max_catch_up = 10; nothing was queued. Run it") == (
        "21 missed ticks exceed max_catch_up = 10"
    )
    assert first_clause("one sentence.") == "one sentence"
    assert first_clause(None) == ""
    assert clock_text(T(13, 2, 11), T(13, 10)) == "13:02:11"
    assert clock_text(T(13, 2, 11), T(13, 10, day=2)) == "2026-03-01 13:02:11"


def test_missed_and_status_load_no_sqlalchemy():
    """They explain plain data the store read: `missed` and `status` themselves cost no SQLAlchemy import."""
    import subprocess
    import sys

    code = (
        "import sys, schedctl.inspect.missed, schedctl.inspect.status\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sqlalchemy')[:3])\n"
        "sys.exit('sqlalchemy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
