"""A forbid job with catch_up = "all" through a SIGKILL failover: real scheduler and worker processes.

Two `serve --role scheduler` replicas and one `serve --role worker`. The leader is killed with SIGKILL right
after a lease renewal chosen so that its lease expires just after a tick: the ticks of the gap reach the
new leader as a backlog of two, decided in one catch-up pass. Before the fix the second of them was
recorded `skipped` / `concurrency` although nothing was executing.

Margins (a loaded 2-core machine): the lease is 3 s, renewed every 0.5 s; the job fires every 2 s, so the
gap (about 3 s) always holds two ticks, and the new leader takes over at most 0.5 s + scheduling slack after
the expiry, which falls 0.1..0.6 s after a tick: the two backlog runs of `true` have about 0.9 s to finish
before the next tick is due (they take tens of milliseconds).
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

from schedctl.leader import lease
from schedctl.store import open_store
from schedctl.store.migrate import upgrade
from schedctl.store.schema import job_runs

pytestmark = [pytest.mark.processes, pytest.mark.slow]

LEASE, RENEW, PERIOD = 3.0, 0.5, 2
JOBS = f"""\
[jobs.tick]
schedule = "*/{PERIOD} * * * * *"
timezone = "UTC"
catch_up = "all"
max_catch_up = 20
command = "true"
"""  # concurrency defaults to "forbid"


def _serve(name: str, role: str, db_url: str, jobs: Path, logs: Path) -> subprocess.Popen[bytes]:
    return serve(
        "--role", role, "--db", db_url, "--jobs", str(jobs),
        "--identity", name, "--lease-duration", f"{LEASE}s", "--renew-interval", f"{RENEW}s",
        "--poll-interval", "0.2s", "--successful-history", "1000",  # keep every run for the checks
        log=logs / f"{name}.log",
    )  # fmt: skip


@pytest.fixture
def launch(db_url: str, tmp_path: Path) -> Iterator[Callable[[str, str], subprocess.Popen[bytes]]]:
    store = open_store(db_url)
    upgrade(store)
    store.dispose()
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str, role: str) -> subprocess.Popen[bytes]:
        proc = _serve(name, role, db_url, jobs, tmp_path)
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


Row = tuple[datetime, str, str | None, datetime | None, datetime | None, datetime]


def _rows(store: Any) -> list[Row]:
    r = job_runs.c
    query = select(r.scheduled_for, r.state, r.reason, r.started_at, r.finished_at, r.queued_at).order_by(
        r.scheduled_for
    )
    with store.connect() as conn:
        return [tuple(row) for row in conn.execute(query)]  # type: ignore[misc]


def _phase(at: datetime) -> float:
    return at.timestamp() % PERIOD


def test_a_sigkill_failover_runs_every_tick_of_the_gap_once_in_order(db_url: str, launch: Any) -> None:
    store = open_store(db_url)
    replicas = {name: launch(name, "scheduler") for name in ("r1", "r2")}
    worker = launch("w", "worker")
    leader = _until(
        lambda: (
            (r := lease.report(store, limit=0)).state is not None and r.state.held_at(r.db_now) and r.state
        ),
        20,
    )
    _until(lambda: any(row[1] == "succeeded" for row in _rows(store)), 15)

    # Kill right after a renewal whose lease ends 0.1..0.6 s after a tick (one renewal in four does), and
    # seen within 0.15 s of it by the database's clock: the gap's first tick comes 0.4..0.9 s after that
    # renewal, so a kill that lands later than that would let the old leader dispatch it on time.
    seen = leader.expires_at
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "no renewal suitable for the kill within 60 s"
        seen_at = lease.report(store, limit=0)
        state = seen_at.state
        assert state is not None and state.holder == leader.holder
        if state.expires_at != seen:
            seen = state.expires_at
            if 0.1 <= _phase(seen) < 0.6 and state.renewed_ago(seen_at.db_now) < 0.15:
                replicas[leader.holder].send_signal(signal.SIGKILL)
                break
        time.sleep(0.01)
    replicas[leader.holder].wait(10)
    final = lease.current(store)
    assert final is not None and final.holder == leader.holder
    gap_end = final.expires_at
    new = _until(lambda: (s := lease.current(store)) is not None and s.holder != leader.holder and s, 10)
    taken_over = new.acquired_at

    # The first on-time tick after the takeover, then stop the scheduler and let the worker drain.
    _until(lambda: any(row[0] > taken_over and row[1] == "succeeded" for row in _rows(store)), 20)
    survivor = "r2" if leader.holder == "r1" else "r1"
    replicas[survivor].send_signal(signal.SIGTERM)
    assert replicas[survivor].wait(15) == 0
    _until(lambda: all(row[1] not in ("queued", "running") for row in _rows(store)), 15)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(15) == 0

    rows = _rows(store)
    ticks = [row[0] for row in rows]
    expected = [ticks[0] + timedelta(seconds=PERIOD * k) for k in range(len(ticks))]
    assert ticks == expected, "a tick is missing or doubled"
    skipped = [(row[0], row[2]) for row in rows if row[1] != "succeeded"]
    assert skipped == [], f"not executed: {skipped}"
    # The gap really was a backlog of two: ticks queued by the new leader after their time.
    backlog = [row for row in rows if row[5] >= taken_over and row[0] < taken_over]
    assert len(backlog) >= 2, f"the failover left no backlog (lease ended {gap_end}, taken over {taken_over})"
    # Never two executing: each run started after the previous one finished, in tick order.
    spans = [(row[3], row[4]) for row in rows]
    assert all(s is not None and f is not None for s, f in spans)
    overlaps = [(a, b) for a, b in zip(spans, spans[1:], strict=False) if b[0] < a[1]]  # type: ignore[operator]
    assert overlaps == []
    print(
        f"FIGURES sigkill failover [{store.dialect}]: expected={len(expected)} executed={len(rows) - len(skipped)} "
        f"skipped={len(skipped)} backlog={len(backlog)}"
    )
    store.dispose()
