"""Issue 26, worker resources: a worker out of file descriptors, with a full temporary folder, or at its
process limit. In each, the run that cannot start fails with the reason in one line (stored on the run and on
the log line), the worker survives, and other runs proceed.

Real processes with real limits: ``prlimit`` sets the worker's RLIMIT_NOFILE and RLIMIT_NPROC, and a tmpfs
mounted in a private mount namespace (``unshare -m``) is the worker's TMPDIR, filled from outside through
``/proc/PID/root``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from launch import SCHEDCTL, serve, until

pytestmark = [
    pytest.mark.processes,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit (util-linux)"),
]


def _jobs(count: int, command: str, **extra: str) -> str:
    fields = "".join(f"{key} = {value}\n" for key, value in extra.items())
    return "\n".join(
        f'[jobs.j{i}]\nschedule = "* * * * * *"\ntimezone = "UTC"\ncatch_up = "skip"\ncommand = "{command}"\n{fields}'
        for i in range(count)
    )


def _runs(db: Path) -> list[tuple[str, str, int, str | None]]:
    try:
        with sqlite3.connect(db, timeout=10) as conn:
            rows = conn.execute(
                "SELECT job_id, state, attempt, error FROM job_runs WHERE state IN ('succeeded', 'failed')"
            ).fetchall()
    except sqlite3.OperationalError:  # not migrated yet
        return []
    return [(str(j), str(s), int(a), e) for j, s, a, e in rows]


def _events(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def _failed_with(db: Path, reason: str) -> list[tuple[str, str, int, str | None]]:
    return [r for r in _runs(db) if r[1] == "failed" and r[3] == reason]


def _survives_and_stops(proc: subprocess.Popen[bytes], log: Path) -> None:
    """Still serving after the failures, and a clean stop on SIGTERM; nothing in the log is a traceback."""
    assert proc.poll() is None, log.read_text()[-4000:]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, log.read_text()[-4000:]
    assert "Traceback" not in log.read_text()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


def _logged_reason(log: Path, reason: str) -> bool:
    return any(e.get("event") == "run_finished" and e.get("error") == reason for e in _events(log))


SERVE = ("serve", "--migrate", "--db", "sqlite:///schedctl.db", "--jobs", "jobs.toml", "--log-format", "json")


def test_a_worker_out_of_file_descriptors_fails_the_runs_it_cannot_start_and_keeps_serving(
    tmp_path: Path,
) -> None:
    """Each running child holds three of the worker's descriptors (output, pidfd, checkpoint): 16 jobs of 3 s
    each second cannot all start under ``ulimit -n 48``."""
    (tmp_path / "jobs.toml").write_text(_jobs(16, "sleep 3"))
    log, db = tmp_path / "serve.log", tmp_path / "schedctl.db"
    limit = 48
    program = ("prlimit", f"--nofile={limit}:{limit}", *SCHEDCTL)
    proc = serve(
        *SERVE[1:], "--slots", "16", log=log, stdout=subprocess.DEVNULL, cwd=tmp_path, program=program
    )
    reason = f"cannot start the command: the worker is out of file descriptors (EMFILE, ulimit -n {limit})"
    try:
        until(lambda: bool(_failed_with(db, reason)), "a run failed for want of descriptors", log)
        until(lambda: any(r[1] == "succeeded" for r in _runs(db)), "runs that did start to succeed", log)
        assert _logged_reason(log, reason)
        others = {r[3] for r in _runs(db) if r[1] == "failed"} - {reason}
        assert others == set(), others  # no other failure: nothing else in the worker ran out
        _survives_and_stops(proc, log)
    finally:
        _stop(proc)


def _uid_processes(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except FileNotFoundError:
                pass
    return count


@pytest.mark.skipif(
    os.geteuid() != 0, reason="--run-as-job-user needs root (root itself has no process limit)"
)
def test_a_worker_at_its_process_limit_fails_the_runs_it_cannot_start_and_keeps_serving(
    tmp_path: Path,
) -> None:
    """Root is exempt from RLIMIT_NPROC, its job users are not: a job user with the worker's ``ulimit -u``
    of processes running already cannot start another, and the run says so."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    limit = _uid_processes(nobody.pw_uid) + 3
    (tmp_path / "jobs.toml").write_text(_jobs(10, "sleep 3", user='"nobody"'))
    log, db = tmp_path / "serve.log", tmp_path / "schedctl.db"
    program = ("prlimit", f"--nproc={limit}:{limit}", *SCHEDCTL)
    proc = serve(
        *SERVE[1:], "--slots", "10", "--run-as-job-user",
        log=log, stdout=subprocess.DEVNULL, cwd=tmp_path, program=program,
    )  # fmt: skip
    reason = f"cannot start the command: the process limit is reached (EAGAIN, ulimit -u {limit})"
    try:
        until(lambda: bool(_failed_with(db, reason)), "a run failed at the process limit", log)
        until(lambda: any(r[1] == "succeeded" for r in _runs(db)), "runs that did start to succeed", log)
        assert _logged_reason(log, reason)
        _survives_and_stops(proc, log)
    finally:
        _stop(proc)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="mounting a tmpfs in a namespace needs root"
)
def test_a_worker_whose_temporary_folder_is_full_fails_the_run_it_cannot_prepare_and_keeps_serving(
    tmp_path: Path,
) -> None:
    """A retry carries the checkpoint its last attempt wrote, into a file in the worker's folder: with that
    folder full the attempt cannot start, and fails saying where space ran out. A run with nothing to write
    there still runs."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp_path / "jobs.toml").write_text(
        """\
