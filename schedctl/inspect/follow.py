"""``schedctl logs -f``: a run's output as it is printed, until the run ends (``kubectl logs -f``).

The worker stores a running run's output tail with the number of characters printed so far
(``job_runs.output_size``) every ``serve --output-interval``, and once more when the run ends. Each poll
here reads that one row: what was printed since the last poll is the end of the tail, so only new text is
given, and when more was printed between two polls than the tail keeps, a note says how much is not shown.
A retry or a takeover starts a new attempt, whose output is followed from its start.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from schedctl.jobs.job import RunState
from schedctl.store import Store
from schedctl.store.rows import RunRecord
from schedctl.store.runs import run_progress

POLL = 0.5  # seconds between reads of the run's row: a primary-key read, twice a second


@dataclass(frozen=True)
class Update:
    """What one poll found: ``output`` to print, a ``note`` for the reader, and ``ended`` with the final
    record once the run is over (the last update)."""

    record: RunRecord
    output: str = ""
    note: str | None = None
    ended: bool = False


def follow(
    store: Store,
    job_id: str,
    scheduled_for: datetime,
    *,
    poll: float = POLL,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Update]:
    """Updates until the run reaches a final state (the first poll always gives one, so that the reader
    learns which run is followed); a store error ends it (the caller says so)."""
    attempt: int | None = None
    printed = 0
    first = True
    while True:
        record, tail, size = run_progress(store, job_id, scheduled_for)
        note = None
        if record.attempt != attempt:
            if attempt:  # not the first attempt's start after a wait in the queue
                note = f"attempt {record.attempt}: its output from the start"
            attempt, printed = record.attempt, 0
        text = tail or ""
        # A row written by a worker that did not count (an older schedctl) has the tail alone.
        known = size if size is not None else len(text)
        output = ""
        if known > printed:
            new = known - printed
            if new > len(text):
                note = _joined(
                    note, f"{new - len(text)} characters of output not kept (the tail holds the rest)"
                )
                output = text
            else:
                output = text[len(text) - new :]
        printed = max(printed, known)
        ended = record.state not in (RunState.QUEUED, RunState.RUNNING)
        if output or note or ended or first:
            yield Update(record, output, note, ended)
        first = False
        if ended:
            return
        sleep(poll)


def _joined(first: str | None, second: str) -> str:
    return second if first is None else f"{first}; {second}"
