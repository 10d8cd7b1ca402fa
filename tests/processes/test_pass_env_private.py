"""Issue 16 item 5: values a job gets through ``pass_env`` never reach the database; ``env`` values do.

``env`` is part of the job's definition, so every run row's snapshot carries it (README: "Where env values
end up"). ``pass_env`` names variables of the worker's own environment: only the names are stored.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch import child_env, serve

pytestmark = [pytest.mark.processes, pytest.mark.slow]

SECRET = "i16-pass-env-value-5d2c"
JOBS = """\
[jobs.uses-token]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
pass_env = ["I16_TOKEN"]
env = { VISIBLE = "in-the-definition" }
command = 'case "$I16_TOKEN" in i16-pass-env-*) exit 0 ;; *) exit 1 ;; esac'
"""


def _everything_stored(db: Path) -> str:
    """Every value of every table, as text."""
    with sqlite3.connect(db, timeout=10) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(repr(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"'))


def _succeeded(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=10) as conn:
            return int(conn.execute("SELECT count(*) FROM job_runs WHERE state = 'succeeded'").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def test_pass_env_values_stay_out_of_the_database(tmp_path: Path) -> None:
    (tmp_path / "jobs.toml").write_text(JOBS)
    db = tmp_path / "schedctl.db"
    env = child_env(I16_TOKEN=SECRET)
    log = tmp_path / "serve.log"
    proc = serve(
        "--migrate", "--db", f"sqlite:///{db}", "--jobs", "jobs.toml", "--poll-interval", "200ms",
        "--log-level", "debug",
        log=log, stdout=subprocess.DEVNULL, cwd=tmp_path, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while _succeeded(db) < 2:  # succeeded: the job did get the value
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    stored = _everything_stored(db)
    assert SECRET not in stored
    assert "I16_TOKEN" in stored and "in-the-definition" in stored  # names and env values: the definition
    listed = subprocess.run(
        [sys.executable, "-m", "schedctl", "runs", "--json", "--db", f"sqlite:///{db}"],
        capture_output=True, text=True, timeout=30, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert listed.returncode == 0 and SECRET not in listed.stdout
    assert SECRET not in log.read_text()
