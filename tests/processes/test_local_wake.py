"""On SQLite (no NOTIFY) the scheduler wakes the workers after each dispatch, so a run starts within
milliseconds of its tick instead of at the worker's next poll: in a `--role all` process directly, and across
processes through the Unix sockets of `schedctl/store/wake.py`.

The poll interval is 30 s: without the wake-up only the first claim (at start) would happen within the test.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch import child_env
from sqlalchemy import select

from schedctl.store import open_store
from schedctl.store.migrate import upgrade
from schedctl.store.schema import job_runs

pytestmark = [pytest.mark.processes]

JOBS = """\
[jobs.tick]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
concurrency = "allow"
command = "true"
"""

SLACK = 1.0  # seconds: process scheduling on a shared 2-core machine; a poll would be 30 s


@pytest.mark.parametrize("roles", [("all",), ("scheduler", "worker")], ids=["role-all", "split"])
def test_runs_start_at_their_tick_not_at_the_next_poll(
    sqlite_url: str, tmp_path: Path, roles: tuple[str, ...]
) -> None:
    store = open_store(sqlite_url)
    upgrade(store)
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    env = child_env()
    log = (tmp_path / "serve.log").open("w")
    procs = []
    for role in roles:
        args = [
            sys.executable, "-m", "schedctl", "serve", "--role", role, "--db", sqlite_url, "--jobs", str(jobs),
            "--poll-interval", "30s", "--successful-history", "100",
        ]  # fmt: skip
        procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env))
    try:
        started: list[tuple[object, float]] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(started) < 4:
            time.sleep(0.2)
            with store.engine.connect() as conn:
                rows = conn.execute(
                    select(job_runs.c.scheduled_for, job_runs.c.started_at).where(
                        job_runs.c.started_at.is_not(None)
                    )
                ).all()
            started = [(r.scheduled_for, (r.started_at - r.scheduled_for).total_seconds()) for r in rows]
        assert len(started) >= 4, (tmp_path / "serve.log").read_text()
        late = [(at, lag) for at, lag in started if lag > SLACK]
        assert not late, late
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            assert proc.wait(20) == 0
        log.close()
        store.dispose()