[jobs.resumable]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
retries = 1
retry_backoff = "3s"
command = "printf '{\\"day\\": 3}' > \\"$SCHEDCTL_CHECKPOINT_FILE\\"; exit 1"

[jobs.plain]
schedule = "* * * * * *"
timezone = "UTC"
catch_up = "skip"
command = "true"
"""
    )
    log, db = tmp_path / "serve.log", tmp_path / "schedctl.db"
    # unshare execs sh, which execs schedctl: one pid, so the test's signals reach the worker.
    script = 'mount -t tmpfs -o size=512k tmpfs "$0" && TMPDIR="$0" exec "$@"'
    program = ("unshare", "-m", "sh", "-c", script, str(tmp), *SCHEDCTL)
    proc = serve(*SERVE[1:], log=log, stdout=subprocess.DEVNULL, cwd=tmp_path, program=program)
    try:
        retry_logged = lambda: any(e.get("event") == "run_retry_scheduled" for e in _events(log))  # noqa: E731
        until(retry_logged, "a first attempt that wrote its checkpoint", log)
        # The worker's view of its TMPDIR, from outside its mount namespace: fill it.
        inside = Path(f"/proc/{proc.pid}/root") / str(tmp).lstrip("/")
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={inside / 'fill'}", "bs=64k"],
            capture_output=True, timeout=30, check=False,
        )  # fmt: skip
        assert os.statvfs(inside).f_bavail == 0
        filled_at = len([r for r in _runs(db) if r[0] == "plain"])
        folder = next(p for p in inside.iterdir() if p.name.startswith("schedctl-worker-"))
        reason = (
            f"cannot start the command: no space left in the worker's folder {tmp / folder.name} (ENOSPC)"
        )
        until(lambda: bool(_failed_with(db, reason)), "a retry failed for want of space", log)
        assert all(r[2] == 2 for r in _failed_with(db, reason))  # only retries carry a checkpoint
        assert _logged_reason(log, reason)
        more = lambda: len([r for r in _runs(db) if r[0] == "plain" and r[1] == "succeeded"]) > filled_at + 2  # noqa: E731
        until(more, "the plain job to go on running", log)
        _survives_and_stops(proc, log)
    finally:
        _stop(proc)
