"""``on_failure`` / ``on_success``: what replaces cron's mail, run by the worker after a run's outcome is recorded.

A hook runs with the job's own environment (the same clean, cron-like one, never the worker's) plus the run's
outcome, in its own process group. The worker never waits on it: a slow mail server must not hold a slot or
delay heartbeats. A hook still running after ``HOOK_TIMEOUT`` is killed; its exit status and the tail of its
output are logged, never stored on the run (the run's outcome is already final).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

from schedctl.jobs.job import RunState
from schedctl.worker.executor import RunIdentity, account_for, command_argv, job_environment

log = logging.getLogger("schedctl.hooks")

HOOK_TIMEOUT = 300.0  # seconds; a hook is a notification, not a job
HOOK_OUTPUT_TAIL = 2048
OUTPUT_TAIL_ENV_LIMIT = 8192  # what a hook sees of the run's output, in SCHEDCTL_OUTPUT_TAIL

# The run states each hook is for: a timeout is a failure to whoever relied on cron's mail.
HOOK_FOR_STATE: dict[str, str] = {
    RunState.FAILED: "on_failure",
    RunState.TIMED_OUT: "on_failure",
    RunState.SUCCEEDED: "on_success",
}


@dataclass
class _Running:
    name: str
    run: RunIdentity
    process: subprocess.Popen[bytes]
    output: IO[bytes]
    deadline: float


def hook_environment(
    snapshot: Mapping[str, Any],
    run: RunIdentity,
    state: str,
    exit_status: int | None,
    output_tail: str | None,
    run_as_job_user: bool,
) -> dict[str, str]:
    """The job's environment plus the outcome; no checkpoint variables (the run is over)."""
    account = account_for(snapshot.get("user"), run_as_job_user)
    env = job_environment(snapshot, run, account, checkpoint=None, checkpoint_file=os.devnull)
    env.pop("SCHEDCTL_CHECKPOINT_FILE", None)
    env["SCHEDCTL_STATE"] = state
    env["SCHEDCTL_EXIT_STATUS"] = "" if exit_status is None else str(exit_status)
    tail = (output_tail or "").replace("\x00", "")
    env["SCHEDCTL_OUTPUT_TAIL"] = tail[-OUTPUT_TAIL_ENV_LIMIT:]
    return env


class Hooks:
    """Starts hooks and reaps them; ``reap()`` is called every worker turn, ``close()`` at shutdown."""

    def __init__(self, run_as_job_user: bool, timeout: float = HOOK_TIMEOUT) -> None:
        self.run_as_job_user = run_as_job_user
        self.timeout = timeout
        self._running: list[_Running] = []

    def fire(
        self,
        snapshot: Mapping[str, Any],
        run: RunIdentity,
        state: str,
        exit_status: int | None,
        output_tail: str | None,
    ) -> bool:
        """Start the hook for ``state`` if the job has one; True when one was started."""
        name = HOOK_FOR_STATE.get(state)
        command = snapshot.get(name) if name else None
        if not command:
            return False
        extra = {**run.log_extra, "hook": name}
        try:
            env = hook_environment(snapshot, run, state, exit_status, output_tail, self.run_as_job_user)
            account = account_for(snapshot.get("user"), self.run_as_job_user)
            switch = self.run_as_job_user and os.geteuid() == 0 and account.pw_uid != os.geteuid()
            output = tempfile.TemporaryFile()
            process = subprocess.Popen(
                command_argv(command, env),
                env=env,
                cwd=snapshot.get("workdir") or account.pw_dir or "/",
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                process_group=0,
                user=account.pw_uid if switch else None,
                group=account.pw_gid if switch else None,
                close_fds=True,
            )
        except (OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
            log.warning("%s hook could not start: %s", name, exc, extra={"event": "hook_failed", **extra})
            return False
        log.info("%s hook started (pid %d)", name, process.pid, extra={"event": "hook_started", **extra})
        self._running.append(_Running(str(name), run, process, output, time.monotonic() + self.timeout))
        return True

    def reap(self) -> None:
        now = time.monotonic()
        still: list[_Running] = []
        for hook in self._running:
            code = hook.process.poll()
            if code is None and now >= hook.deadline:
                _kill_group(hook.process)
                code = hook.process.wait()
                self._finished(hook, code, timed_out=True)
            elif code is None:
                still.append(hook)
            else:
                self._finished(hook, code, timed_out=False)
        self._running = still

    def close(self, wait: float) -> None:
        """Give running hooks up to ``wait`` seconds (a shutdown should not lose a failure mail), then kill."""
        deadline = time.monotonic() + wait
        while self._running and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.05)
        for hook in self._running:
            _kill_group(hook.process)
            self._finished(hook, hook.process.wait(), timed_out=True)
        self._running = []

    @property
    def running(self) -> int:
        return len(self._running)

    def _finished(self, hook: _Running, code: int, timed_out: bool) -> None:
        hook.output.seek(0, os.SEEK_END)
        size = hook.output.tell()
        hook.output.seek(max(0, size - HOOK_OUTPUT_TAIL))
        tail = hook.output.read().decode("utf-8", errors="replace").strip()
        hook.output.close()
        extra = {**hook.run.log_extra, "hook": hook.name, "exit_status": code, "output_tail": tail}
        if timed_out:
            log.warning(
                "%s hook killed after %gs",
                hook.name,
                self.timeout,
                extra={"event": "hook_timed_out", **extra},
            )
        elif code != 0:
            log.warning(
                "%s hook exited with status %d", hook.name, code, extra={"event": "hook_failed", **extra}
            )
        else:
            log.info("%s hook finished", hook.name, extra={"event": "hook_finished", **extra})


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
