"""What a worker records when its copy of a run ends: a pure function of the claim and how the child ended.

No SQLAlchemy here: the policy (final state, retry or hand back, retry delay) is tested as a table of cases in
``tests/unit/test_outcome.py``; ``store/claims.py`` writes the ``Outcome`` it returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from schedctl.jobs.job import RunState, StopReason
from schedctl.store.rows import Outcome


class Claim(Protocol):
    """The part of a claimed run (``store.claims.ClaimedRun``) the policy reads."""

    @property
    def job_id(self) -> str: ...
    @property
    def scheduled_for(self) -> datetime: ...
    @property
    def attempt(self) -> int: ...
    @property
    def failures(self) -> int: ...  # failed attempts so far, counted by the store


@dataclass(frozen=True)
class RunResult:
    """How one child ended, as the executor saw it."""

    snapshot: Mapping[str, Any]  # the job definition the run was dispatched with
    stop_reason: StopReason | None = None
    returncode: int | None = None  # negative: killed by that signal
    start_error: str | None = None  # the command could not be started
    output_tail: str | None = None
    output_size: int | None = None  # characters printed, output_tail their end
    checkpoint: Any = None
    checkpoint_written: bool = False  # the job wrote a checkpoint (None is a value it may write)
    checkpoint_problem: str | None = None  # what the job left could not be taken (over the cap, not JSON)
    lost: bool = False


def outcome_for(claim: Claim, result: RunResult) -> Outcome | None:
    """The outcome to record, or None for a lost run (its new holder records the result)."""
    if result.lost or result.stop_reason is StopReason.LOST:
        return None
    base: dict[str, Any] = {
        "job_id": claim.job_id,
        "scheduled_for": claim.scheduled_for,
        "attempt": claim.attempt,
        "exit_status": result.returncode,
        "output_tail": result.output_tail,
        "output_size": result.output_size,
        "checkpoint": result.checkpoint if result.checkpoint_written else None,
        "save_checkpoint": result.checkpoint_written,
    }
    snapshot = result.snapshot
    reason = result.stop_reason
    note = result.checkpoint_problem
    if reason is StopReason.SHUTDOWN:
        return Outcome(state=RunState.QUEUED, error=note, **base)  # handed back: no failure counted, no delay
    if reason is StopReason.CANCELLED:
        return Outcome(
            state=RunState.CANCELLED,
            error=_noted("cancelled on request", note),
            reason=StopReason.CANCELLED,
            **base,
        )
    if reason is StopReason.TIMEOUT:
        return Outcome(
            state=RunState.TIMED_OUT,
            error=_noted(f"timed out after {snapshot.get('timeout')}s", note),
            **base,
        )
    if result.start_error is None and result.returncode == 0:
        return Outcome(state=RunState.SUCCEEDED, error=note, **base)
    error = _noted(result.start_error or f"exited with status {result.returncode}", note)
    if claim.failures < int(snapshot.get("retries") or 0):
        delay = float(snapshot.get("retry_backoff") or 0.0) * (2**claim.failures)
        return Outcome(state=RunState.QUEUED, retry_after=delay, error=error, **base)
    return Outcome(state=RunState.FAILED, error=error, **base)


def _noted(error: str, note: str | None) -> str:
    """One line for the record: why the run ended, then why its checkpoint was not taken."""
    return error if note is None else f"{error}; {note}"
