"""One catch-up grace for every reader (issue 13, part 4), on every backend, with an injected clock.

The leader records the grace it splits late from missed ticks by with its term (`serve --catch-up-grace`);
`missed`, `status` and `replay` judge each tick by the grace of the leader of its time, and the window ends at
now minus the latest leader's grace. A job fires every minute; its leader (term 1) lapsed at 12:10:30 after
the 12:10 run, and, unless a test adds one, no leader came since.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from factories import add_runs, add_state, add_term

from schedctl.inspect.missed import missed, missed_counts
from schedctl.inspect.replay import plan_replay
from schedctl.inspect.status import entry_reason, job_status
from schedctl.jobs.job import CatchUp, Job

MINUTELY = Job(id="minutely", schedule="* * * * *", timezone="UTC", catch_up=CatchUp.ALL, command="true")


def T(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 3, 1, hour, minute, second, tzinfo=UTC)


def seed(store, grace: float | None) -> None:
    with store.begin() as conn:
        add_state(conn, MINUTELY, T(12, 0), T(12, 10))
        add_runs(conn, MINUTELY, [T(12, m) for m in range(1, 11)])
        add_term(conn, 1, "host-1:1:aa", T(11, 55), T(12, 10, 30), current=True, grace=grace)


def readers(store, now: datetime) -> tuple[list[datetime], list[datetime], list[datetime]]:
    """The ticks `missed`, `status` and `replay` each call missed."""
    by_missed = [t.scheduled_for for t in missed(store, MINUTELY, None, None, now)]
    by_status = [t.scheduled_for for t in job_status(store, MINUTELY, now).missed]
    by_replay = [t.scheduled_for for t in plan_replay(store, [MINUTELY], None, None, now).ticks]
    return by_missed, by_status, by_replay


@pytest.mark.parametrize(
    ("grace", "expected"),
    [
        # A 300 s leader would still dispatch 12:11 .. 12:13 late at 12:14: none is missed yet.
        (300.0, []),
        # The terms recorded before schema 0003 (no grace): the 60 s default of that time.
        (None, [T(12, 11), T(12, 12)]),
        # A 5 s leader: every tick older than 5 s is missed; a 60 s reader hid 12:13 for a minute.
        (5.0, [T(12, 11), T(12, 12), T(12, 13)]),
    ],
)
def test_every_reader_uses_the_grace_the_leader_recorded(store, grace, expected):
    seed(store, grace)
    now = T(12, 14)
    assert readers(store, now) == (expected, expected, expected)


def test_a_tick_a_long_grace_leader_dispatched_late_is_not_missed_by_the_leader_before(store):
    """Term 2 arrived at 12:14:30 with a 300 s grace: 12:11 .. 12:14 were late for it, not missed, although
    no leader held the lease at their time; it queued them, and they wait for a worker."""
    seed(store, 60.0)
    with store.begin() as conn:
        add_term(conn, 2, "host-2:1:aa", T(12, 14, 30), T(12, 30), current=True, grace=300.0)
        add_runs(conn, MINUTELY, [T(12, m) for m in range(11, 15)], "queued")
    now = T(12, 14, 40)
    assert readers(store, now) == ([], [], [])
    ticks = missed(store, MINUTELY, T(12, 1), now, now, late=True)
    assert [(t.scheduled_for, t.state, t.row_state) for t in ticks] == [
        (T(12, m), "late", "queued") for m in range(11, 15)
    ]
    assert ticks[0].reason_code == "late"
    assert ticks[0].reason_text == "queued at 12:11:00, waiting for a worker"


def test_an_until_past_the_grace_lists_the_younger_ticks_as_late_with_no_leader_since(store):
    seed(store, 300.0)
    now = T(12, 14, 10)
    assert missed(store, MINUTELY, None, now, now) == []  # without late=True: the old window, nothing
    ticks = missed(store, MINUTELY, None, now, now, late=True)
    assert [(t.scheduled_for, t.state, t.reason_code) for t in ticks] == [
        (T(12, m), "late", "late") for m in (11, 12, 13, 14)
    ]
    assert ticks[0].reason_text.startswith("no leader since 12:10:30 (term 1, host-1:1:aa)")
    # An --until inside the grace changes nothing about what is missed.
    assert [t.state for t in missed(store, MINUTELY, None, T(12, 9), now, late=True)] == []


# -- a recorded skip inside the grace (issue 30) -------------------------------------------------------------

FORBID = Job(id="forbid", schedule="* * * * *", timezone="UTC", catch_up=CatchUp.SKIP, command="sleep 90")


def seed_young_skips(store) -> None:
    """A 300 s leader holds the lease; at 12:13:30 every tick after 12:08:30 is younger than its grace. It
    recorded 12:11 as skipped (concurrency) and 12:12 as skipped (queue_full); 12:13 is not dispatched yet."""
    with store.begin() as conn:
        add_state(conn, FORBID, T(12, 0), T(12, 12))
        add_runs(conn, FORBID, [T(12, m) for m in range(1, 11)])
        add_runs(
            conn,
            FORBID,
            [T(12, 11)],
            "skipped",
            reason="concurrency",
            reason_detail='concurrency = "forbid": the run of 12:10:00 is still running',
        )
        add_runs(conn, FORBID, [T(12, 12)], "skipped", reason="queue_full", reason_detail="1 queued")
        add_term(conn, 1, "host-1:1:aa", T(11, 55), T(12, 30), current=True, grace=300.0)


def test_a_skip_the_leader_recorded_inside_the_grace_is_missed_at_once_with_its_reason(store):
    seed_young_skips(store)
    now = T(12, 13, 30)
    ticks = missed(store, FORBID, None, None, now)
    assert [(t.scheduled_for, t.reason_code, t.row_state, t.state) for t in ticks] == [
        (T(12, 11), "concurrency", "skipped", "missed"),
        (T(12, 12), "queue_full", "skipped", "missed"),
    ]
    assert ticks[0].reason_text == 'concurrency = "forbid": the run of 12:10:00 is still running'
    # With an --until past the grace, the tick that may still run is late; the skips stay missed.
    late = missed(store, FORBID, None, now, now, late=True)
    assert [(t.scheduled_for, t.reason_code, t.state) for t in late] == [
        (T(12, 11), "concurrency", "missed"),
        (T(12, 12), "queue_full", "missed"),
        (T(12, 13), "late", "late"),
    ]
    # An --until before them leaves them out, like any tick after the window.
    assert missed(store, FORBID, None, T(12, 11), now) == []
    (counts,) = missed_counts(store, [FORBID], now, grace=300.0)
    assert (counts.count, dict(counts.reasons)) == (2, {"concurrency": 1, "queue_full": 1})


def test_status_and_replay_agree_with_missed_about_a_young_skip(store):
    seed_young_skips(store)
    now = T(12, 13, 30)
    s = job_status(store, FORBID, now)
    assert [t.scheduled_for for t in s.missed] == [T(12, 11), T(12, 12)]
    assert [(e.scheduled_for, e.state, entry_reason(e)[0]) for e in s.timeline[-2:]] == [
        (T(12, 11), "missed", "concurrency"),
        (T(12, 12), "missed", "queue_full"),
    ]
    # queue_full is no choice of the job's policy: the verdict says so now, not after the grace.
    assert str(s.verdict_code) == "missed"
    assert s.verdict.startswith(
        "missed 1 tick (12:12): skipped: no worker had started the runs already queued"
    )
    plan = plan_replay(store, [FORBID], None, None, now)
    assert [(t.scheduled_for, t.action) for t in plan.ticks] == [
        (T(12, 11), "requeue"),
        (T(12, 12), "requeue"),
    ]
