"""The job_state writes every writer shares (store/jobstate.py), on every backend: a job's first sight is
recorded once whoever sees it first, and last_dispatched only moves forward, whoever decided the ticks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from schedctl.inspect.jobcontrol import pause
from schedctl.jobs.job import CatchUp, Job
from schedctl.store import jobstate
from schedctl.store.schema import job_state

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def _states(store: Any) -> dict[str, tuple[Any, ...]]:
    js = job_state.c
    query = select(js.job_id, js.schedule_key, js.defined_at, js.last_dispatched, js.paused_by_file)
    with store.connect() as conn:
        return {row[0]: tuple(row[1:]) for row in conn.execute(query)}


def test_first_sight_counts_only_new_jobs_and_never_rewrites_a_known_one(store: Any) -> None:
    with store.begin() as conn:
        assert (
            jobstate.record_first_sight(
                conn, [("a", "* * * * *|UTC|", False), ("b", "0 * * * *|UTC|", True)], T0
            )
            == 2
        )
    with store.begin() as conn:
        again = [("a", "5 * * * *|UTC|", True), ("c", "* * * * *|UTC|", False)]
        assert jobstate.record_first_sight(conn, again, T0 + MINUTE) == 1
    assert _states(store) == {
        "a": ("* * * * *|UTC|", T0, T0, False),  # ticks count from its first sight: no invented backlog
        "b": ("0 * * * *|UTC|", T0, T0, True),
        "c": ("* * * * *|UTC|", T0 + MINUTE, T0 + MINUTE, False),
    }


def test_pause_before_any_leader_records_the_same_first_sight(store: Any) -> None:
    job = Job("new", "*/5 * * * *", "UTC", CatchUp.SKIP, "true")
    pause(store, job, T0, by="ops@bastion")
    pause(store, job, T0 + MINUTE, by="ops@bastion")
    assert _states(store) == {"new": (job.schedule_key, T0, T0, False)}


def test_last_dispatched_moves_forward_per_job_and_never_back(store: Any) -> None:
    with store.begin() as conn:
        jobstate.record_first_sight(conn, [(j, "* * * * *|UTC|", False) for j in ("a", "b", "c")], T0)
    with store.begin() as conn:
        jobstate.advance_last_dispatched(conn, {"a": T0 + 5 * MINUTE, "b": T0 + 5 * MINUTE}, T0)
    with store.begin() as conn:
        # a: older than what it has, so kept; b: newer, so moved; c: not named, so untouched.
        jobstate.advance_last_dispatched(conn, {"a": T0 + 2 * MINUTE, "b": T0 + 9 * MINUTE}, T0)
    last = {job_id: state[2] for job_id, state in _states(store).items()}
    assert last == {"a": T0 + 5 * MINUTE, "b": T0 + 9 * MINUTE, "c": T0}
