"""A real `schedctl serve --role all --metrics-port P`: scrape /metrics, probe /livez and /readyz, read its logs."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from launch import free_port, serve
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.processes, pytest.mark.slow]

JOBS = """\
[jobs.tick]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
command = "true"

[jobs.broken]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
command = "exit 3"

[jobs.slow]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
concurrency = "forbid"
command = "sleep 3"
"""

CONTRACT = (
    "schedctl_leader",
    "schedctl_lease_term",
    "schedctl_lease_renewals",
    "schedctl_lease_renewal_failures",
    "schedctl_ticks_dispatched",
    "schedctl_ticks_missed",
    "schedctl_ticks_refused",
    "schedctl_runs_finished",
    "schedctl_run_duration_seconds",
    "schedctl_queue_depth",
    "schedctl_oldest_queued_age_seconds",
    "schedctl_worker_active_runs",
    "schedctl_last_success_timestamp_seconds",
)


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Scrape:
    def __init__(self, text: str) -> None:
        self.families = {f.name: f for f in text_string_to_metric_families(text)}

    def value(self, sample: str, **labels: str) -> float | None:
        for family in self.families.values():
            for s in family.samples:
                if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                    return float(s.value)
        return None

    def sample(self, sample: str, **labels: str) -> float:
        """The value of a sample that must be exported (a family without it fails, never reads as 0)."""
        value = self.value(sample, **labels)
        assert value is not None, f"{sample}{labels or ''} has no sample"
        return value

    def total(self, sample: str, **labels: str) -> float:
        return sum(
            float(s.value)
            for family in self.families.values()
            for s in family.samples
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
        )


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    (tmp_path / "jobs.toml").write_text(JOBS)
    port = free_port()
    log_path = tmp_path / "serve.log"
    proc = serve(
        "--role", "all", "--migrate", "--db", f"sqlite:///{tmp_path / 'schedctl.db'}",
        "--jobs", str(tmp_path / "jobs.toml"), "--metrics-port", str(port), "--log-format", "json",
        "--log-level", "debug", "--lease-duration", "4s", "--renew-interval", "1s", "--poll-interval", "200ms",
        "--slots", "4",
        log=log_path, stdout=subprocess.DEVNULL, cwd=tmp_path,
    )  # fmt: skip
    try:
        yield proc, port, log_path
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_for(
    check: Callable[[], Any], timeout: float, what: str, proc: subprocess.Popen[str], log: Path
) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(
                f"serve exited with {proc.returncode} while waiting for {what}:\n{log.read_text()[-3000:]}"
            )
        try:
            last = check()
        except (OSError, urllib.error.URLError):
            last = None
        if last:
            return last
        time.sleep(0.25)
    pytest.fail(f"timed out waiting for {what} (last: {last!r}):\n{log.read_text()[-3000:]}")


def test_serve_exports_every_metric_with_sensible_values(
    serving: tuple[subprocess.Popen[str], int, Path],
) -> None:
    proc, port, log = serving

    def ready_scrape() -> Scrape | None:
        status, body = _get(port, "/metrics")
        scrape = Scrape(body) if status == 200 else None
        if scrape is None:
            return None
        done = (
            scrape.total("schedctl_runs_finished_total", job_id="tick", state="succeeded") >= 2
            and scrape.total("schedctl_runs_finished_total", job_id="broken", state="failed") >= 1
            and scrape.total("schedctl_ticks_missed_total", job_id="slow") >= 1
        )
        return scrape if done else None

    scrape = _wait_for(ready_scrape, 30, "runs to finish and a forbid tick to be skipped", proc, log)

    missing = [name for name in CONTRACT if name not in scrape.families]
    assert missing == [], f"not exported: {missing}"
    assert scrape.value("schedctl_leader") == 1
    assert scrape.sample("schedctl_lease_term") >= 1
    assert scrape.total("schedctl_lease_renewals_total") >= 1
    assert scrape.total("schedctl_lease_renewal_failures_total") == 0
    assert scrape.total("schedctl_ticks_dispatched_total", job_id="tick") > 0
    assert scrape.total("schedctl_ticks_missed_total", job_id="slow", reason="concurrency") >= 1
    assert scrape.total("schedctl_ticks_refused_total") == 0
    assert scrape.total("schedctl_run_duration_seconds_count", job_id="tick") >= 2
    assert 0 <= scrape.total("schedctl_run_duration_seconds_sum", job_id="tick") < 30
    last_success = scrape.value("schedctl_last_success_timestamp_seconds", job_id="tick")
    assert last_success is not None and abs(time.time() - last_success) < 60
    assert scrape.value("schedctl_last_success_timestamp_seconds", job_id="broken") is None
    assert 0 <= scrape.sample("schedctl_worker_active_runs") <= 4
    depth = scrape.sample("schedctl_queue_depth")
    assert depth >= 0 and depth == int(depth)
    age = scrape.sample("schedctl_oldest_queued_age_seconds")
    assert 0 <= age < 60  # jobs every second with 4 slots: nothing waits for long
    assert scrape.value("process_resident_memory_bytes")

    assert _get(port, "/livez")[0] == 200
    status, body = _get(port, "/readyz")
    assert status == 200, body

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0

    lines = [line for line in log.read_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    for entry in entries:
        assert {"ts", "level", "logger", "event", "message"} <= set(entry), entry
    about_runs = [e for e in entries if str(e.get("event") or "").startswith("run_")]
    assert about_runs, "no run_* events logged"
    for entry in about_runs:
        assert {"job_id", "scheduled_for", "attempt"} <= set(entry), entry


def test_probes_answer_while_the_database_is_down(tmp_path: Path) -> None:
    """Live (the process is fine) but not ready: Kubernetes must stop routing, not restart it in a loop."""
    port = free_port()
    log = tmp_path / "serve.log"
    proc = serve(
        "--role", "worker", "--db", "postgresql://schedctl:hunter2@127.0.0.1:1/nothing",
        "--metrics-port", str(port), "--log-format", "json",
        log=log, stdout=subprocess.DEVNULL, cwd=tmp_path,
    )  # fmt: skip
    try:
        status = _wait_for(
            lambda: _get(port, "/livez")[0], 15, "/livez while the database is down", proc, log
        )
        assert status == 200
        ready, body = _get(port, "/readyz")
        assert ready == 503
        assert "hunter2" not in body
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    assert code == 0
    assert "hunter2" not in log.read_text()
