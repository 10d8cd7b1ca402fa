"""The leader loop driven in-process: a FakeClock plans, the real database judges the lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update

from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.leader.scheduler import Scheduler
from schedctl.leader.settings import SchedulerSettings
from schedctl.store.schema import job_events, job_runs, job_state
from schedctl.timing.clock import FakeClock

T0 = datetime(2026, 3, 2, 10, 0, 0, 500000, tzinfo=UTC)


def _jobs() -> dict[str, Job]:
    def job(job_id: str, catch_up: CatchUp, bound: int | None = None) -> Job:
        return Job(
            job_id, "* * * * *", "UTC", catch_up, "true", max_catch_up=bound, concurrency=Concurrency.ALLOW
        )

    return {
        "skip": job("skip", CatchUp.SKIP),
        "latest": job("latest", CatchUp.LATEST),
        "all": job("all", CatchUp.ALL, 10),
        "bounded": job("bounded", CatchUp.ALL, 2),
    }


def _scheduler(store: Any, clock: FakeClock, identity: str, jobs: dict[str, Job]) -> Scheduler:
    settings = SchedulerSettings(identity=identity, lease_duration=30, renew_interval=10)
    return Scheduler(store, settings, lambda: jobs, clock, jobs=jobs, db_clock=False)


def _ticks(store: Any, job_id: str) -> list[tuple[str, str, str | None]]:
    query = (
        select(job_runs.c.scheduled_for, job_runs.c.state, job_runs.c.reason)
        .where(job_runs.c.job_id == job_id)
        .order_by(job_runs.c.scheduled_for)
    )
    with store.connect() as conn:
        return [(r[0].strftime("%H:%M"), r[1], r[2]) for r in conn.execute(query)]


def test_each_catch_up_policy_after_an_outage(store: Any) -> None:
    clock, jobs = FakeClock(T0), _jobs()
    first = _scheduler(store, clock, "first", jobs)
    first.turn()
    assert first.leading
    clock.advance(120)
    first.turn()
    assert _ticks(store, "skip") == [("10:01", "queued", None), ("10:02", "queued", None)]
    first.resign()

    clock.advance(600)  # no scheduler for ten minutes: 10:03 .. 10:12 pass unseen
    second = _scheduler(store, clock, "second", jobs)
    second.turn()
    assert second.leading
    missed = [f"10:{m:02d}" for m in range(3, 12)]  # older than the 60 s grace at 10:12:00.5
    assert _ticks(store, "skip")[2:] == [(m, "skipped", "catch_up_skip") for m in missed] + [
        ("10:12", "queued", None)
    ]
    assert _ticks(store, "latest")[2:] == [(m, "skipped", "catch_up_latest") for m in missed] + [
        ("10:12", "queued", None)
    ]
    assert _ticks(store, "all")[2:] == [(m, "queued", None) for m in [*missed, "10:12"]]
    assert _ticks(store, "bounded")[2:] == [(m, "skipped", "catch_up_refused") for m in [*missed, "10:12"]]
    with store.connect() as conn:
        refused = (
            conn.execute(select(job_state.c.job_id).where(job_state.c.refused_at.is_not(None)))
            .scalars()
            .all()
        )
        kinds = (
            conn.execute(select(job_events.c.kind).where(job_events.c.job_id == "bounded")).scalars().all()
        )
    assert refused == ["bounded"] and kinds == ["defined", "refused"]

    clock.advance(60)
    second.turn()
    assert _ticks(store, "all")[-1] == ("10:13", "queued", None)
    assert _ticks(store, "bounded")[-1] == (
        "10:12",
        "skipped",
        "catch_up_refused",
    )  # refused: dispatches nothing
    second.resign()


def test_a_new_job_starts_from_now_and_a_changed_schedule_counts_from_the_change(store: Any) -> None:
    clock = FakeClock(T0)
    jobs = {
        "j": Job(
            "j", "* * * * *", "UTC", CatchUp.ALL, "true", max_catch_up=100, concurrency=Concurrency.ALLOW
        )
    }
    s = _scheduler(store, clock, "a", jobs)
    s.turn()
    assert _ticks(store, "j") == []  # 10:00 is before the job was first seen
    s.resign()
    clock.advance(1800)
    changed = {"j": Job("j", "*/5 * * * *", "UTC", CatchUp.ALL, "true", max_catch_up=100)}
    s2 = _scheduler(store, clock, "b", changed)
    s2.turn()
    assert _ticks(store, "j") == []  # never retroactively under the new schedule
    clock.advance(300)
    s2.turn()
    assert _ticks(store, "j") == [("10:35", "queued", None)]
    s2.resign()


def test_pause_holds_the_job_and_resume_catches_up_from_the_last_tick(store: Any) -> None:
    clock = FakeClock(T0)
    jobs = {"j": Job("j", "* * * * *", "UTC", CatchUp.SKIP, "true", concurrency=Concurrency.ALLOW)}
    s = _scheduler(store, clock, "a", jobs)
    s.turn()
    clock.advance(60)
    s.turn()
    with store.begin() as conn:
        conn.execute(update(job_state).values(paused_at=T0))
    clock.advance(10)  # past the renew interval: the leader re-reads the held jobs
    s.turn()
    clock.advance(300)
    s.turn()
    assert _ticks(store, "j") == [("10:01", "queued", None)]  # paused: nothing, and last_dispatched stays
    with store.begin() as conn:
        conn.execute(update(job_state).values(paused_at=None))
    clock.advance(10)
    s.turn()
    assert [t[1:] for t in _ticks(store, "j")] == [("queued", None)] + [("skipped", "catch_up_skip")] * 4 + [
        ("queued", None)
    ]
    s.resign()


def test_a_bad_reload_keeps_the_old_jobs(store: Any, caplog: Any) -> None:
    from schedctl.errors import ConfigError, Diagnostic

    clock = FakeClock(T0)
    jobs = {"j": Job("j", "* * * * *", "UTC", CatchUp.SKIP, "true", concurrency=Concurrency.ALLOW)}

    def load() -> dict[str, Job]:
        raise ConfigError([Diagnostic("jobs.toml", 3, "jobs.j.schedule: bad")])

    s = Scheduler(store, SchedulerSettings(identity="a"), load, clock, jobs=jobs, db_clock=False)
    s.turn()
    s.request_reload()
    clock.advance(60)
    s.turn()
    assert [r.message for r in caplog.records if getattr(r, "event", "") == "reload_failed"] == [
        "job files not reloaded, keeping the old jobs: jobs.toml:3: jobs.j.schedule: bad"
    ]
    assert _ticks(store, "j") == [("10:01", "queued", None)]
    s.resign()


class _SlowClock(FakeClock):
    """Every look at the monotonic clock costs 0.2 s: a pass that takes long enough to need renewals."""

    def monotonic(self) -> float:
        self.advance(0.2)
        return super().monotonic()


def test_a_long_pass_yields_to_renewal_and_keeps_the_lease(store: Any) -> None:
    from schedctl.leader import lease
    from schedctl.observability import metrics

    clock = _SlowClock(T0)
    jobs = {
        f"j{i:04d}": Job(f"j{i:04d}", "* * * * *", "UTC", CatchUp.SKIP, "true", concurrency=Concurrency.ALLOW)
        for i in range(600)
    }
    settings = SchedulerSettings(identity="a", lease_duration=30, renew_interval=1, batch_size=50)
    s = Scheduler(store, settings, lambda: jobs, clock, jobs=jobs, db_clock=False)
    s.turn()
    clock.set(T0 + timedelta(seconds=60))
    before = metrics.LEASE_RENEWALS._value.get()
    s.turn()
    assert metrics.LEASE_RENEWALS._value.get() - before >= 5  # renewed between the 12 batches
    assert s.leading
    with store.connect() as conn:
        claimed = conn.execute(select(job_runs.c.job_id).where(job_runs.c.state == "queued")).scalars().all()
    assert len(claimed) == 600
    assert [t.term for t in lease.history(store)] == [1]
    s.resign()


def _allow_jobs(n: int) -> dict[str, Job]:
    return {
        f"j{i:04d}": Job(f"j{i:04d}", "* * * * *", "UTC", CatchUp.SKIP, "true", concurrency=Concurrency.ALLOW)
        for i in range(n)
    }


def _watermarks(store: Any) -> set[datetime]:
    with store.connect() as conn:
        return set(conn.execute(select(job_state.c.last_dispatched)).scalars())


def _count_rows(store: Any, at: datetime) -> int:
    with store.connect() as conn:
        return len(conn.execute(select(job_runs.c.job_id).where(job_runs.c.scheduled_for == at)).all())


def _defined_in_batches_of_50(store: Any, n: int) -> tuple[FakeClock, Scheduler]:
    """A leader of ``n`` every-minute jobs that dispatches 50 ticks a transaction, past its first turn."""
    clock, jobs = FakeClock(T0), _allow_jobs(n)
    settings = SchedulerSettings(identity="a", lease_duration=30, renew_interval=10, batch_size=50)
    s = Scheduler(store, settings, lambda: jobs, clock, jobs=jobs, db_clock=False)
    s.turn()
    return clock, s


def test_a_pass_of_many_batches_commits_every_claim_before_its_bookkeeping(
    store: Any, monkeypatch: Any
) -> None:
    from schedctl.leader import scheduler as scheduler_mod

    clock, s = _defined_in_batches_of_50(store, 120)
    tick = datetime(2026, 3, 2, 10, 1, tzinfo=UTC)
    seen_at_advance: list[tuple[int, int]] = []
    real_advance = scheduler_mod.dispatch.advance

    def watching_advance(store_: Any, fence: Any, newest: Any, now: datetime) -> None:
        seen_at_advance.append((_count_rows(store, tick), len(newest)))
        real_advance(store_, fence, newest, now)

    monkeypatch.setattr(scheduler_mod.dispatch, "advance", watching_advance)
    clock.set(T0 + timedelta(seconds=60))
    s.turn()
    # Three batches of claims (50, 50, 20), then the 120 watermarks in batches of 50.
    assert seen_at_advance == [(120, 50), (120, 50), (120, 20)]
    assert _watermarks(store) == {tick}
    s.resign()


def test_a_pass_that_fails_before_its_bookkeeping_loses_no_tick_and_claims_none_twice(
    store: Any, monkeypatch: Any
) -> None:
    from schedctl.errors import StoreError
    from schedctl.leader import scheduler as scheduler_mod

    clock, s = _defined_in_batches_of_50(store, 120)
    defined = _watermarks(store)
    real_advance = scheduler_mod.dispatch.advance

    def database_gone(*_args: Any) -> None:
        raise StoreError("connection lost")

    monkeypatch.setattr(scheduler_mod.dispatch, "advance", database_gone)
    clock.set(T0 + timedelta(seconds=60))
    s.turn()
    tick = datetime(2026, 3, 2, 10, 1, tzinfo=UTC)
    assert not s.leading  # it stopped dispatching on the error
    assert _count_rows(store, tick) == 120 and _watermarks(store) == defined  # claims in, watermarks behind

    monkeypatch.setattr(scheduler_mod.dispatch, "advance", real_advance)
    clock.advance(2)
    s.turn()  # leads again, rebuilds from the old watermarks and re-decides 10:01: the primary key ignores it
    assert s.leading
    with store.connect() as conn:
        rows = conn.execute(select(job_runs.c.job_id, job_runs.c.scheduled_for, job_runs.c.state)).all()
    assert len(rows) == 120 and {(r[1], r[2]) for r in rows} == {(tick, "queued")}
    assert _watermarks(store) == {tick}
    s.resign()


def test_a_batch_rolled_back_for_a_short_lease_is_written_after_the_renewal(store: Any) -> None:
    """A pass that meets a lease too short to commit in is rolled back whole (the closing fence) while the
    term is still ours. Its ticks must be written once the lease is renewed: the plan has moved past them, so
    dropping the batch left holes that no later pass or take-over revisits."""
    from schedctl.leader import lease

    clock, jobs = FakeClock(T0), _jobs()
    # Renewals far apart, so that the fire at 10:01 comes before one is due.
    settings = SchedulerSettings(identity="first", lease_duration=300, renew_interval=100)
    s = Scheduler(store, settings, lambda: jobs, clock, jobs=jobs, db_clock=False)
    s.turn()
    assert s.leading
    term = lease.current(store).term
    short = store.bounds.commit_margin - 1.0  # live for a second yet, inside the commit bound
    assert lease.acquire_or_renew(store, "cron", "first", short).term == term
    clock.advance(60)
    s.turn()  # 10:01 is due: the dispatch is rolled back for the short lease
    assert _ticks(store, "all") == []
    s.turn()  # renews at once, then writes the batch it kept
    assert lease.current(store).term == term
    assert [t for t, _, _ in _ticks(store, "all")] == ["10:01"]
    clock.advance(60)
    s.turn()
    assert [t for t, _, _ in _ticks(store, "all")] == ["10:01", "10:02"]
    s.resign()


def test_the_planning_clock_never_runs_ahead_of_the_database_after_a_slow_reply(
    store: Any, monkeypatch: Any
) -> None:
    """A reply that spends long on the way back must not put the leader's estimate of now ahead of the
    database's: a tick would be dispatched, and started, before it is due (seen 0.06 s early under load)."""
    from schedctl.leader import lease

    clock = FakeClock(T0)
    real = lease.acquire_or_renew
    replies: list[lease.LeaseResult] = []

    def slow_reply(*args: Any, **kwargs: Any) -> lease.LeaseResult:
        result = real(*args, **kwargs)  # the database reads its clock in here, at the end of the round trip
        clock.advance(0.4)  # and the reply takes 0.4 s to arrive
        replies.append(result)
        return result

    monkeypatch.setattr(lease, "acquire_or_renew", slow_reply)
    settings = SchedulerSettings(identity="slow", lease_duration=30, renew_interval=10)
    scheduler = Scheduler(store, settings, lambda: {}, clock, jobs={}, db_clock=True)
    scheduler.turn()
    assert scheduler.leading and replies
    assert scheduler.now() <= replies[-1].db_now
    clock.advance(1.0)
    assert scheduler.now() <= replies[-1].db_now + timedelta(seconds=1.0)


