"""The leader decides the next fire's ticks before it comes (issue 19, goal 1): the rows must be exactly those
it would have decided at the instant, whatever changed in between."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.leader.scheduler import Scheduler
from schedctl.leader.settings import SchedulerSettings
from schedctl.store import jobstate
from schedctl.store.schema import job_runs
from schedctl.timing.clock import FakeClock


def _at(minute: int, second: float = 0) -> datetime:
    whole = int(second)
    return datetime(2026, 3, 2, 10, minute, whole, int((second - whole) * 1e6), tzinfo=UTC)


def _job(job_id: str, **extra: Any) -> Job:
    return Job(
        job_id,
        "* * * * *",
        "UTC",
        CatchUp.ALL,
        "true",
        concurrency=Concurrency.ALLOW,
        max_catch_up=5,
        **extra,
    )


def _scheduler(store: Any, clock: FakeClock, jobs: dict[str, Job]) -> Scheduler:
    settings = SchedulerSettings(identity="lead", lease_duration=30, renew_interval=10)
    return Scheduler(store, settings, lambda: jobs, clock, jobs=jobs, db_clock=False)


def _rows(store: Any, at: datetime) -> dict[str, tuple[str, str | None, bool]]:
    r = job_runs.c
    query = select(r.job_id, r.state, r.reason, r.not_before).where(r.scheduled_for == at)
    with store.connect() as conn:
        return {job_id: (state, reason, nb is not None) for job_id, state, reason, nb in conn.execute(query)}


def test_a_tick_that_depends_on_the_instant_is_decided_at_it(store: Any) -> None:
    jobs = {
        "plain": _job("plain"),
        "deadline": _job("deadline", starting_deadline=5.0),
        "jitter": _job("jitter", jitter=20.0),
    }
    clock = FakeClock(_at(0, 30))
    leader = _scheduler(store, clock, jobs)
    leader.turn()  # 30 s of room: the 10:01 ticks are decided now
    clock.set(_at(1, 8))  # 8 s late for 10:01, past "deadline"'s 5 s, not yet late for 10:02
    leader.turn()
    rows = _rows(store, _at(1))
    assert rows["plain"] == ("queued", None, False)
    assert rows["deadline"] == ("skipped", "starting_deadline", False)
    assert rows["jitter"][0] == "queued" and rows["jitter"][2]  # its not_before, drawn for the tick


def test_a_job_held_or_released_after_the_ticks_were_decided_is_dispatched_as_it_is_then(store: Any) -> None:
    jobs = {"a": _job("a"), "b": _job("b")}
    clock = FakeClock(_at(0, 30))
    leader = _scheduler(store, clock, jobs)
    leader.turn()  # leads; the 10:01 ticks of both jobs are decided
    with store.begin() as conn:
        jobstate.set_paused(conn, "b", _at(0, 31), "test")
    clock.set(_at(0, 41))
    leader.turn()  # the renewal's look at held jobs sees b paused
    clock.set(_at(1))
    leader.turn()  # 10:01: b is held; the 10:02 ticks are decided ahead, b's among them
    assert set(_rows(store, _at(1))) == {"a"}

    with store.begin() as conn:
        jobstate.clear_paused(conn, "b", _at(1, 5))
    clock.set(_at(1, 15))
    leader.turn()  # the renewal sees b released
    clock.set(_at(2))
    leader.turn()
    assert set(_rows(store, _at(2))) == {"a", "b"}


def test_a_take_over_longer_than_the_lease_keeps_its_term(db_url: str, monkeypatch: Any) -> None:
    """A million jobs take the leader tens of seconds to plan (each definition's snapshot hashed): it must
    renew in between, or its term lapses and every take-over starts over. Here 16 definitions take 0.25 s
    each to hash, 4 s in all, against a 3 s lease."""
    import time

    from sqlalchemy import func

    from schedctl.leader import scheduler as scheduler_module
    from schedctl.store import open_store, runrows
    from schedctl.store.bounds import Bounds
    from schedctl.store.migrate import upgrade
    from schedctl.store.schema import job_state, lease_terms
    from schedctl.timing.clock import SystemClock

    store = open_store(db_url, bounds=Bounds.for_lease(3))
    try:
        upgrade(store)
        real = runrows.shared_values

        def slow(job: Job) -> Any:
            time.sleep(0.25)
            return real(job)

        monkeypatch.setattr(runrows, "shared_values", slow)
        monkeypatch.setattr(scheduler_module, "TAKE_OVER_CHUNK", 1)
        jobs = {f"j{i}": _job(f"j{i}") for i in range(16)}
        settings = SchedulerSettings(identity="lead", lease_duration=3, renew_interval=0.5)
        leader = Scheduler(store, settings, lambda: jobs, SystemClock(), jobs=jobs)
        leader.turn()
        with store.connect() as conn:
            terms = conn.execute(select(func.count()).select_from(lease_terms)).scalar_one()
            defined = conn.execute(select(func.count()).select_from(job_state)).scalar_one()
        assert leader.leading and terms == 1 and defined == 16
    finally:
        store.dispose()


def test_a_pass_of_many_batches_counts_every_tick_it_committed(store: Any) -> None:
    """The dispatch counters are added once the pass's claims are committed, not between its batches."""
    import uuid

    from schedctl.observability import metrics

    tag = uuid.uuid4().hex[:6]  # the registry is process-wide: ids of this test only
    jobs = {f"{tag}{i}": _job(f"{tag}{i}") for i in range(5)}
    clock = FakeClock(_at(0, 30))
    settings = SchedulerSettings(identity="lead", lease_duration=30, renew_interval=10, batch_size=2)
    leader = Scheduler(store, settings, lambda: jobs, clock, jobs=jobs, db_clock=False)
    leader.turn()
    clock.set(_at(1))
    leader.turn()  # three batches of 2, 2 and 1

    def dispatched(job_id: str) -> float:
        value = metrics.REGISTRY.get_sample_value("schedctl_ticks_dispatched_total", {"job_id": job_id})
        return value or 0.0

    assert len(_rows(store, _at(1))) == 5
    assert sum(dispatched(j) for j in jobs) == 5
