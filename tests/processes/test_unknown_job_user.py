"""Issue 16 item 18: --run-as-job-user and a job naming a user this host does not have.

Said at start and on every reload, one line per unknown user; the runs of those jobs fail with that reason
(and the other jobs run).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from launch import serve, until

pytestmark = [
    pytest.mark.processes,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="--run-as-job-user needs root"),
]

GHOST = "i16-no-such-user"
JOBS = f"""\
[jobs.ghost]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
user = "{GHOST}"
command = "true"

[jobs.ghost-too]
schedule = "0 1 * * *"
timezone = "UTC"
catch_up = "skip"
user = "{GHOST}"
command = "true"

[jobs.fine]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
user = "root"
command = "true"
"""


def _runs(tmp_path: Path, job_id: str) -> list[tuple[str, str | None]]:
    try:
        with sqlite3.connect(tmp_path / "schedctl.db", timeout=10) as conn:
            rows = conn.execute(
                "SELECT state, error FROM job_runs WHERE job_id = ? AND state IN ('succeeded', 'failed')",
                (job_id,),
            ).fetchall()
    except sqlite3.OperationalError:
        return []
    return [(str(state), detail) for state, detail in rows]


def _unknown_user_lines(log: Path) -> list[dict[str, object]]:
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return [e for e in entries if e.get("event") == "job_user_unknown"]


def test_unknown_users_are_named_at_start_and_reload_and_their_runs_fail_saying_why(tmp_path: Path) -> None:
    (tmp_path / "jobs.toml").write_text(JOBS)
    log = tmp_path / "serve.log"
    proc = serve(
        "--migrate", "--db", "sqlite:///schedctl.db", "--jobs", "jobs.toml", "--run-as-job-user",
        "--log-format", "json", "--poll-interval", "200ms",
        log=log, stdout=subprocess.DEVNULL, cwd=tmp_path,
    )  # fmt: skip
    try:
        until(lambda: len(_unknown_user_lines(log)) == 1, "the start-up line", log)
        (line,) = _unknown_user_lines(log)
        assert line["level"] == "error" and line["user"] == GHOST
        assert line["message"] == (
            f"user '{GHOST}' does not exist on this host (--run-as-job-user): not run; 2 job(s) name it: "
            "ghost, ghost-too"
        )
        until(lambda: bool(_runs(tmp_path, "ghost")) and bool(_runs(tmp_path, "fine")), "runs", log)
        state, detail = _runs(tmp_path, "ghost")[0]
        assert state == "failed" and f"user '{GHOST}' does not exist on this host" in (detail or "")
        assert all(state == "succeeded" for state, _ in _runs(tmp_path, "fine"))
        proc.send_signal(signal.SIGHUP)
        until(lambda: len(_unknown_user_lines(log)) == 2, "the line again on reload", log)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
