"""A standby says once that it stands by, and again when the holder changes; not at every renewal."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.leader.scheduler import Scheduler
from schedctl.leader.settings import SchedulerSettings
from schedctl.timing.clock import FakeClock

T0 = datetime(2026, 3, 2, 10, 0, 0, 500000, tzinfo=UTC)


def test_a_standby_logs_once_per_holder(store: Any, caplog: Any) -> None:
    caplog.set_level("INFO", logger="schedctl.scheduler")
    jobs = {"j": Job("j", "* * * * *", "UTC", CatchUp.SKIP, "true", concurrency=Concurrency.ALLOW)}
    clock = FakeClock(T0)

    def scheduler(identity: str) -> Scheduler:
        settings = SchedulerSettings(identity=identity, lease_duration=30, renew_interval=10)
        return Scheduler(store, settings, lambda: jobs, clock, jobs=jobs, db_clock=False)

    leader, standby, other = scheduler("a"), scheduler("b"), scheduler("c")
    leader.turn()
    for _ in range(3):  # three renewals of the standby: one line
        clock.advance(10)
        leader.turn()
        standby.turn()
    leader.resign()
    other.turn()  # c takes the freed lease before b tries again
    clock.advance(10)
    standby.turn()
    lines = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "standing_by"]
    # b: once while a led (three renewals), once when c took over; c took the free lease at once.
    assert len(lines) == 2, lines
    assert lines[0].startswith("standing by: lease held by a (term 1) until 2026-")
    assert lines[1].startswith("standing by: lease held by c (term 2) until ")
    other.resign()
