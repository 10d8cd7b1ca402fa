"""Job versions on every backend: one row per distinct snapshot, runs keep theirs, pruning keeps what is named."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import factories
from sqlalchemy import func, select, update

from schedctl.inspect.replay import ReplayPlan, ReplayTick, replay
from schedctl.jobs.job import CatchUp, Concurrency, Job, RunState
from schedctl.leader import lease
from schedctl.leader.planner import Tick
from schedctl.store import claims, pruning
from schedctl.store.dispatch import Fence, RowValues, StateChange, dispatch, record_changes, write_versions
from schedctl.store.schema import job_runs, job_versions

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def _job(job_id: str = "j", command: str = "echo old") -> Job:
    return Job(job_id, "* * * * *", "UTC", CatchUp.SKIP, command, concurrency=Concurrency.ALLOW)


def _lead(store: Any) -> Fence:
    result = lease.acquire_or_renew(store, "cron", "a", 30.0)
    assert result.held and result.term is not None
    return Fence("cron", "a", result.term)


def _dispatch(store: Any, fence: Fence, jobs: list[Job], minute: int, values: RowValues) -> None:
    ticks = [Tick(j.id, T0 + timedelta(minutes=minute), RunState.QUEUED) for j in jobs]
    dispatch(store, fence, ticks, {j.id: j for j in jobs}, T0, row_values=values)


def _versions(store: Any) -> list[tuple[str, str]]:
    with store.connect() as conn:
        return [tuple(r) for r in conn.execute(select(job_versions.c.job_id, job_versions.c.version))]


def _claimed(store: Any) -> dict[tuple[str, datetime], Any]:
    with store.begin() as conn:
        return {c.key: c.snapshot for c in claims.claim(conn, "w1", 100, [""], 60.0)}


def test_a_version_is_written_once_for_many_runs_across_batches(store: Any, monkeypatch: Any) -> None:
    fence = _lead(store)
    jobs = [_job("a"), _job("b", "echo b")]
    record_changes(store, fence, [StateChange(j.id, "defined", j.schedule_key) for j in jobs], T0)
    values = RowValues()
    writes = factories.count_version_writes(monkeypatch)
    for minute in range(1, 6):
        _dispatch(store, fence, jobs, minute, values)
    assert writes == [["a", "b"]]  # the first batch wrote both versions; the leader knew them afterwards
    with store.connect() as conn:
        runs = conn.execute(select(func.count()).select_from(job_runs)).scalar_one()
        named = set(conn.execute(select(job_runs.c.job_id, job_runs.c.version).distinct()).all())
    assert runs == 10
    assert sorted(_versions(store)) == sorted(named) and len(named) == 2
    snapshots = _claimed(store)
    assert {k[0]: s["command"] for k, s in snapshots.items()} == {"a": "echo old", "b": "echo b"}


def test_a_queued_run_keeps_its_snapshot_after_the_job_is_edited(store: Any) -> None:
    fence = _lead(store)
    old = _job()
    record_changes(store, fence, [StateChange(old.id, "defined", old.schedule_key)], T0)
    values = RowValues()
    _dispatch(store, fence, [old], 1, values)
    edited = replace(old, command="echo new", env={"MODE": "edited"})
    _dispatch(store, fence, [edited], 2, values)
    snapshots = _claimed(store)
    first, second = snapshots[("j", T0 + timedelta(minutes=1))], snapshots[("j", T0 + timedelta(minutes=2))]
    assert (first["command"], first["env"]) == ("echo old", {})
    assert (second["command"], second["env"]) == ("echo new", {"MODE": "edited"})
    assert len(_versions(store)) == 2


def test_a_take_over_writes_the_version_again(store: Any) -> None:
    """A leader's record of committed versions does not outlive a take-over: meanwhile the version may have
    been pruned (another leader dispatched a newer definition), and a run must never name a missing one."""
    fence = _lead(store)
    job = _job()
    record_changes(store, fence, [StateChange(job.id, "defined", job.schedule_key)], T0)
    values = RowValues()
    values.prepare([job])
    _dispatch(store, fence, [job], 1, values)
    with store.begin() as conn:
        conn.execute(job_versions.delete())
    values.prepare([job])
    _dispatch(store, fence, [job], 2, values)
    assert _claimed(store)[("j", T0 + timedelta(minutes=2))]["command"] == "echo old"


def test_replay_requeues_a_skipped_tick_with_the_jobs_current_snapshot(store: Any) -> None:
    fence = _lead(store)
    old = _job()
    record_changes(store, fence, [StateChange(old.id, "defined", old.schedule_key)], T0)
    at = T0 + timedelta(minutes=1)
    dispatch(store, fence, [Tick("j", at, RunState.SKIPPED)], {"j": old}, T0)
    edited = replace(old, command="echo replayed")
    plan = ReplayPlan(ticks=[ReplayTick("j", at, "requeue", "skipped")])
    result = replay(store, [edited], 10, None, None, T0 + timedelta(minutes=5), plan=plan)
    assert result.dispatched == 1
    assert _claimed(store)[("j", at)]["command"] == "echo replayed"


def _finish(store: Any, states: dict[int, str]) -> None:
    with store.begin() as conn:
        for minute, state in states.items():
            conn.execute(
                update(job_runs)
                .where(job_runs.c.scheduled_for == T0 + timedelta(minutes=minute))
                .values(state=state, attempt=1, finished_at=T0 + timedelta(minutes=minute, seconds=5))
            )


def test_pruning_keeps_versions_named_by_kept_runs_and_deletes_the_others(store: Any) -> None:
    fence = _lead(store)
    v1, v2, v3 = _job(), _job(command="echo two"), _job(command="echo three")
    other = _job("other", "echo other")
    record_changes(store, fence, [StateChange(j.id, "defined", j.schedule_key) for j in (v1, other)], T0)
    values = RowValues()
    # v1 ran at 1 and 2 (a failure at 2), v2 at 3 and 4, v3 at 5 and 6; `other` at 1.
    _dispatch(store, fence, [v1, other], 1, values)
    _dispatch(store, fence, [v1], 2, values)
    for minute, job in ((3, v2), (4, v2), (5, v3), (6, v3)):
        _dispatch(store, fence, [job], minute, values)
    _finish(
        store, {1: "succeeded", 2: "failed", 3: "succeeded", 4: "succeeded", 5: "succeeded", 6: "succeeded"}
    )
    version = {j.command: values.of(j)[0] for j in (v1, v2, v3)}
    with store.begin() as conn:
        # Keeps the failure at 2 (v1) and the successes at 5, 6 (v3): v2's runs all go, and v2 with them.
        assert pruning.prune(conn, ["j"], keep_succeeded=2, keep_failed=1, version_hold=0) == {"j": 3}
    assert sorted(v for j, v in _versions(store) if j == "j") == sorted(
        [version["echo old"], version["echo three"]]
    )
    assert [j for j, _ in _versions(store)].count("other") == 1  # another job's versions are not touched
    with store.begin() as conn:  # the failure goes too: v1 is named by nothing any more
        assert pruning.prune(conn, ["j"], keep_succeeded=2, keep_failed=0, version_hold=0) == {"j": 1}
    assert [v for j, v in _versions(store) if j == "j"] == [version["echo three"]]


def test_pruning_every_run_keeps_the_versions_written_within_the_hold(store: Any) -> None:
    """The leader writes a version once per half hold: the one it is dispatching stays with no run left
    (as does, for a hold, any other; tests/store/test_version_hold.py)."""
    fence = _lead(store)
    old, new = _job(), _job(command="echo new")
    record_changes(store, fence, [StateChange(old.id, "defined", old.schedule_key)], T0)
    values = RowValues()
    _dispatch(store, fence, [old], 1, values)
    _dispatch(store, fence, [new], 2, values)
    _finish(store, {1: "succeeded", 2: "succeeded"})
    with store.begin() as conn:
        assert pruning.prune(conn, ["j"], keep_succeeded=0, keep_failed=0) == {"j": 2}
    assert sorted(_versions(store)) == sorted([("j", values.of(old)[0]), ("j", values.of(new)[0])])


def test_jobs_from_the_database_read_the_snapshot_of_their_version_written_last(store: Any) -> None:
    """`status`/`missed`/`jobs` without a job file rebuild each job from the version written last: the one
    the leader dispatches now, even before a run names it (it writes versions ahead of their ticks)."""
    from schedctl.store.definitions import jobs_from_database, stored_versions

    fence = _lead(store)
    old = _job()
    record_changes(store, fence, [StateChange(old.id, "defined", old.schedule_key)], T0)
    values = RowValues()
    _dispatch(store, fence, [old], 1, values)
    with store.read() as conn:
        assert jobs_from_database(conn, ["j"])["j"].command == "echo old"
    new = replace(old, command="echo new")
    write_versions(store, fence, [new], values)  # the leader's prewrite: no run names it yet
    with store.read() as conn:
        assert jobs_from_database(conn, [])["j"].command == "echo new"
        assert stored_versions(conn, ["j"])["j"].version == values.of(new)[0]
