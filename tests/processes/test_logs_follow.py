"""`schedctl logs -f` against a real `serve --role all` (issue 30): a job printing a line a second is followed
on a terminal (a pty), the first line arrives while the run still runs, the job's control characters arrive
escaped, and the follower exits 0 when the run ends; afterwards `logs -f TICK` of the ended run prints its
whole output, as stored, and exits at once."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from launch import SCHEDCTL, child_env, serve

from schedctl.store import open_store
from schedctl.store.runs import list_runs

pytestmark = [pytest.mark.processes, pytest.mark.slow]

JOBS = r"""
[jobs.ticker]
schedule = "0 0 1 1 *"
timezone = "UTC"
catch_up = "skip"
command = "for i in 1 2 3 4 5 6 7 8; do printf 'line %s \u001b]0;owned\u0007\\n' $i; sleep 1; done"
"""
LINE = "line {} \x1b]0;owned\x07\n"


def _cli(*args: str, db_url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SCHEDCTL, *args, "--db", db_url], capture_output=True, text=True, timeout=60, env=child_env()
    )


def _state(db_url: str) -> str:
    store = open_store(db_url)
    try:
        return list_runs(store, "ticker")[0].state
    finally:
        store.dispose()


def test_logs_follow_shows_output_while_the_run_runs_and_ends_with_it(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "jobs.toml").write_text(JOBS)
    log = tmp_path / "serve.log"
    assert _cli("db", "upgrade", db_url=db_url).returncode == 0
    proc = serve(
        "--role", "all", "--db", db_url, "--jobs", str(tmp_path / "jobs.toml"),
        "--poll-interval", "200ms", "--output-interval", "200ms",
        log=log, cwd=tmp_path,
    )  # fmt: skip
    follower: subprocess.Popen[bytes] | None = None
    master, slave = os.openpty()
    try:
        queued = _cli("run", "ticker", "--jobs", str(tmp_path / "jobs.toml"), db_url=db_url)
        assert queued.returncode == 0, queued.stderr
        follower = subprocess.Popen(
            [*SCHEDCTL, "logs", "-f", "ticker", "--db", db_url],
            stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, env=child_env(),
        )  # fmt: skip
        os.close(slave)
        seen, first_while = b"", None
        deadline = time.monotonic() + 60  # the run takes 7 s; 60 s for start-up on a loaded machine
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the follower closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
                if first_while is None and b"line 1" in seen:
                    first_while = _state(db_url)
            elif follower.poll() is not None:
                break
        code = follower.wait(timeout=30)
        err = follower.stderr.read().decode() if follower.stderr else ""
    finally:
        if follower is not None and follower.poll() is None:
            follower.kill()
            follower.wait(10)
        if follower is not None and follower.stderr is not None:
            follower.stderr.close()
        os.close(master)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    text = seen.decode().replace("\r\n", "\n")
    assert first_while == "running", (first_while, text, log.read_text()[-3000:])
    # Each line once, in order, the terminal title sequence escaped (a job user's text, a root's terminal).
    assert text == "".join(f"line {i} \\x1b]0;owned\\x07\n" for i in range(1, 9)), text
    assert code == 0, err
    lines = err.splitlines()
    assert (
        lines[0].startswith("# ticker ")
        and lines[0].endswith(": queued, following (Ctrl-C stops)")
        or (lines[0].endswith(": running, following (Ctrl-C stops)"))
    ), err
    assert lines[-1].endswith("attempt 1: succeeded, exit status 0"), err
    assert _state(db_url) == "succeeded"

    # The ended run, by its tick, in a pipe: the whole output as stored, and exit at once.
    tick = lines[-1].split()[2]
    again = subprocess.run(
        [*SCHEDCTL, "logs", "--follow", "ticker", tick, "--db", db_url],
        capture_output=True, text=True, timeout=60, env=child_env(),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout == "".join(LINE.format(i) for i in range(1, 9))
    assert again.stderr.splitlines() == [lines[-1]]


def test_ctrl_c_stops_following_without_a_traceback_and_leaves_the_run_alone(tmp_path: Path) -> None:
    from schedctl.jobs.job import CatchUp, Job
    from schedctl.store import claims
    from schedctl.store.migrate import upgrade

    db_url = f"sqlite:///{tmp_path / 'schedctl.db'}"
    store = open_store(db_url)
    try:
        upgrade(store)
        with store.begin() as conn:
            job = Job(id="ticker", schedule="* * * * *", timezone="UTC", catch_up=CatchUp.SKIP, command="x")
            claims.queue_runs(conn, job, [datetime(2026, 3, 1, tzinfo=UTC)])
            claims.claim(conn, "w1", 1, [""], 60.0)  # running, held by a worker that is not here
    finally:
        store.dispose()
    follower = subprocess.Popen(
        [*SCHEDCTL, "logs", "-f", "ticker", "--db", db_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(),
        # As at a terminal: a suite started in the background (`cmd &` without job control) ignores SIGINT,
        # every child inherits that, and Python then installs no KeyboardInterrupt handler.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        assert follower.stderr is not None
        ready, _, _ = select.select([follower.stderr], [], [], 60)
        assert ready, "logs -f said nothing"
        first = follower.stderr.readline().decode()
        assert first.endswith(": running, following (Ctrl-C stops)\n"), first
        follower.send_signal(signal.SIGINT)
        out, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate(timeout=10)
    assert follower.returncode == 130, err
    assert "Traceback" not in err.decode() and out == b""
    assert _state(db_url) == "running"
