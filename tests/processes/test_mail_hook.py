"""The example mail hook, run by a real worker: a failed run's output reaches the job's MAILTO, as cron mailed it."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from launch import serve

pytestmark = [pytest.mark.processes, pytest.mark.slow]

HOOK = Path(__file__).resolve().parents[2] / "examples" / "hooks" / "mail-on-failure"


def test_a_failed_run_is_mailed_to_mailto(tmp_path: Path) -> None:
    sendmail = tmp_path / "sendmail"
    sendmail.write_text(
        f"#!/bin/sh\ncat > {tmp_path}/message.tmp && mv {tmp_path}/message.tmp {tmp_path}/message\n"
    )
    sendmail.chmod(0o755)
    (tmp_path / "jobs.toml").write_text(
        f"""\
[jobs.nightly-backup]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
command = "echo 'pg_dump: connection refused' >&2; exit 3"
on_failure = "{HOOK}"

[jobs.nightly-backup.env]
MAILTO = "ops@example.com"
SENDMAIL = "{sendmail}"
"""
    )
    log = tmp_path / "serve.log"
    proc = serve(
        "--role", "all", "--migrate", "--db", f"sqlite:///{tmp_path / 'schedctl.db'}",
        "--jobs", str(tmp_path / "jobs.toml"), "--poll-interval", "200ms",
        log=log, stdout=subprocess.DEVNULL, cwd=tmp_path,
    )  # fmt: skip
    message = tmp_path / "message"
    try:
        deadline = time.monotonic() + 30
        while not message.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert message.exists(), log.read_text()[-3000:]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    headers, _, body = message.read_text().partition("\n\n")
    assert "To: ops@example.com" in headers.splitlines()
    assert "nightly-backup: failed, exit status 3" in headers
    assert "pg_dump: connection refused" in body
    assert "Scheduled for: 20" in body
