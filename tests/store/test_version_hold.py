"""The time guard between a leader's record of the versions it wrote and pruning in other processes.

A leader skips the version write for jobs whose version it committed lately (dispatch.RowValues); pruning, in
workers, deletes versions no run names. Neither can see the other: the hold (runrows.VERSION_HOLD) keeps a
version for a full hold after its last write, and the leader trusts its record for only half of one.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import factories
from sqlalchemy import literal, select, update

from schedctl.jobs.job import CatchUp, Concurrency, Job, RunState
from schedctl.leader import lease
from schedctl.leader.planner import Tick
from schedctl.store import claims, pruning, runrows
from schedctl.store.dialect import db_now_plus, select_db_now
from schedctl.store.dispatch import Fence, RowValues, StateChange, dispatch, record_changes
from schedctl.store.schema import job_runs, job_versions

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
HOLD = 600.0


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _job(command: str = "echo old") -> Job:
    return Job("j", "* * * * *", "UTC", CatchUp.SKIP, command, concurrency=Concurrency.ALLOW)


def _lead(store: Any, job: Job) -> Fence:
    result = lease.acquire_or_renew(store, "cron", "a", 30.0)
    assert result.held and result.term is not None
    fence = Fence("cron", "a", result.term)
    record_changes(store, fence, [StateChange(job.id, "defined", job.schedule_key)], T0)
    return fence


def _dispatch(store: Any, fence: Fence, job: Job, minute: int, values: RowValues) -> None:
    tick = Tick(job.id, T0 + timedelta(minutes=minute), RunState.QUEUED)
    dispatch(store, fence, [tick], {job.id: job}, T0, row_values=values)


def _succeed_all(store: Any) -> None:
    with store.begin() as conn:
        conn.execute(update(job_runs).values(state=RunState.SUCCEEDED, attempt=1, finished_at=T0))


def _age_versions(store: Any, seconds: float) -> None:
    """As if the database's clock had moved ``seconds`` on since each version's last write."""
    with store.begin() as conn:
        conn.execute(update(job_versions).values(written_at=db_now_plus(literal(-seconds))))


def _versions(store: Any) -> dict[str, datetime]:
    with store.connect() as conn:
        return dict(conn.execute(select(job_versions.c.version, job_versions.c.written_at)).all())


def _claimed_commands(store: Any) -> dict[datetime, str | None]:
    with store.begin() as conn:
        runs = claims.claim(conn, "w1", 100, [""], 60.0)
    return {c.scheduled_for: None if c.snapshot is None else c.snapshot["command"] for c in runs}


def _prune_everything(store: Any, hold: float) -> None:
    with store.begin() as conn:
        pruning.prune(conn, ["j"], keep_succeeded=0, keep_failed=0, version_hold=hold)


def test_a_version_pruned_under_a_leaders_record_is_written_again_before_a_run_names_it(store: Any) -> None:
    """keep_succeeded=0 and a newer manual run of another definition: every run naming the leader's version
    goes, and so, a hold later, does the version. The leader's record expired at half that: it writes the
    version again, and the worker runs the definition the leader queued."""
    leader = _job()
    fence = _lead(store, leader)
    clock = FakeMonotonic()
    values = RowValues(version_hold=HOLD, monotonic=clock)
    _dispatch(store, fence, leader, 1, values)
    with store.begin() as conn:  # `schedctl run` with an edited job file, newer than the leader's rows
        claims.queue_runs(
            conn, replace(leader, command="echo manual"), [T0 + timedelta(minutes=2)], manual=True
        )
    _succeed_all(store)
    _age_versions(store, HOLD)
    clock.now += HOLD
    _prune_everything(store, HOLD)
    assert _versions(store) == {}  # both unnamed and a hold old: gone
    _dispatch(store, fence, leader, 3, values)
    assert _claimed_commands(store) == {T0 + timedelta(minutes=3): "echo old"}


def test_within_half_a_hold_the_leader_trusts_its_record_and_pruning_cannot_delete_the_version(
    store: Any, monkeypatch: Any
) -> None:
    leader = _job()
    fence = _lead(store, leader)
    clock = FakeMonotonic()
    values = RowValues(version_hold=HOLD, monotonic=clock)
    writes = factories.count_version_writes(monkeypatch)
    _dispatch(store, fence, leader, 1, values)
    with store.begin() as conn:
        claims.queue_runs(
            conn, replace(leader, command="echo manual"), [T0 + timedelta(minutes=2)], manual=True
        )
    _succeed_all(store)
    # Just under half a hold on both clocks: the leader still trusts its record, and the version is safe.
    _age_versions(store, HOLD / 2 - 1)
    clock.now += HOLD / 2 - 1
    _prune_everything(store, HOLD)
    assert len(_versions(store)) == 2
    _dispatch(store, fence, leader, 3, values)
    assert writes == [["j"], ["j"]]  # the leader's first batch and the manual run; not the leader again
    clock.now += 2  # past half a hold: written again
    _dispatch(store, fence, leader, 4, values)
    assert writes == [["j"], ["j"], ["j"]]
    commands = _claimed_commands(store)
    assert commands == {T0 + timedelta(minutes=3): "echo old", T0 + timedelta(minutes=4): "echo old"}


def test_pruning_deletes_an_unnamed_version_older_than_the_hold_and_keeps_a_younger_one(store: Any) -> None:
    old, young, kept = _job(), _job("echo young"), _job("echo kept")
    with store.begin() as conn:
        claims.queue_runs(conn, old, [T0 + timedelta(minutes=1)])
        claims.queue_runs(conn, young, [T0 + timedelta(minutes=2)])
        claims.queue_runs(conn, kept, [T0 + timedelta(minutes=3)])
    _succeed_all(store)
    version = {j.command: runrows.shared_values(j)[0] for j in (old, young, kept)}
    with store.begin() as conn:
        conn.execute(
            update(job_versions)
            .where(job_versions.c.version == version["echo old"])
            .values(written_at=db_now_plus(literal(-(runrows.VERSION_HOLD + 60))))
        )
    with store.begin() as conn:  # the runs at 1 and 2 go; only the old version is past the hold
        assert pruning.prune(conn, ["j"], keep_succeeded=1, keep_failed=0) == {"j": 2}
    assert sorted(_versions(store)) == sorted([version["echo young"], version["echo kept"]])


def test_writing_a_version_that_exists_refreshes_when_it_was_written(store: Any) -> None:
    job = _job()
    shared = runrows.shared_values(job)
    with store.begin() as conn:
        runrows.write_versions(conn, [job.id], [shared])
    _age_versions(store, 2 * runrows.VERSION_HOLD)
    aged = _versions(store)[shared[0]]
    with store.begin() as conn:
        runrows.write_versions(conn, [job.id], [shared])
        now = select_db_now(conn)
    refreshed = _versions(store)[shared[0]]
    assert refreshed - aged > timedelta(seconds=runrows.VERSION_HOLD)
    assert abs(now - refreshed) < timedelta(seconds=60)
    with store.connect() as conn:  # refreshed, not duplicated, and the snapshot is as it was
        rows = conn.execute(select(job_versions.c.snapshot)).scalars().all()
    assert [runrows.canonical_snapshot(r) for r in rows] == [runrows.canonical_snapshot(shared[4].snapshot())]
