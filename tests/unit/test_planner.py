"""The planner decides each tick from the persisted last dispatched tick and an explicit ``now``."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from schedctl.jobs.job import CatchUp, Concurrency, Job, RunState, SkipReason
from schedctl.leader import planner
from schedctl.timing.cron import schedule_for

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def job(catch_up: CatchUp = CatchUp.SKIP, schedule: str = "* * * * *", **kw: object) -> Job:
    return Job("j", schedule, "UTC", catch_up, "true", concurrency=Concurrency.ALLOW, **kw)  # type: ignore[arg-type]


def plan(j: Job, last: datetime, now: datetime, grace: float = 60) -> planner.CatchUpPlan:
    sched = schedule_for(j.schedule, j.timezone, j.dst)
    nxt = sched.next_after(now)
    assert nxt is not None
    win = planner.window(sched, last, nxt, now, grace)
    return planner.plan_catch_up(j, win, now, sched)


def rows(p: planner.CatchUpPlan) -> list[tuple[str, str, str | None]]:
    return [(t.scheduled_for.strftime("%H:%M:%S"), str(t.state), t.reason and str(t.reason)) for t in p.ticks]


def test_grace_boundary_a_tick_exactly_grace_old_is_late_not_missed() -> None:
    p = plan(job(), last=T0, now=T0 + 5 * MINUTE, grace=60)
    assert rows(p) == [
        ("10:01:00", "skipped", "catch_up_skip"),
        ("10:02:00", "skipped", "catch_up_skip"),
        ("10:03:00", "skipped", "catch_up_skip"),
        ("10:04:00", "queued", None),  # exactly 60 s old: late, dispatched normally
        ("10:05:00", "queued", None),  # due now
    ]
    assert p.last_dispatched == T0 + 5 * MINUTE and p.refused is None


def test_nothing_due_when_last_dispatched_is_the_newest_tick() -> None:
    p = plan(job(), last=T0, now=T0 + timedelta(seconds=59))
    assert p.ticks == () and p.last_dispatched is None


def test_skip_after_an_outage_records_every_missed_tick_as_skipped() -> None:
    p = plan(job(CatchUp.SKIP, "0 * * * *"), last=T0, now=T0 + timedelta(hours=4, minutes=30))
    assert rows(p) == [(f"{h}:00:00", "skipped", "catch_up_skip") for h in (11, 12, 13, 14)]
    assert p.last_dispatched == datetime(2026, 3, 2, 14, tzinfo=UTC)


def test_latest_queues_only_the_most_recent_missed_tick() -> None:
    p = plan(job(CatchUp.LATEST, "0 * * * *"), last=T0, now=T0 + timedelta(hours=4, minutes=30))
    assert rows(p) == [
        ("11:00:00", "skipped", "catch_up_latest"),
        ("12:00:00", "skipped", "catch_up_latest"),
        ("13:00:00", "skipped", "catch_up_latest"),
        ("14:00:00", "queued", None),
    ]


def test_latest_counts_a_tick_inside_the_grace_as_the_latest() -> None:
    p = plan(job(CatchUp.LATEST), last=T0, now=T0 + 3 * MINUTE + timedelta(seconds=10))
    assert rows(p) == [
        ("10:01:00", "skipped", "catch_up_latest"),
        ("10:02:00", "skipped", "catch_up_latest"),
        ("10:03:00", "queued", None),
    ]


def test_latest_queues_only_the_newest_of_several_late_ticks() -> None:
    # A 5 s failover gap of an every-second job: every tick is inside the grace, one run still covers them.
    p = plan(job(CatchUp.LATEST, "* * * * * *"), last=T0, now=T0 + timedelta(seconds=5, milliseconds=500))
    assert rows(p) == [(f"10:00:0{s}", "skipped", "catch_up_latest") for s in range(1, 5)] + [
        ("10:00:05", "queued", None)
    ]
    assert all("superseded" in (t.detail or "") for t in p.ticks[:-1]) and p.ticks[-1].late


def test_skip_and_all_queue_every_late_tick_as_backlog_and_a_tick_due_now_as_on_time() -> None:
    for policy in (CatchUp.SKIP, CatchUp.ALL):
        p = plan(job(policy, "* * * * * *", max_catch_up=20), last=T0, now=T0 + timedelta(seconds=3))
        assert rows(p) == [(f"10:00:0{s}", "queued", None) for s in (1, 2, 3)]
        assert [t.late for t in p.ticks] == [True, True, False]  # 10:00:03 is due now, not backlog


def test_all_queues_every_missed_tick_in_order_within_the_bound() -> None:
    p = plan(job(CatchUp.ALL, "0 * * * *", max_catch_up=4), last=T0, now=T0 + timedelta(hours=4, minutes=30))
    assert rows(p) == [(f"{h}:00:00", "queued", None) for h in (11, 12, 13, 14)]
    assert all(t.late for t in p.ticks) and p.refused is None


def test_all_refuses_beyond_max_catch_up_and_queues_nothing() -> None:
    p = plan(job(CatchUp.ALL, "0 * * * *", max_catch_up=3), last=T0, now=T0 + timedelta(hours=4, minutes=30))
    assert rows(p) == [(f"{h}:00:00", "skipped", "catch_up_refused") for h in (11, 12, 13, 14)]
    assert p.refused is not None and "4 missed ticks exceed max_catch_up = 3" in p.refused
    assert "Run `schedctl replay j --max 4` to dispatch them" in p.refused  # --max is required
    assert p.last_dispatched == datetime(2026, 3, 2, 14, tzinfo=UTC)


def test_all_refusal_counts_late_ticks_too_and_queues_none_of_them() -> None:
    p = plan(job(CatchUp.ALL, max_catch_up=1), last=T0, now=T0 + 4 * MINUTE)
    assert [r[1:] for r in rows(p)] == [("skipped", "catch_up_refused")] * 4


def test_all_with_a_bound_above_the_row_cap_enumerates_forward() -> None:
    j = job(CatchUp.ALL, "* * * * * *", max_catch_up=1500)
    p = plan(j, last=T0, now=T0 + timedelta(seconds=1400 + 60))
    assert len(p.ticks) == 1460 and all(t.queued for t in p.ticks)
    assert p.ticks[0].scheduled_for == T0 + timedelta(seconds=1)
    refused = plan(job(CatchUp.ALL, "* * * * * *", max_catch_up=1500), last=T0, now=T0 + timedelta(hours=1))
    assert refused.refused is not None and "more than 1500" in refused.refused
    # Beyond the 1000 rows it writes, the planner counts the whole backlog for the command: 3600 ticks.
    assert "Run `schedctl replay j --max 3600` to dispatch them" in refused.refused


def test_a_backlog_too_long_to_count_still_names_a_command_that_works() -> None:
    p = plan(job(CatchUp.ALL, "* * * * * *"), last=T0, now=T0 + timedelta(days=3))
    assert p.refused is not None and "--max COUNT" in p.refused and "`schedctl missed j`" in p.refused


def test_a_long_outage_writes_at_most_the_newest_thousand_rows_quickly() -> None:
    started = time.perf_counter()
    p = plan(job(CatchUp.SKIP, "* * * * * *"), last=T0, now=T0 + timedelta(days=30))
    assert time.perf_counter() - started < 2.0
    missed = [t for t in p.ticks if not t.queued]
    assert len(missed) == planner.MAX_SKIPPED_ROWS
    assert missed[-1].scheduled_for == T0 + timedelta(days=30, seconds=-61)
    assert len([t for t in p.ticks if t.queued]) == 61


def test_newest_fires_terminates_on_a_bursty_schedule() -> None:
    # Every second, but only on the 1st of the month: a doubling window jumps from nothing to 86,400 fires.
    sched = schedule_for("* * * 1 * *", "UTC")
    after = datetime(2026, 1, 1, tzinfo=UTC)
    fires, more = planner.newest_fires(sched, after, datetime(2026, 3, 20, tzinfo=UTC), 1000)
    assert more and len(fires) == 1000
    assert fires[-1] == datetime(2026, 3, 1, 23, 59, 59, tzinfo=UTC)


def test_starting_deadline_turns_a_late_tick_into_a_recorded_skip() -> None:
    j = job(starting_deadline=20.0)
    p = plan(j, last=T0, now=T0 + MINUTE + timedelta(seconds=30))
    assert rows(p) == [("10:01:00", "skipped", "starting_deadline")]
    assert p.ticks[0].detail is not None and "starting deadline of 20s" in p.ticks[0].detail
    on_time = planner.decide(j, T0, T0 + timedelta(seconds=20))
    assert on_time.state is RunState.QUEUED


def test_jitter_is_the_same_on_every_leader_and_inside_the_bound() -> None:
    offsets = [planner.jitter_offset("backup", T0 + k * MINUTE, 30.0) for k in range(200)]
    again = [planner.jitter_offset("backup", T0 + k * MINUTE, 30.0) for k in range(200)]
    assert offsets == again
    assert all(0 <= o < 30 for o in offsets) and len(set(offsets)) > 150
    assert planner.jitter_offset("other", T0, 30.0) != planner.jitter_offset("backup", T0, 30.0)
    assert planner.jitter_offset("backup", T0, None) == 0.0
    tick = planner.decide(job(jitter=30.0), T0, T0)
    assert tick.scheduled_for == T0  # scheduled_for stays the tick; the jitter only delays the claim
    assert tick.not_before == T0 + timedelta(seconds=planner.jitter_offset("j", T0, 30.0))


def test_skip_reasons_are_the_documented_enum_values() -> None:
    p = plan(job(CatchUp.SKIP), last=T0, now=T0 + 5 * MINUTE)
    assert {t.reason for t in p.ticks if t.reason} == {SkipReason.CATCH_UP_SKIP}
