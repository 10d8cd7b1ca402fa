"""`schedctl workers`, the "no worker can run this" verdicts and `top --once` against real worker processes.

Three `serve --role worker` processes on every backend: one stays, one is SIGKILLed (-> stale), one is
SIGTERMed (-> stopped, with why); a job whose labels no one has gets its own verdict and fails
`status --check`; once the last worker stops, "no worker alive at all". Settings a loaded 2-core machine
meets: heartbeat 0.3 s, stale after 1.5 s (the registry row is stale after 1.5 s of silence), poll 0.2 s.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from schedctl.jobs.job import CatchUp, Job
from schedctl.leader.lease import acquire_or_renew
from schedctl.store import claims, open_store
from schedctl.store.migrate import upgrade
from schedctl.store.schema import job_runs

pytestmark = [pytest.mark.processes, pytest.mark.slow]

FAST = ["--poll-interval", "0.2", "--heartbeat-interval", "0.3", "--stale-after", "1.5"]


def schedctl(url: str, *args: str) -> Any:
    """A one-shot command in this process (click's runner): the servers are the real processes here."""
    from click.testing import CliRunner

    from schedctl.cli import cli

    result = CliRunner().invoke(cli, [*args, "--db", url])
    result.returncode = result.exit_code
    return result


def workers_json(url: str) -> dict[str, dict[str, Any]]:
    done = schedctl(url, "workers", "--json")
    assert done.returncode == 0, done.stderr
    return {w["identity"]: w for w in json.loads(done.stdout)}


def wait_for(what: str, predicate: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def cluster(db_url: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    store = open_store(db_url)
    upgrade(store)
    procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"{name}.log", "ab")
        argv = [sys.executable, "-m", "schedctl", "serve", "--role", "worker", "--db", db_url]
        proc = subprocess.Popen(
            [*argv, "--identity", name, *FAST, *args], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        procs[name] = proc
        return proc

    try:
        yield {"url": db_url, "store": store, "start": start, "procs": procs}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        store.dispose()


def test_alive_killed_stopped_and_labels_no_one_has(cluster):
    url, store, start = cluster["url"], cluster["store"], cluster["start"]
    assert acquire_or_renew(store, "cron", "sched-1", 300.0).held  # a leader: status judges the workers next
    start("w-stays", "--label", "pool=web")
    killed = start("w-killed")
    termed = start("w-termed", "--label", "pool=web", "--label", "zone=a")
    wait_for(
        "three alive workers",
        lambda: {w["state"] for w in workers_json(url).values()} == {"alive"} and len(workers_json(url)) == 3,
    )

    # A job only a pool=batch worker may run, queued for a while (by the database's clock).
    batch = Job(
        id="nightly",
        schedule="* * * * *",
        timezone="UTC",
        catch_up=CatchUp.SKIP,
        command="true",
        labels={"pool": "batch"},
    )
    at = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=12)
    with store.begin() as conn:
        claims.queue_runs(conn, batch, [at])
        conn.execute(update(job_runs).values(queued_at=at))

    killed.send_signal(signal.SIGKILL)
    killed.wait(10)
    termed.send_signal(signal.SIGTERM)
    assert termed.wait(15) == 0

    def settled() -> dict[str, dict[str, Any]] | None:
        found = workers_json(url)
        states = {k: w["state"] for k, w in found.items()}
        return found if states == {"w-stays": "alive", "w-killed": "stale", "w-termed": "stopped"} else None

    found = wait_for("alive / stale / stopped", settled)
    assert found["w-termed"]["stop_reason"] == "shutdown (SIGTERM or SIGINT)"
    assert found["w-stays"]["labels"] == {"pool": "web"} and found["w-stays"]["slots"] == 4
    assert found["w-stays"]["last_seen_seconds"] < 1.5
    # Idle, it still refreshes its row every heartbeat (0.3 s): seen again within a second.
    before = found["w-stays"]["last_seen_at"]
    wait_for("an idle refresh", lambda: workers_json(url)["w-stays"]["last_seen_at"] > before, timeout=5)
    assert found["w-killed"]["last_seen_seconds"] >= 1.5

    human = schedctl(url, "workers")
    assert human.returncode == 0
    assert "database: " in human.stderr and "***" not in human.stderr
    lines = {line.split()[0]: line.split()[1] for line in human.stdout.splitlines()[1:]}
    assert lines == {"w-stays": "alive", "w-killed": "stale", "w-termed": "stopped"}

    status = schedctl(url, "status", "nightly", "--check")
    assert status.returncode == 1, status.stdout + status.stderr
    assert (
        "nightly: queued 12 min: no alive worker has labels pool=batch (1 worker alive: w-stays (pool=web))"
        in (status.stdout)
    )
    every = schedctl(url, "status", "--check", "--json")
    assert every.returncode == 1
    assert [s["verdict_code"] for s in json.loads(every.stdout)] == ["no_worker"]

    frame = schedctl(url, "top", "--once")
    assert frame.returncode == 0, frame.stderr
    assert "workers: 1 alive, 1 stale, 1 stopped" in frame.stdout
    assert "1 with no alive worker that may take them" in frame.stdout

    cluster["procs"]["w-stays"].send_signal(signal.SIGTERM)
    assert cluster["procs"]["w-stays"].wait(15) == 0
    status = schedctl(url, "status", "nightly")
    assert "no worker alive at all (3 stale or stopped;" in status.stdout, status.stdout
