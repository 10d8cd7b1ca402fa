"""The leader's writes, on every backend: fenced, idempotent, and honest about concurrency."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import factories
import pytest
from databases import ENV_FOR
from sqlalchemy import select

from schedctl.errors import LeaseTooShort, NotLeader
from schedctl.jobs.job import CatchUp, Concurrency, Job, RunState
from schedctl.leader import lease
from schedctl.leader.planner import Tick
from schedctl.store.dispatch import (
    QUEUE_BOUND,
    Fence,
    StateChange,
    dispatch,
    load_held,
    load_states,
    queue_bound,
    record_changes,
)
from schedctl.store.schema import job_events, job_runs, job_state

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def _job(job_id: str = "j", concurrency: Concurrency = Concurrency.ALLOW) -> Job:
    return Job(job_id, "* * * * *", "UTC", CatchUp.SKIP, ("echo", "hi"), concurrency=concurrency)


def _lead(store: Any, identity: str = "a", duration: float = 30.0) -> Fence:
    result = lease.acquire_or_renew(store, "cron", identity, duration)
    assert result.held and result.term is not None
    return Fence("cron", identity, result.term)


def _define(store: Any, fence: Fence, *jobs: Job) -> None:
    record_changes(store, fence, [StateChange(j.id, "defined", j.schedule_key) for j in jobs], T0)


def _rows(store: Any) -> list[tuple[Any, ...]]:
    query = select(job_runs.c.job_id, job_runs.c.scheduled_for, job_runs.c.state, job_runs.c.reason)
    with store.connect() as conn:
        return [tuple(r) for r in conn.execute(query.order_by(job_runs.c.job_id, job_runs.c.scheduled_for))]


def _queued(job_id: str, at: datetime) -> Tick:
    return Tick(job_id, at, RunState.QUEUED)


def test_dispatch_inserts_the_run_row_with_its_snapshot_and_moves_last_dispatched(store: Any) -> None:
    fence = _lead(store)
    j = _job()
    _define(store, fence, j)
    result = dispatch(store, fence, [_queued("j", T0 + timedelta(minutes=1))], {"j": j}, T0)
    assert result.inserted == 1
    with store.connect() as conn:
        row = conn.execute(select(job_runs)).one()
        snapshot = factories.snapshot_of(conn, "j", row.scheduled_for)
    assert row.state == "queued" and row.term == fence.term and row.attempt == 0 and not row.manual
    assert snapshot is not None and snapshot["command"] == ["echo", "hi"] and row.concurrency == "allow"
    assert load_states(store)["j"].last_dispatched == T0 + timedelta(minutes=1)


def test_the_same_tick_twice_is_claimed_once(store: Any) -> None:
    fence = _lead(store)
    j = _job()
    _define(store, fence, j)
    tick = _queued("j", T0 + timedelta(minutes=1))
    assert dispatch(store, fence, [tick], {"j": j}, T0).inserted == 1
    assert dispatch(store, fence, [tick], {"j": j}, T0).inserted == 0
    assert len(_rows(store)) == 1


def test_last_dispatched_never_moves_back(store: Any) -> None:
    fence = _lead(store)
    j = _job()
    _define(store, fence, j)
    dispatch(store, fence, [_queued("j", T0 + timedelta(minutes=5))], {"j": j}, T0)
    dispatch(store, fence, [_queued("j", T0 + timedelta(minutes=2))], {"j": j}, T0)
    assert load_states(store)["j"].last_dispatched == T0 + timedelta(minutes=5)


def test_a_deposed_leaders_write_is_fenced_off(store: Any) -> None:
    old = _lead(store, "old")
    j = _job()
    _define(store, old, j)
    lease.acquire_or_renew(store, "cron", "old", -1)  # its last renewal: then it stops (a pause, a partition)
    new = _lead(store, "new")
    assert new.term > old.term
    with pytest.raises(NotLeader):
        dispatch(store, old, [_queued("j", T0 + timedelta(minutes=1))], {"j": j}, T0)
    with pytest.raises(NotLeader):
        record_changes(store, old, [StateChange("k", "defined", "x")], T0)
    assert _rows(store) == []
    assert load_states(store)["j"].last_dispatched == T0  # not moved by the stale write


def test_a_dispatch_that_could_commit_after_its_lease_ends_writes_nothing(store: Any) -> None:
    """The closing fence: still the holder, but with less lease left than the commit bound, the dispatch is
    rolled back whole rather than risk committing after the term expired (issue 15, V2)."""
    fence = _lead(store)
    j = _job()
    _define(store, fence, j)
    short = store.bounds.commit_margin - 1.0  # live for a second yet, inside the commit bound
    assert lease.acquire_or_renew(store, "cron", "a", short).term == fence.term
    with pytest.raises(LeaseTooShort):
        dispatch(store, fence, [_queued("j", T0 + timedelta(minutes=1))], {"j": j}, T0)
    assert _rows(store) == []
    assert load_states(store)["j"].last_dispatched == T0
    lease.acquire_or_renew(store, "cron", "a", 30)  # renewed: the same write goes through
    dispatch(store, fence, [_queued("j", T0 + timedelta(minutes=1))], {"j": j}, T0)
    assert len(_rows(store)) == 1


def test_an_expired_lease_fences_its_own_holder(store: Any) -> None:
    fence = _lead(store, "a", duration=0.2)
    time.sleep(0.4)
    with pytest.raises(NotLeader):
        dispatch(store, fence, [_queued("j", T0)], {"j": _job()}, T0)


def _running(store: Any, *jobs: Job) -> None:
    """A run of each job at T0 that a worker holds."""
    with store.begin() as conn:
        for job in jobs:
            factories.add_runs(conn, job, [T0], "running")


def test_forbid_records_the_tick_as_skipped_while_a_run_is_active(store: Any) -> None:
    fence = _lead(store)
    j = _job(concurrency=Concurrency.FORBID)
    _define(store, fence, j)
    _running(store, j)
    result = dispatch(store, fence, [_queued("j", T0 + timedelta(minutes=1))], {"j": j}, T0)
    assert [t.reason for t in result.skipped] == ["concurrency"]
    assert _rows(store)[-1][2:] == ("skipped", "concurrency")
    assert load_states(store)["j"].last_dispatched == T0 + timedelta(minutes=1)  # decided, so it advances


def test_forbid_queues_behind_a_queued_backlog_run_since_nothing_is_executing(store: Any) -> None:
    # forbid is about execution: a backlog run (queued late by a catch-up pass) executes first and this one
    # after it (the claim query orders them), so skipping the tick would only lose it.
    fence = _lead(store)
    j = _job(concurrency=Concurrency.FORBID)
    _define(store, fence, j)
    dispatch(store, fence, [Tick("j", T0, RunState.QUEUED, late=True)], {"j": j}, T0)
    ticks = [_queued("j", T0 + timedelta(minutes=k)) for k in (1, 2)]
    result = dispatch(store, fence, ticks, {"j": j}, T0)
    assert result.skipped == []
    assert [r[2:] for r in _rows(store)] == [("queued", None)] * 3


def test_forbid_queues_behind_an_on_time_run_that_still_waits_for_a_worker(store: Any) -> None:
    # A queued run holds nothing: the worker that claims it claims the next one as soon as it ends, so
    # skipping the tick would lose it to a wait, not to an overrun (issue 26; this test used to expect the
    # skip).
    fence = _lead(store)
    j = _job(concurrency=Concurrency.FORBID)
    _define(store, fence, j)
    dispatch(store, fence, [_queued("j", T0)], {"j": j}, T0)
    result = dispatch(store, fence, [_queued("j", T0 + timedelta(minutes=1))], {"j": j}, T0)
    assert result.skipped == []
    assert [r[2:] for r in _rows(store)] == [("queued", None)] * 2


def test_forbid_bounds_the_on_time_runs_waiting_for_a_worker(store: Any) -> None:
    # What bounds the queue now: catch_up = "skip" keeps QUEUE_BOUND on-time runs waiting; the next tick due
    # with no worker taking them is skipped as queue_full, never as concurrency.
    fence = _lead(store)
    j = _job(concurrency=Concurrency.FORBID)
    _define(store, fence, j)
    for k in range(QUEUE_BOUND + 1):
        result = dispatch(store, fence, [_queued("j", T0 + timedelta(minutes=k))], {"j": j}, T0)
    assert [r[2:] for r in _rows(store)] == [("queued", None)] * QUEUE_BOUND + [("skipped", "queue_full")]
    assert result.skipped[0].detail == (
        f"{QUEUE_BOUND} on-time runs of the job were queued and none had started, the oldest "
        f'{T0.isoformat()}: concurrency = "forbid" queues at most {QUEUE_BOUND}'
    )


def test_forbid_with_catch_up_all_queues_as_many_on_time_runs_as_max_catch_up(store: Any) -> None:
    fence = _lead(store)
    j = replace(_job(concurrency=Concurrency.FORBID), catch_up=CatchUp.ALL, max_catch_up=5)
    assert queue_bound(j) == 5
    _define(store, fence, j)
    ticks = [_queued("j", T0 + timedelta(minutes=k)) for k in range(7)]
    dispatch(store, fence, ticks, {"j": j}, T0)  # one batch: its own queued ticks count too
    assert [r[2:] for r in _rows(store)] == [("queued", None)] * 5 + [("skipped", "queue_full")] * 2


def test_forbid_does_not_count_a_backlog_against_the_queue_bound(store: Any) -> None:
    fence = _lead(store)
    j = _job(concurrency=Concurrency.FORBID)
    _define(store, fence, j)
    backlog = [Tick("j", T0 + timedelta(seconds=k), RunState.QUEUED, late=True) for k in range(5)]
    dispatch(store, fence, backlog, {"j": j}, T0)
    result = dispatch(store, fence, [_queued("j", T0 + timedelta(minutes=1))], {"j": j}, T0)
    assert result.skipped == []


def test_forbid_never_skips_the_late_ticks_of_a_catch_up_pass(store: Any) -> None:
    fence = _lead(store)
    j = _job(concurrency=Concurrency.FORBID)
    _define(store, fence, j)
    _running(store, j)
    ticks = [Tick("j", T0 + timedelta(minutes=k), RunState.QUEUED, late=True) for k in (1, 2)]
    dispatch(store, fence, ticks, {"j": j}, T0)
    assert [r[2] for r in _rows(store)] == ["running", "queued", "queued"]  # the worker runs them one by one


def test_replace_does_not_cancel_the_executing_run_for_a_late_tick(store: Any) -> None:
    fence = _lead(store)
    j = _job(concurrency=Concurrency.REPLACE)
    _define(store, fence, j)
    _running(store, j)
    dispatch(store, fence, [Tick("j", T0 + timedelta(minutes=1), RunState.QUEUED, late=True)], {"j": j}, T0)
    with store.connect() as conn:
        flag = conn.execute(
            select(job_runs.c.cancel_requested).where(job_runs.c.scheduled_for == T0)
        ).scalar_one()
    assert not flag


def test_replace_asks_the_active_run_to_stop_and_queues_the_new_one(store: Any) -> None:
    fence = _lead(store)
    j = _job(concurrency=Concurrency.REPLACE)
    other = _job("other", concurrency=Concurrency.ALLOW)
    _define(store, fence, j, other)
    _running(store, j, other)
    dispatch(store, fence, [_queued("j", T0 + timedelta(minutes=1))], {"j": j, "other": other}, T0)
    with store.connect() as conn:
        flags = dict(
            conn.execute(
                select(job_runs.c.job_id, job_runs.c.cancel_requested).where(job_runs.c.scheduled_for == T0)
            ).all()
        )
        new = conn.execute(
            select(job_runs.c.state, job_runs.c.cancel_requested).where(
                job_runs.c.scheduled_for == T0 + timedelta(minutes=1)
            )
        ).one()
    assert flags == {"j": True, "other": False}
    assert tuple(new) == ("queued", False)


def test_a_refusal_holds_the_job_and_is_journaled(store: Any) -> None:
    fence = _lead(store)
    j = _job()
    _define(store, fence, j)
    tick = Tick("j", T0 + timedelta(minutes=1), RunState.SKIPPED, "catch_up_refused", "too many")  # type: ignore[arg-type]
    dispatch(store, fence, [tick], {"j": j}, T0, refusals={"j": "too many"})
    held = load_held(store)
    assert set(held) == {"j"} and held["j"].refused_at == T0
    with store.connect() as conn:
        kinds = [r.kind for r in conn.execute(select(job_events).order_by(job_events.c.id))]
        detail = conn.execute(select(job_state.c.refused_detail)).scalar_one()
    assert kinds == ["defined", "refused"] and detail == "too many"


@pytest.fixture
def pg_database_store() -> Any:
    """A store in a PostgreSQL database of its own: NOTIFY channels are per database, so the suite's shared
    database (one schema per test) would let any other process's wake-ups in."""
    import os
    import uuid

    from sqlalchemy import create_engine, make_url, text

    from schedctl.store import open_store, parse_url
    from schedctl.store.migrate import upgrade

    base = os.environ.get(ENV_FOR["postgresql"])
    if not base:
        pytest.skip(f"{ENV_FOR['postgresql']} is not set")
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(parse_url(base), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    st = open_store(make_url(base).set(database=name).render_as_string(hide_password=False))
    try:
        upgrade(st)
        yield st
    finally:
        st.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_workers_are_woken_when_a_dispatch_commits_and_not_when_it_rolls_back(pg_database_store: Any) -> None:
    """The wake-up rides on the transaction's last statement (leases.fence_commit): PostgreSQL delivers it
    at commit only. Other databases have no NOTIFY (their workers poll, SQLite's get a datagram)."""
    import psycopg

    from schedctl.store import wake

    store = pg_database_store
    conninfo = store.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as listener:
        listener.execute(f"LISTEN {wake.CHANNEL}")
        fence = _lead(store)
        j = _job()
        _define(store, fence, j)
        assert list(listener.notifies(timeout=0.3)) == []  # no run queued: nobody to wake
        short = store.bounds.commit_margin - 1.0
        lease.acquire_or_renew(store, "cron", "a", short)
        with pytest.raises(LeaseTooShort):
            dispatch(store, fence, [_queued("j", T0 + timedelta(minutes=1))], {"j": j}, T0)
        assert list(listener.notifies(timeout=0.3)) == []  # rolled back: no wake-up
        lease.acquire_or_renew(store, "cron", "a", 30)
        dispatch(store, fence, [_queued("j", T0 + timedelta(minutes=1))], {"j": j}, T0)
        woken = list(listener.notifies(timeout=5, stop_after=1))
        assert [n.channel for n in woken] == [wake.CHANNEL]


def test_the_take_over_reads_every_state_page_by_page_and_stops_between_pages(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from schedctl.store import dispatch as dispatch_module

    fence = _lead(store)
    ids = [f"job-{i:02d}" for i in range(11)]
    _define(store, fence, *(_job(i) for i in ids))
    monkeypatch.setattr(dispatch_module, "PREPARE_CHUNK", 3)  # 11 rows: three full pages and a short one
    stop = threading.Event()
    states = load_states(store, stop=stop)
    assert states is not None and sorted(states) == ids
    assert all(s.schedule_key == _job().schedule_key for s in states.values())
    stop.set()
    assert load_states(store, stop=stop) is None
