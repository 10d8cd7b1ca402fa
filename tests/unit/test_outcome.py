"""The worker's outcome policy, one row a case: what a finished child's copy of a run records."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from schedctl.jobs.job import StopReason
from schedctl.store.claims import ClaimedRun
from schedctl.store.rows import Outcome
from schedctl.worker.outcome import RunResult, outcome_for

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SNAP: dict[str, Any] = {"retries": 2, "retry_backoff": 10.0, "timeout": 5.0}


def _claim(failures: int = 0) -> ClaimedRun:
    return ClaimedRun("j", T0, failures + 1, failures, SNAP, None, False, None)


def _out(state: str, **kw: Any) -> Outcome:
    failures = kw.pop("failures", 0)
    return Outcome("j", T0, failures + 1, state, **kw)


CASES = [
    # (id, failures, result, expected outcome)
    (
        "exit 0",
        0,
        RunResult(SNAP, returncode=0, output_tail="ok\n"),
        _out("succeeded", exit_status=0, output_tail="ok\n"),
    ),
    (
        "non-zero, first retry",
        0,
        RunResult(SNAP, returncode=3),
        _out("queued", exit_status=3, retry_after=10.0, error="exited with status 3"),
    ),
    (
        "non-zero, second retry doubles the delay",
        1,
        RunResult(SNAP, returncode=3),
        _out("queued", failures=1, exit_status=3, retry_after=20.0, error="exited with status 3"),
    ),
    (
        "non-zero, retries exhausted",
        2,
        RunResult(SNAP, returncode=3),
        _out("failed", failures=2, exit_status=3, error="exited with status 3"),
    ),
    (
        "non-zero, no retries configured",
        0,
        RunResult({"retries": 0}, returncode=1),
        _out("failed", exit_status=1, error="exited with status 1"),
    ),
    (
        "killed by a signal counts as a failure",
        2,
        RunResult(SNAP, returncode=-9),
        _out("failed", failures=2, exit_status=-9, error="exited with status -9"),
    ),
    (
        "could not start",
        2,
        RunResult(SNAP, start_error="no such command: nope"),
        _out("failed", failures=2, error="no such command: nope"),
    ),
    (
        "timeout, even if the child then exits 0",
        0,
        RunResult(SNAP, stop_reason=StopReason.TIMEOUT, returncode=0),
        _out("timed_out", exit_status=0, error="timed out after 5.0s"),
    ),
    (
        "cancelled",
        0,
        RunResult(SNAP, stop_reason=StopReason.CANCELLED, returncode=-15),
        _out("cancelled", exit_status=-15, error="cancelled on request", reason="cancelled"),
    ),
    (
        "hand-back on SIGTERM keeps the checkpoint and counts no failure",
        1,
        RunResult(
            SNAP,
            stop_reason=StopReason.SHUTDOWN,
            returncode=-15,
            checkpoint={"n": 4},
            checkpoint_written=True,
        ),
        _out("queued", failures=1, exit_status=-15, checkpoint={"n": 4}, save_checkpoint=True),
    ),
    (
        "a written null checkpoint is saved as null",
        0,
        RunResult(SNAP, returncode=0, checkpoint=None, checkpoint_written=True),
        _out("succeeded", exit_status=0, save_checkpoint=True),
    ),
    ("lost run records nothing", 0, RunResult(SNAP, returncode=0, lost=True), None),
    (
        "stopped as lost records nothing",
        0,
        RunResult(SNAP, stop_reason=StopReason.LOST, returncode=-15),
        None,
    ),
]


@pytest.mark.parametrize(
    ("failures", "result", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_outcome_for(failures: int, result: RunResult, expected: Outcome | None) -> None:
    assert outcome_for(_claim(failures), result) == expected


def test_the_policy_loads_no_sqlalchemy() -> None:
    code = "import sys, schedctl.worker.outcome; sys.exit('sqlalchemy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
