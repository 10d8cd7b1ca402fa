"""A forbid job's backlog after a SIGKILL outage runs back to back, and no tick is lost to it (issue 26).

One `serve --role all` with the real 1 s poll interval, a `*/2 * * * * *` job with catch_up = "all" and
`true` for its command. The process is SIGKILLed mid-period and started again 14 s later: the ticks of the
outage reach it as a backlog of about seven, decided in one catch-up pass. Before the fix the worker claimed
the next run of the job only at its next poll, one backlog run a second, so the on-time ticks that came due
meanwhile found an on-time run "still queued" and were skipped for concurrency, though nothing ran at the
same time.

What is checked: every tick from the first to the last has exactly one row, each ran once and succeeded;
none is skipped; the backlog runs started within a fraction of the poll interval of the previous run's end;
no two runs of the job overlapped. The 14 s sleep is the outage itself.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from launch import serve
from sqlalchemy import select

from schedctl.store import open_store
from schedctl.store.migrate import upgrade
from schedctl.store.schema import job_runs

pytestmark = [pytest.mark.processes, pytest.mark.slow]

PERIOD, OUTAGE, POLL = 2, 14.0, 1.0
# A run's end to the next run's start, at most: far below the poll interval, far above a claim's few ms on a
# loaded 2-core machine.
BACK_TO_BACK = 0.25
JOBS = f"""\
[jobs.tick]
schedule = "*/{PERIOD} * * * * *"
timezone = "UTC"
catch_up = "all"
max_catch_up = 20
command = "true"
"""  # concurrency defaults to "forbid"


@pytest.fixture
def launch(db_url: str, tmp_path: Path) -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
    store = open_store(db_url)
    upgrade(store)
    store.dispose()
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str) -> subprocess.Popen[bytes]:
        proc = serve(
            "--role", "all", "--db", db_url, "--jobs", str(jobs), "--identity", "all",
            "--lease-duration", "3s", "--renew-interval", "0.5s", "--poll-interval", f"{POLL}s",
            "--heartbeat-interval", "0.5s", "--stale-after", "3s", "--successful-history", "1000",
            log=tmp_path / f"{name}.log",
        )  # fmt: skip
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(15)


def _until(predicate: Callable[[], Any], timeout: float, step: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"not within {timeout}s")


Row = tuple[datetime, str, str | None, datetime | None, datetime | None, datetime, int]


def _rows(store: Any) -> list[Row]:
    r = job_runs.c
    query = select(
        r.scheduled_for, r.state, r.reason, r.started_at, r.finished_at, r.queued_at, r.attempt
    ).order_by(r.scheduled_for)
    with store.connect() as conn:
        return [tuple(row) for row in conn.execute(query)]  # type: ignore[misc]


def _succeeded(store: Any) -> int:
    return sum(row[1] == "succeeded" for row in _rows(store))


def test_a_backlog_after_a_sigkill_outage_runs_back_to_back_and_skips_no_tick(
    db_url: str, launch: Any
) -> None:
    store = open_store(db_url)
    try:
        _outage_and_back(store, launch)
    finally:
        store.dispose()


def _outage_and_back(store: Any, launch: Any) -> None:
    first = launch("first")
    _until(lambda: _succeeded(store) >= 2, 30)
    # Mid-period, so no run of `true` (a few ms, just after its tick) is cut short and taken over.
    _until(lambda: 0.8 <= time.time() % PERIOD < 1.2, PERIOD + 1, step=0.005)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    before = len(_rows(store))
    time.sleep(OUTAGE)  # the outage itself
    launch("second")
    restarted = _until(lambda: (rows := _rows(store))[-1][5] > rows[before - 1][5] and rows[before][5], 20)
    # The backlog, then four on-time ticks after it.
    _until(lambda: sum(row[1] == "succeeded" and row[0] > restarted for row in _rows(store)) >= 4, 20)

    rows = _rows(store)
    ticks = [row[0] for row in rows]
    assert ticks == [ticks[0] + timedelta(seconds=PERIOD * k) for k in range(len(ticks))], "a tick is missing"
    skipped = [(row[0], row[2]) for row in rows if row[1] == "skipped"]
    unfinished = [(row[0], row[1]) for row in rows[:-1] if row[1] != "succeeded" and row[1] != "skipped"]
    backlog = rows[before:][: sum(row[0] < restarted for row in rows[before:])]
    assert len(backlog) >= 5, f"the outage left a backlog of {len(backlog)}"
    ran = [row for row in rows[before:] if row[1] == "succeeded"]
    # From one run's end to the next one's start, for the backlog and the first on-time run behind it.
    gaps = [
        (b[3] - a[4]).total_seconds()  # type: ignore[operator]
        for a, b in zip(ran, ran[1:], strict=False)
        if b[0] <= restarted
    ]
    print(
        f"FIGURES forbid backlog [{store.dialect}]: ticks={len(rows)} backlog={len(backlog)} "
        f"skipped={len(skipped)} ran_after_restart={len(ran)} "
        f"gap_ms max={max(gaps) * 1000:.1f} mean={sum(gaps) / len(gaps) * 1000:.1f} "
        f"starts={[row[3].strftime('%S.%f')[:-3] for row in backlog]}"  # type: ignore[union-attr]
    )
    assert skipped == [], f"skipped: {skipped}"
    assert unfinished == [], f"not run: {unfinished}"
    assert len(ran) >= 10, "fewer than ten runs in a row after the restart"
    assert all(row[6] == 1 for row in rows if row[1] == "succeeded"), "a run was run twice"
    assert max(gaps) < BACK_TO_BACK, f"the backlog did not run back to back: gaps {gaps}"
    spans = [(row[3], row[4]) for row in rows if row[1] == "succeeded"]
    assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:], strict=False)), "two runs overlapped"  # type: ignore[operator]