def _state_pages(store: Any, on_page: Any) -> None:
    """Call ``on_page(n)`` as the take-over's n-th page of job_state rows (1, 2, ...) is read."""
    from sqlalchemy import event

    pages = 0

    def after(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        nonlocal pages
        if "FROM job_state" in statement and "ORDER BY job_state.job_id" in statement:
            pages += 1
            on_page(pages)

    event.listen(store.engine, "after_cursor_execute", after)


def _defined_then_resigned(store: Any, n: int) -> tuple[FakeClock, dict[str, Job]]:
    """``n`` jobs already in job_state, and no leader: what a failover finds."""
    clock, jobs = FakeClock(T0), _allow_jobs(n)
    first = _scheduler(store, clock, "first", jobs)
    first.turn()
    assert first.leading
    first.resign()
    return clock, jobs


def test_a_take_over_renews_between_the_pages_of_job_state_it_reads(store: Any, monkeypatch: Any) -> None:
    """A million rows took 14.5 s on PostgreSQL against a 15 s lease: the take-over read them all without a
    renewal, and its term lapsed before the plan existed. Here each page takes one renew interval (10 s of a
    30 s lease), and four pages would outlive the lease unless the leader renews between them."""
    from schedctl.leader import lease
    from schedctl.store import dispatch as dispatch_module

    clock, jobs = _defined_then_resigned(store, 11)
    monkeypatch.setattr(dispatch_module, "PREPARE_CHUNK", 3)  # 11 rows: three full pages and a short one
    second = _scheduler(store, clock, "second", jobs)
    safe_at_page: list[bool] = []

    def slow_page(_n: int) -> None:
        safe_at_page.append(second._safe())
        clock.advance(10)

    _state_pages(store, slow_page)
    second.turn()
    assert safe_at_page == [True, True, True, True]
    assert second.leading and second._plan is not None
    assert [(t.holder, t.term) for t in lease.history(store)] == [("second", 2), ("first", 1)]  # one term
    clock.set(T0 + timedelta(seconds=120))
    second.turn()
    assert _count_rows(store, datetime(2026, 3, 2, 10, 2, tzinfo=UTC)) == 11
    second.resign()


def test_a_take_over_that_loses_the_lease_between_pages_stops_reading_and_writes_nothing(
    store: Any, db_url: str, monkeypatch: Any
) -> None:
    from schedctl.leader import lease
    from schedctl.store import dispatch as dispatch_module
    from schedctl.store import open_store
    from schedctl.store.schema import scheduler_lease

    clock, jobs = _defined_then_resigned(store, 11)
    monkeypatch.setattr(dispatch_module, "PREPARE_CHUNK", 3)
    settings = SchedulerSettings(identity="second", lease_duration=30, renew_interval=1)
    second = Scheduler(store, settings, lambda: jobs, clock, jobs=jobs, db_clock=False)
    thief = open_store(db_url)
    pages: list[int] = []

    def stolen_at_the_second_page(n: int) -> None:
        pages.append(n)
        clock.advance(1)  # the renewal after this page is due
        if n == 2:
            # Another replica's term, as if this one had stalled past its lease.
            with thief.begin() as conn:
                conn.execute(update(scheduler_lease).values(holder="thief", term=scheduler_lease.c.term + 1))

    _state_pages(store, stolen_at_the_second_page)
    try:
        clock.set(T0 + timedelta(seconds=60))  # 10:01 is due when the take-over ends
        second.turn()
    finally:
        thief.dispose()
    assert pages == [1, 2]  # no page read after the term was lost
    assert not second.leading and second._plan is None
    assert lease.current(store).holder == "thief"
    assert _count_rows(store, datetime(2026, 3, 2, 10, 1, tzinfo=UTC)) == 0
