"""The leader writes job versions between fires, ahead of the ticks that name them (issue 19, goal 1).

A boundary's transactions should insert run rows only; the versions are written on the passes before it, and
written again a quarter hold later, before the leader's trust in them runs out (runrows.VERSION_HOLD).
Whether a write happened is read off ``job_versions.written_at``: every write sets it to the database's now.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update

from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.leader.scheduler import PREWRITE_SLACK, Scheduler
from schedctl.leader.settings import SchedulerSettings
from schedctl.store import runrows
from schedctl.store.dispatch import RowValues
from schedctl.store.schema import job_runs, job_versions
from schedctl.timing.clock import FakeClock

LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


def _jobs(n: int, schedule: str = "* * * * *") -> dict[str, Job]:
    jobs = [
        Job(f"j{i}", schedule, "UTC", CatchUp.SKIP, f"echo {i}", concurrency=Concurrency.ALLOW)
        for i in range(n)
    ]
    return {j.id: j for j in jobs}


def _scheduler(store: Any, clock: FakeClock, jobs: dict[str, Job], batch_size: int = 5000) -> Scheduler:
    settings = SchedulerSettings(identity="lead", lease_duration=30, renew_interval=10, batch_size=batch_size)
    return Scheduler(store, settings, lambda: jobs, clock, jobs=jobs, db_clock=False)


def _age_versions(store: Any) -> None:
    with store.begin() as conn:
        conn.execute(update(job_versions).values(written_at=LONG_AGO))


def _written_at(store: Any) -> dict[str, datetime]:
    with store.connect() as conn:
        rows = conn.execute(select(job_versions.c.job_id, job_versions.c.written_at)).all()
    return {job_id: at.replace(tzinfo=UTC) if at.tzinfo is None else at for job_id, at in rows}


def _queued(store: Any, at: datetime) -> int:
    query = select(func.count()).select_from(job_runs).where(job_runs.c.scheduled_for == at)
    with store.connect() as conn:
        return int(conn.execute(query).scalar_one())


def test_versions_are_written_before_the_boundary_and_not_at_it(store: Any) -> None:
    jobs = _jobs(7)
    clock = FakeClock(datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC))
    leader = _scheduler(store, clock, jobs, batch_size=3)  # three batches of versions, then none
    leader.turn()
    assert leader.leading
    assert set(_written_at(store)) == set(jobs)  # 30 s before the first fire: every version is written

    _age_versions(store)
    clock.set(datetime(2026, 3, 2, 10, 1, 0, 1000, tzinfo=UTC))
    leader.turn()
    assert _queued(store, datetime(2026, 3, 2, 10, 1, tzinfo=UTC)) == 7
    # The boundary's transactions named the versions without writing them again.
    assert set(_written_at(store).values()) == {LONG_AGO}


def test_no_versions_are_written_when_the_next_fire_is_too_near(store: Any) -> None:
    jobs = _jobs(3)
    too_near = timedelta(seconds=PREWRITE_SLACK / 2)
    clock = FakeClock(datetime(2026, 3, 2, 10, 1, tzinfo=UTC) - too_near)
    leader = _scheduler(store, clock, jobs)
    leader.turn()
    assert leader.leading and _written_at(store) == {}

    # The boundary writes them itself, in the transaction of the rows that name them.
    clock.advance(too_near.total_seconds())
    leader.turn()
    assert _queued(store, datetime(2026, 3, 2, 10, 1, tzinfo=UTC)) == 3
    assert set(_written_at(store)) == set(jobs)


def test_versions_are_written_again_a_quarter_hold_later_on_an_idle_pass(store: Any) -> None:
    jobs = _jobs(4, schedule="0 * * * *")  # hourly: the passes in between have room
    clock = FakeClock(datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC))
    leader = _scheduler(store, clock, jobs)
    leader.turn()
    assert set(_written_at(store)) == set(jobs)
    _age_versions(store)

    clock.advance(runrows.VERSION_HOLD / 4 - 60)
    leader.turn()
    assert set(_written_at(store).values()) == {LONG_AGO}  # trusted, not due a rewrite yet

    clock.advance(60)
    leader.turn()
    assert LONG_AGO not in set(_written_at(store).values())  # rewritten ahead of the half-hold expiry


def test_to_prewrite_takes_new_definitions_then_the_oldest_trusted_ones() -> None:
    mono = [0.0]
    values = RowValues(version_hold=400.0, monotonic=lambda: mono[0])
    jobs = list(_jobs(5).values())
    values.prepare(jobs)
    assert values.to_prewrite(3) == ["j0", "j1", "j2"]
    values.committed(["j0", "j1", "j2"], values.expire(), rewritten=True)
    mono[0] = 10.0
    assert values.to_prewrite(10) == ["j3", "j4"]
    values.committed(["j3", "j4"], values.expire(), rewritten=True)
    assert values.to_prewrite(10) == []  # nothing to do: what an idle pass costs

    mono[0] = 100.0  # a quarter hold after the first batch, not yet after the second
    assert values.to_prewrite(2) == ["j0", "j1"]
    assert values.to_prewrite(2) == ["j2"]
    values.committed(["j0", "j1", "j2"], values.expire(), rewritten=True)
    assert values.to_prewrite(10) == []

    # An edited definition is written first at once; one trusted too long (half the hold) as well.
    edited = Job("j3", "* * * * *", "UTC", CatchUp.SKIP, "echo edited", concurrency=Concurrency.ALLOW)
    values.of(edited)
    assert values.to_prewrite(10) == ["j3"]
    values.committed(["j3"], values.expire(), rewritten=True)
    mono[0] = 211.0  # j4's trust (from 10.0) ran out at 210.0
    values.expire()
    assert "j4" not in values.written
    assert values.to_prewrite(10)[0] == "j4"
