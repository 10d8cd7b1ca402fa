"""Issue 27: SIGTERM is obeyed at any point of start-up or take-over, not after it.

With a million jobs, parsing the job files takes 15-25 s and a first take-over a minute; a deploy's SIGTERM
waited for both, and a supervisor's grace is shorter. Real processes, real signals: the job counts here are
the smallest that keep each phase seconds long on a fast machine, so the signal surely lands inside it.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from launch import serve, until
from sqlalchemy import func, select

from schedctl.leader import lease
from schedctl.store.schema import job_runs

pytestmark = [pytest.mark.processes, pytest.mark.slow]


def _write_jobs(path: Path, count: int) -> None:
    with path.open("w") as fh:
        for i in range(count):
            fh.write(
                f'[jobs.j{i}]\nschedule = "{i % 60} * * * * *"\ntimezone = "UTC"\ncatch_up = "skip"\n'
                'command = "true"\n'
            )


def _bytes_read(proc: subprocess.Popen[bytes]) -> int:
    try:
        for line in Path(f"/proc/{proc.pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _stopped(proc: subprocess.Popen[bytes], timeout: float = 30) -> int:
    try:
        return proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_sigterm_while_the_job_files_are_parsed_stops_at_once(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    _write_jobs(jobs, 300_000)  # ~27 MB, 5 s to parse here; the imports before the load read ~11 MB
    size = jobs.stat().st_size
    log = tmp_path / "serve.log"
    proc = serve(
        "--role", "scheduler", "--db", f"sqlite:///{tmp_path / 'schedctl.db'}", "--migrate",
        "--jobs", str(jobs), log=log,
    )  # fmt: skip
    try:
        # Once it has read as many bytes as the file holds it is inside the load, whose parse is left: the
        # imports before it read far less.
        until(lambda: _bytes_read(proc) >= size or proc.poll() is not None, "the job file read", log)
        proc.send_signal(signal.SIGTERM)
    finally:
        code = _stopped(proc)
    text = log.read_text()
    assert code == 0, text
    assert "stopped while loading the job files" in text
    assert "serve starting" not in text and "Traceback" not in text


def test_sigterm_inside_a_take_over_releases_the_lease_and_the_next_leader_plans_every_job(
    db_url: str, store: Any, tmp_path: Path
) -> None:
    count = 60_000
    jobs = tmp_path / "jobs.toml"
    _write_jobs(jobs, count)

    def scheduler(name: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = tmp_path / f"{name}.log"
        proc = serve(
            "--role", "scheduler", "--db", db_url, "--jobs", str(jobs), "--identity", name, log=log
        )  # fmt: skip
        return proc, log

    first, first_log = scheduler("first")
    try:
        until(lambda: "acquired lease" in first_log.read_text(), "the first lease", first_log, timeout=120)
        first.send_signal(signal.SIGTERM)  # the take-over of 60,000 new jobs has just begun
    finally:
        code = _stopped(first)
    text = first_log.read_text()
    assert code == 0, text
    assert "took over" not in text, "the take-over ran to its end after SIGTERM"
    assert "released lease" in text and "Traceback" not in text
    released = lease.report(store)
    assert released.state is not None and released.state.holder == "first"
    assert released.state.expires_at <= released.db_now, "released, not left to lapse"

    second, second_log = scheduler("second")
    try:
        until(
            lambda: f"took over {count} jobs" in second_log.read_text(), "the second take-over", second_log,
            timeout=180,
        )  # fmt: skip

        def queued() -> int:
            with store.connect() as conn:
                return int(conn.execute(select(func.count()).select_from(job_runs)).scalar_one())

        until(
            lambda: queued() >= 1000, "ticks dispatched after the abandoned take-over", second_log, timeout=60
        )
        second.send_signal(signal.SIGTERM)
    finally:
        assert _stopped(second) == 0, second_log.read_text()
    # Each second's ticks are whole: 1,000 jobs share a second, and each tick of theirs is claimed once.
    with store.connect() as conn:
        rows = conn.execute(
            select(job_runs.c.scheduled_for, func.count()).group_by(job_runs.c.scheduled_for)
        ).all()
    assert rows and all(n == count // 60 for _, n in rows), rows[:5]
