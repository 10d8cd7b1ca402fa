"""`logs -f` on every backend (issue 30): a running run's output stored as it grows (``claims.save_output``,
what the worker writes every ``--output-interval``), read back by ``inspect.follow`` with only the new text
given, up to the outcome written by ``claims.record``. Between two polls (the injected ``sleep``) the test does
what a worker does: feeds the job's output into a real ``OutputTail`` and stores it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from schedctl.inspect.follow import POLL, follow
from schedctl.jobs.job import CatchUp, Concurrency, Job, RunState
from schedctl.store import claims
from schedctl.store.rows import Outcome
from schedctl.store.runs import current_run, run_progress
from schedctl.worker.executor import OutputTail

T0 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)


def _job() -> Job:
    return Job(
        id="j", schedule="* * * * *", timezone="UTC", catch_up=CatchUp.SKIP, command="true", retries=1,
        concurrency=Concurrency.ALLOW,
    )  # fmt: skip


def _claim(store) -> claims.ClaimedRun:
    with store.begin() as conn:
        [run] = claims.claim(conn, "w1", 1, [""], 60.0)
    return run


def _save(store, run: claims.ClaimedRun, tail: OutputTail) -> None:
    text, size = tail.snapshot()
    with store.begin() as conn:
        claims.save_output(conn, [(run.job_id, run.scheduled_for, run.attempt, text, size)])


def _finish(store, run: claims.ClaimedRun, tail: OutputTail, state: str, **kw) -> None:
    text, size = tail.snapshot()
    with store.begin() as conn:
        outcome = Outcome(
            run.job_id, run.scheduled_for, run.attempt, state, output_tail=text, output_size=size, **kw
        )
        assert claims.record(conn, outcome)


def _worker(steps: list[Callable[[], None]]) -> Callable[[float], None]:
    """The follower's sleep: each poll's wait is one step of the worker."""

    def sleep(seconds: float) -> None:
        assert seconds == POLL
        steps.pop(0)()

    return sleep


def test_following_gives_each_line_once_as_it_is_stored_then_the_outcome(store) -> None:
    with store.begin() as conn:
        claims.queue_runs(conn, _job(), [T0])
    run = _claim(store)
    assert current_run(store, "j") == T0
    tail = OutputTail(8192)
    tail.feed(b"line 1\n")
    _save(store, run, tail)

    def line(n: int) -> Callable[[], None]:
        def step() -> None:
            tail.feed(f"line {n}\n".encode())
            _save(store, run, tail)

        return step

    steps = [
        line(2),
        lambda: None,
        line(3),
        lambda: _finish(store, run, tail, RunState.SUCCEEDED, exit_status=0),
    ]
    updates = list(follow(store, "j", T0, sleep=_worker(steps)))
    assert [u.output for u in updates] == ["line 1\n", "line 2\n", "line 3\n", ""]
    assert [u.ended for u in updates] == [False, False, False, True]
    assert updates[-1].record.state == RunState.SUCCEEDED and updates[-1].record.exit_status == 0
    assert all(u.note is None for u in updates) and not steps


def test_more_than_the_tail_keeps_between_polls_is_said_not_repeated(store) -> None:
    with store.begin() as conn:
        claims.queue_runs(conn, _job(), [T0])
    run = _claim(store)
    tail = OutputTail(10)
    tail.feed(b"abc")
    _save(store, run, tail)

    def flood() -> None:
        tail.feed(b"0123456789" * 3 + "é!".encode())  # 32 characters, 33 bytes; the tail keeps 10 bytes
        _finish(store, run, tail, RunState.FAILED, exit_status=3)

    updates = list(follow(store, "j", T0, sleep=_worker([flood])))
    assert updates[0].output == "abc"
    assert updates[1].output == "3456789é!" and updates[1].ended
    assert updates[1].note == "23 characters of output not kept (the tail holds the rest)"


def test_a_retry_is_followed_from_its_own_start_not_with_the_last_attempts_output(store) -> None:
    with store.begin() as conn:
        claims.queue_runs(conn, _job(), [T0])
    first = _claim(store)
    tail = OutputTail(8192)
    tail.feed(b"try one\n")
    _save(store, first, tail)
    state: dict[str, claims.ClaimedRun] = {}

    def fail() -> None:
        _finish(
            store, first, tail, RunState.QUEUED, exit_status=1, retry_after=0.0, error="exited with status 1"
        )

    def retried() -> None:
        state["run"] = _claim(store)
        # Claimed, not yet saved: the row must not offer the first attempt's output as the second's.
        assert run_progress(store, "j", T0)[1:] == (None, None)

    def second_output() -> None:
        t = OutputTail(8192)
        t.feed(b"try two\n")
        _finish(store, state["run"], t, RunState.SUCCEEDED, exit_status=0)

    updates = list(follow(store, "j", T0, sleep=_worker([fail, retried, second_output])))
    assert "".join(u.output for u in updates) == "try one\ntry two\n"
    notes = [u.note for u in updates if u.note]
    assert notes == ["attempt 2: its output from the start"]
    assert updates[-1].ended and updates[-1].record.attempt == 2


def test_the_run_followed_by_default_is_the_running_one_else_the_next_queued(store) -> None:
    later = T0.replace(minute=5)
    with store.begin() as conn:
        claims.queue_runs(conn, _job(), [T0, later])
    assert current_run(store, "j") == T0  # none runs yet: the next to start
    _claim(store)
    assert current_run(store, "j") == T0
