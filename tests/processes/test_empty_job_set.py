"""Issue 16 item 10: job files that define no jobs, while the database knows some, do not stop every job.

A truncated deploy used to start a scheduler with 0 jobs, silently. Now `serve` refuses to start (exit 78,
one line) and SIGHUP keeps the old set, unless --allow-empty says the empty set is meant.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from launch import serve, until

pytestmark = [pytest.mark.processes, pytest.mark.slow]

JOBS = '[jobs.tick]\nschedule = "* * * * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "true"\n'


def _serve(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    log = tmp_path / f"serve-{time.monotonic_ns()}.log"
    proc = serve(
        "--migrate", "--db", "sqlite:///schedctl.db", "--jobs", "jobs.toml", "--poll-interval", "200ms",
        "--lease-duration", "4s", "--renew-interval", "1s", *extra,
        log=log, stdout=subprocess.DEVNULL, cwd=tmp_path,
    )  # fmt: skip
    return proc, log


def _succeeded(tmp_path: Path) -> int:
    try:
        with sqlite3.connect(tmp_path / "schedctl.db", timeout=10) as conn:
            return int(conn.execute("SELECT count(*) FROM job_runs WHERE state = 'succeeded'").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def _stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def test_an_emptied_job_file_is_refused_at_start_and_on_sighup(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    proc, log = _serve(tmp_path)
    try:
        until(lambda: _succeeded(tmp_path) >= 1, "a first run", log)
        jobs.write_text("")  # the truncated deploy
        proc.send_signal(signal.SIGHUP)
        until(lambda: "job files not reloaded" in log.read_text(), "the refused reload", log)
        before = _succeeded(tmp_path)
        until(lambda: _succeeded(tmp_path) >= before + 2, "runs after the refused reload", log)
    finally:
        assert _stop(proc) == 0
    assert "defines no jobs, but the database knows 1" in log.read_text()

    proc, log = _serve(tmp_path)
    code = proc.wait(timeout=30)
    lines = log.read_text().strip().splitlines()
    assert code == 78
    assert lines[-1] == (
        "jobs.toml: defines no jobs, but the database knows 1: refusing to stop them all (a truncated file?); "
        "pass --allow-empty if that is meant"
    )


def test_allow_empty_starts_with_no_jobs_and_says_so(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    proc, log = _serve(tmp_path)
    try:
        until(lambda: _succeeded(tmp_path) >= 1, "a first run", log)
    finally:
        _stop(proc)
    jobs.write_text("")
    proc, log = _serve(tmp_path, "--allow-empty")
    try:
        until(lambda: "none will be dispatched (--allow-empty)" in log.read_text(), "the warning", log)
        assert proc.poll() is None
    finally:
        assert _stop(proc) == 0
