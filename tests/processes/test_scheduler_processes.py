"""Real `schedctl serve --role scheduler` processes racing for the lease, killed and stopped with real signals.

Settings a loaded 2-core machine meets: a 3 s lease renewed every 0.5 s. The job fires every second with
catch_up = "all", so any tick lost in a takeover would show as a hole in the claimed ticks.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from launch import child_env, serve
from sqlalchemy import select

from schedctl.leader import lease
from schedctl.store import open_store
from schedctl.store.dialect import select_db_now
from schedctl.store.migrate import upgrade
from schedctl.store.schema import job_runs

pytestmark = [pytest.mark.processes, pytest.mark.slow]

LEASE, RENEW = 3.0, 0.5
SLACK = 1.5  # process scheduling on a shared 2-core machine

JOBS = """\
[jobs.tick]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "all"
max_catch_up = 100
concurrency = "allow"
command = "true"
"""


class Replica:
    def __init__(self, name: str, db_url: str, jobs: Path, logs: Path, skew: str | None = None) -> None:
        self.name = name
        self.log_path = logs / f"{name}.log"
        env = child_env()
        if skew:
            env["SCHEDCTL_CLOCK_SKEW"] = skew  # a testing aid: shifts this replica's wall clock only
        self.proc = serve(
            "--role", "scheduler", "--db", db_url, "--jobs", str(jobs),
            "--identity", name, "--lease-duration", f"{LEASE}s", "--renew-interval", f"{RENEW}s",
            log=self.log_path, env=env,
        )  # fmt: skip

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 15.0) -> int:
        return self.proc.wait(timeout)

    def log(self) -> str:
        return self.log_path.read_text()


@pytest.fixture
def cluster(db_url: str, tmp_path: Path) -> Iterator[Callable[..., Replica]]:
    store = open_store(db_url)
    upgrade(store)
    store.dispose()
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    started: list[Replica] = []

    def start(name: str, skew: str | None = None) -> Replica:
        replica = Replica(name, db_url, jobs, tmp_path, skew)
        started.append(replica)
        return replica

    yield start
    for replica in started:
        if replica.proc.poll() is None:
            replica.proc.kill()
        replica.wait()


def _until(predicate: Callable[[], Any], timeout: float, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"not within {timeout}s")


def _holder(store: Any) -> str | None:
    seen = lease.report(store, limit=0)
    state = seen.state
    if state is None or not state.held_at(seen.db_now):
        return None
    return state.holder


def _ticks(store: Any) -> list[tuple[datetime, str]]:
    query = select(job_runs.c.scheduled_for, job_runs.c.state).where(job_runs.c.job_id == "tick")
    with store.connect() as conn:
        return [(r[0], r[1]) for r in conn.execute(query.order_by(job_runs.c.scheduled_for))]


def _assert_no_holes(ticks: list[tuple[datetime, str]]) -> None:
    times = [t for t, _ in ticks]
    assert times, "nothing was claimed"
    holes = [(a, b) for a, b in zip(times, times[1:], strict=False) if b - a != timedelta(seconds=1)]
    assert holes == [], f"holes in the claimed ticks: {holes}"
    assert {state for _, state in ticks} == {"queued"}


def _assert_terms_do_not_overlap(store: Any) -> None:
    terms = sorted(lease.history(store, limit=50), key=lambda t: t.term)
    for earlier, later in zip(terms, terms[1:], strict=False):
        held_until = min(earlier.expires_at, earlier.ended_at or earlier.expires_at)
        assert later.acquired_at >= held_until, f"term {later.term} began while term {earlier.term} held"


def _logs(replicas: dict[str, Replica]) -> str:
    return "".join(f"\n--- {name}\n{r.log()}" for name, r in replicas.items())


def _new_holder(store: Any, old: str) -> str | None:
    holder = _holder(store)
    return holder if holder not in (None, old) else None


def test_three_replicas_one_leader_no_tick_lost_across_kill_and_stop(db_url: str, cluster: Any) -> None:
    store = open_store(db_url)
    replicas = {name: cluster(name) for name in ("r1", "r2", "r3")}
    first = _until(lambda: _holder(store), 20)
    time.sleep(2.5)

    replicas[first].signal(signal.SIGKILL)
    killed_at = time.monotonic()
    second = _until(lambda: _new_holder(store, first), LEASE + RENEW + SLACK + 2)
    kill_takeover = time.monotonic() - killed_at
    assert kill_takeover <= LEASE + RENEW + SLACK, (
        f"takeover after SIGKILL took {kill_takeover:.2f}s" + _logs(replicas)
    )
    time.sleep(2.0)

    replicas[second].signal(signal.SIGTERM)
    stopped_at = time.monotonic()
    third = _until(lambda: _new_holder(store, second), RENEW * 1.5 + SLACK + 2)
    term_takeover = time.monotonic() - stopped_at
    assert term_takeover <= RENEW * 1.5 + SLACK, f"takeover after SIGTERM took {term_takeover:.2f}s" + _logs(
        replicas
    )
    assert replicas[second].wait() == 0
    time.sleep(2.0)

    replicas[third].signal(signal.SIGTERM)
    assert replicas[third].wait() == 0
    ticks = _ticks(store)
    _assert_no_holes(ticks)
    assert ticks[-1][0] - ticks[0][0] >= timedelta(seconds=6)
    _assert_terms_do_not_overlap(store)
    for name in (second, third):
        text = replicas[name].log()
        assert "Traceback" not in text
        assert text.count("became leader") == 1
    print(f"takeover after SIGKILL {kill_takeover:.2f}s, after SIGTERM {term_takeover:.2f}s")
    store.dispose()


def test_a_replica_whose_clock_is_ten_minutes_fast_neither_steals_nor_dispatches_early(
    db_url: str, cluster: Any, tmp_path: Path
) -> None:
    store = open_store(db_url)
    honest = cluster("honest")
    _until(lambda: _holder(store) == "honest", 20)
    fast = cluster("fast", skew="+10m")

    def no_future_ticks() -> None:
        with store.connect() as conn:
            db_now = select_db_now(conn)
        latest = _ticks(store)
        if latest:
            assert latest[-1][0] <= db_now + timedelta(seconds=0.05), "a tick was dispatched before its time"

    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:  # the fast replica is up and renewing, and must not steal the lease
        assert _holder(store) == "honest"
        no_future_ticks()
        time.sleep(0.1)

    honest.signal(signal.SIGTERM)
    assert honest.wait() == 0
    _until(lambda: _holder(store) == "fast", RENEW * 1.5 + SLACK)
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        no_future_ticks()
        time.sleep(0.1)

    (tmp_path / "jobs.toml").write_text("[jobs.tick]\nschedule = 'not cron'\n")
    fast.signal(signal.SIGHUP)
    count = len(_ticks(store))
    _until(lambda: len(_ticks(store)) >= count + 2, 5)  # a bad file on reload keeps the old jobs
    fast.signal(signal.SIGTERM)
    assert fast.wait() == 0
    _assert_no_holes(_ticks(store))
    text = fast.log()
    assert text.count("job files not reloaded") == 1 and "Traceback" not in text
    store.dispose()


def _serve(*args: str) -> subprocess.Popen[str]:
    env = child_env()
    cmd = [sys.executable, "-m", "schedctl", "serve", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def test_an_unreachable_database_at_start_up_is_one_line_and_a_retry(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    proc = _serve(
        "--role", "scheduler", "--db", f"postgresql://u:secret@127.0.0.1:{port}/x", "--jobs", str(jobs)
    )
    time.sleep(6.0)  # several retries
    assert proc.poll() is None, "serve gave up instead of retrying"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert out.count("database unavailable") == 1 and "Traceback" not in out
    assert "secret" not in out


def test_serve_refuses_a_database_without_the_schema_and_says_what_to_run(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    proc = _serve("--role", "scheduler", "--db", f"sqlite:///{tmp_path / 'empty.db'}", "--jobs", str(jobs))
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "schedctl db upgrade" in out and "Traceback" not in out
