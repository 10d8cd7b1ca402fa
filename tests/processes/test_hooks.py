"""on_failure / on_success: a real worker process runs the hook after the outcome is recorded, with the outcome
in the hook's environment (the replacement for cron's mail), on every backend."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from schedctl.jobs.job import CatchUp, Concurrency, Job
from schedctl.store import claims, open_store
from schedctl.store.migrate import upgrade
from schedctl.store.schema import job_runs

pytestmark = pytest.mark.processes

HOOK = (
    "import json, os, sys; "
    "keys = ['SCHEDCTL_JOB_ID', 'SCHEDCTL_SCHEDULED_FOR', 'SCHEDCTL_ATTEMPT', 'SCHEDCTL_STATE', "
    "'SCHEDCTL_EXIT_STATUS', 'SCHEDCTL_OUTPUT_TAIL', 'MAILTO', 'SCHEDCTL_DATABASE_URL']; "
    "open(sys.argv[1], 'a').write(json.dumps({k: os.environ.get(k) for k in keys}) + '\\n')"
)


def _job(job_id: str, command: str, ledger: Path, **kw: object) -> Job:
    hook = (sys.executable, "-c", HOOK, str(ledger))
    return Job(
        id=job_id,
        schedule="* * * * *",
        timezone="UTC",
        catch_up=CatchUp.SKIP,
        command=command,
        concurrency=Concurrency.ALLOW,
        env={"MAILTO": "ops@example.com"},
        on_failure=hook,
        on_success=hook,
        **kw,  # type: ignore[arg-type]
    )


def test_hooks_see_the_outcome_and_only_the_jobs_environment(db_url: str, tmp_path: Path) -> None:
    store = open_store(db_url)
    upgrade(store)
    ledger = tmp_path / "hooks.jsonl"
    at = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    failing = _job("fails", "echo 'disk full' >&2; exit 3", ledger)
    passing = _job("passes", "echo all good", ledger)
    quiet = Job(id="quiet", schedule="* * * * *", timezone="UTC", catch_up=CatchUp.SKIP, command="exit 1")
    with store.begin() as conn:
        for job in (failing, passing, quiet):
            claims.queue_runs(conn, job, [at])
    log = open(tmp_path / "worker.log", "ab")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "schedctl",
            "serve",
            "--role",
            "worker",
            "--db",
            db_url,
            "--poll-interval",
            "0.2",
            "--log-format",
            "json",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "SCHEDCTL_DATABASE_URL": db_url},
    )
    log.close()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lines = ledger.read_text().splitlines() if ledger.exists() else []
            if len(lines) >= 2:
                break
            time.sleep(0.1)
        time.sleep(0.5)  # a third hook line, if there wrongly were one, would have come by now
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
    with store.begin() as conn:
        states = dict(conn.execute(select(job_runs.c.job_id, job_runs.c.state)).all())
    store.dispose()
    assert states == {"fails": "failed", "passes": "succeeded", "quiet": "failed"}
    seen = {r["SCHEDCTL_JOB_ID"]: r for r in map(json.loads, ledger.read_text().splitlines())}
    assert set(seen) == {"fails", "passes"}, "a job without hooks runs none; each hook runs once"
    assert seen["fails"]["SCHEDCTL_STATE"] == "failed"
    assert seen["fails"]["SCHEDCTL_EXIT_STATUS"] == "3"
    assert "disk full" in seen["fails"]["SCHEDCTL_OUTPUT_TAIL"]
    assert seen["fails"]["SCHEDCTL_SCHEDULED_FOR"] == at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert seen["fails"]["SCHEDCTL_ATTEMPT"] == "1"
    assert seen["passes"]["SCHEDCTL_STATE"] == "succeeded"
    assert seen["passes"]["SCHEDCTL_EXIT_STATUS"] == "0"
    assert "all good" in seen["passes"]["SCHEDCTL_OUTPUT_TAIL"]
    for record in seen.values():
        assert record["MAILTO"] == "ops@example.com"
        assert record["SCHEDCTL_DATABASE_URL"] is None, "the worker's environment must never reach a hook"
