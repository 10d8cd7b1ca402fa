"""`serve --log-output` puts each run's output in the log; `schedctl top` runs live in a terminal until `q`."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch import child_env, serve

pytestmark = [pytest.mark.processes, pytest.mark.slow]

JOBS = """
[jobs.hello]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
command = "echo hello from $SCHEDCTL_JOB_ID"
"""


def test_log_output_logs_each_runs_output_tail_when_it_ends(tmp_path: Path):
    (tmp_path / "jobs.toml").write_text(JOBS)
    url = f"sqlite:///{tmp_path / 'schedctl.db'}"
    log = tmp_path / "serve.log"
    proc = serve(
        "--migrate", "--jobs", "jobs.toml", "--db", url, "--log-output", "--log-format", "json",
        "--poll-interval", "0.2",
        log=log, cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30  # a run every second: the first one within a few on a loaded machine
        found = []
        while time.monotonic() < deadline and not found:
            time.sleep(0.2)
            events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
            found = [e for e in events if e.get("event") == "run_output"]
        assert found, log.read_text()
        assert found[0]["output_tail"] == "hello from hello\n"
        assert found[0]["message"].endswith("\nhello from hello")
        assert found[0]["job_id"] == "hello" and found[0]["scheduled_for"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0


def test_top_runs_live_in_a_terminal_until_q(tmp_path: Path):
    from schedctl.store import open_store
    from schedctl.store.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'schedctl.db'}"
    store = open_store(url)
    upgrade(store)
    store.dispose()
    # A pseudo-terminal for the child's stdin and stdout (os.openpty, not pty.fork: no fork of this
    # multi-threaded test process).
    fd, child_tty = os.openpty()
    env = {**child_env(), "TERM": "xterm", "COLUMNS": "80", "LINES": "24"}  # the smallest usual terminal
    proc = subprocess.Popen(
        [sys.executable, "-m", "schedctl", "top", "--db", url, "--interval", "0.5"],
        stdin=child_tty,
        stdout=child_tty,
        stderr=child_tty,
        env=env,
        start_new_session=True,
    )
    os.close(child_tty)
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and seen.count(b"workers: ") < 2:  # two frames drawn
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(fd, 65536)
                except OSError:
                    break
        assert seen.count(b"workers: ") >= 2, seen[-2000:]
        assert b"q quit" in seen, seen[-2000:]  # the key hints (issue 30)
        os.write(fd, b"q")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    os.read(fd, 65536)
                except OSError:
                    pass
        assert proc.wait(1) == 0, "top did not quit on q"
        assert b"\x1b[?1049h" in seen  # the alternate screen: full-screen, and the shell's screen comes back
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(fd)
