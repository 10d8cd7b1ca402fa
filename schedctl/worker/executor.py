"""Run one command the way cron would: its own process group, a clean environment, a bounded output tail.

The worker's own environment holds the database URL, so a job never inherits it: the job gets cron's few
variables, the ``pass_env`` names it asked for, its own ``env``, and the ``SCHEDCTL_*`` contract.
"""

from __future__ import annotations

import codecs
import functools
import json
import logging
import os
import pwd
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from schedctl.jobs.job import StopReason
from schedctl.timing.timetext import instant_text
from schedctl.worker.checkpoint import NO_CHECKPOINT, CheckpointFile

log = logging.getLogger("schedctl.executor")

DEFAULT_PATH = "/usr/bin:/bin"  # cron's default PATH
DEFAULT_SHELL = "/bin/sh"  # cron runs commands with /bin/sh unless the crontab sets SHELL
PIPE_HELD_GRACE = 1.0  # seconds a finished job's leftover children may keep its output pipe open


_READ_CHUNK = 65536
_PIPE_BUFFER = 65536  # Linux's default pipe capacity
_MAX_CHUNKS = 256


@dataclass(frozen=True)
class RunIdentity:
    job_id: str
    scheduled_for: datetime
    attempt: int

    @property
    def log_extra(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "scheduled_for": instant_text(self.scheduled_for),
            "attempt": self.attempt,
        }


class OutputTail:
    """The last ``limit`` bytes of a stream, in bounded memory however much the job prints.

    Decoded as it arrives (an incremental decoder: a character split across two reads is whole), so that
    ``size``, the characters seen so far, counts the very text ``text()`` is the end of: a follower that
    printed the first N characters prints ``text()[-(size - N):]`` next (``schedctl logs -f``)."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self._chunks: list[str] = []
        self._held = 0  # characters in _chunks
        self._seen = 0  # characters decoded so far
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lock = threading.Lock()

    def feed(self, data: bytes) -> None:
        text = self._decoder.decode(data)  # NUL stays one character: clean_text makes it U+FFFD
        with self._lock:
            self._chunks.append(text)
            self._held += len(text)
            self._seen += len(text)
            # A character is at least a byte: ``limit`` characters hold the last ``limit`` bytes. The count
            # bound keeps a job printing a byte at a time from piling up tiny strings.
            if self._held > 2 * self.limit + _READ_CHUNK or len(self._chunks) > _MAX_CHUNKS:
                kept = "".join(self._chunks)[-self.limit :] if self.limit else ""
                self._chunks = [kept]
                self._held = len(kept)

    def snapshot(self) -> tuple[str, int]:
        """The tail as text for people and the characters seen so far (``size``), read together. Undecodable
        bytes and NUL (which PostgreSQL's text cannot hold) are U+FFFD; a character still incomplete at the
        end counts as one U+FFFD; the text is trimmed to fit ``limit`` bytes of UTF-8."""
        with self._lock:
            joined = "".join(self._chunks)
            seen = self._seen
            pending, _ = self._decoder.getstate()
        if pending:
            rest = pending.decode("utf-8", errors="replace")
            joined += rest
            seen += len(rest)
        text = clean_text(joined[-self.limit :], self.limit) if self.limit else ""
        return text, seen

    def text(self) -> str:
        return self.snapshot()[0]

    @property
    def size(self) -> int:
        return self.snapshot()[1]


def clean_text(text: str, limit: int | None = None) -> str:
    text = text.replace("\x00", "\ufffd")
    if limit is not None:
        encoded = text.encode()
        if len(encoded) > limit:
            text = encoded[len(encoded) - limit :].decode("utf-8", errors="ignore")
    return text


def job_environment(
    snapshot: Mapping[str, Any],
    run: RunIdentity,
    account: pwd.struct_passwd,
    checkpoint: Any,
    checkpoint_file: str,
    worker_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Cron's variables, then pass_env from the worker, then the job's env, then the SCHEDCTL_* contract."""
    source = os.environ if worker_env is None else worker_env
    env = {
        "HOME": account.pw_dir,
        "LOGNAME": account.pw_name,
        "USER": account.pw_name,
        "SHELL": DEFAULT_SHELL,
        "PATH": DEFAULT_PATH,
    }
    for name in snapshot.get("pass_env") or ():
        if name in source:
            env[name] = source[name]
    env.update({str(k): str(v) for k, v in (snapshot.get("env") or {}).items()})
    env["SCHEDCTL_JOB_ID"] = run.job_id
    env["SCHEDCTL_SCHEDULED_FOR"] = instant_text(run.scheduled_for)
    env["SCHEDCTL_ATTEMPT"] = str(run.attempt)
    env["SCHEDCTL_CHECKPOINT_FILE"] = checkpoint_file
    if checkpoint is not None:
        env["SCHEDCTL_CHECKPOINT"] = json.dumps(checkpoint, separators=(",", ":"))
    return env


def command_argv(command: str | list[str], env: Mapping[str, str]) -> list[str]:
    """A string goes to the job's shell with -c, like a crontab line; a list runs as it is, no shell."""
    if isinstance(command, str):
        return [env.get("SHELL") or DEFAULT_SHELL, "-c", command]
    return [str(part) for part in command]


def account_for(user: str | None, switch: bool) -> pwd.struct_passwd:
    """The account the job runs as: its ``user`` when the worker may switch to it, else the worker's own."""
    if switch and user:
        return _by_name(user)
    return _by_uid(os.getuid())


def start_failure(exc: BaseException, folder: str | os.PathLike[str]) -> str:
    """Why a run's command could not start, in one line. The worker's own limits (descriptors, processes,
    space in its folder) are named with their value, since the fix is the worker's and not the job's; any
    other error (no such program, a bad working folder) is said as the system said it."""
    import errno
    import resource

    code = getattr(exc, "errno", None)
    if code == errno.EMFILE:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return f"cannot start the command: the worker is out of file descriptors (EMFILE, ulimit -n {soft})"
    if code == errno.ENFILE:
        return "cannot start the command: the system's table of open files is full (ENFILE)"
    if code == errno.EAGAIN:
        soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
        limit = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
        return f"cannot start the command: the process limit is reached (EAGAIN, ulimit -u {limit})"
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f"cannot start the command: no space left in the worker's folder {os.fspath(folder)} ({errno.errorcode[code]})"
    if code == errno.ENOMEM:
        return "cannot start the command: out of memory (ENOMEM)"
    return f"cannot start the command: {exc}"


def unknown_user_reason(user: str) -> str:
    """Why a run of a job naming a user this host does not have fails (also said at start and reload)."""
    return f"user {user!r} does not exist on this host (--run-as-job-user): not run"


def unknown_users(users: list[str]) -> list[str]:
    """The names among ``users`` this host has no account for."""
    missing = []
    for user in sorted(set(users)):
        try:
            _by_name(user)
        except KeyError:
            missing.append(user)
    return missing


# A passwd lookup costs about half a millisecond (NSS); accounts do not change under a running worker.
@functools.lru_cache(maxsize=256)
def _by_name(user: str) -> pwd.struct_passwd:
    return pwd.getpwnam(user)


@functools.lru_cache(maxsize=4)
def _by_uid(uid: int) -> pwd.struct_passwd:
    return pwd.getpwuid(uid)


class Execution:
    """One running copy of a run's command.

    ``stop(reason)`` sends SIGTERM to the whole process group and ``enforce()`` follows with SIGKILL once
    the grace period is over; the loop calls ``enforce()`` every turn, which also applies the timeout.
    """

    def __init__(
        self,
        run: RunIdentity,
        snapshot: Mapping[str, Any],
        checkpoint: Any,
        checkpoint_folder: Path,
        *,
        tail_bytes: int = 8192,
        run_as_job_user: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
        before_close: Callable[[int], None] = lambda fd: None,
    ) -> None:
        # Called with each descriptor just before it is closed, so a selector can drop it first: a closed
        # number is reused by the next run's pipe at once.
        self._before_close = before_close
        self.run = run
        self.snapshot = snapshot
        self._checkpoint_folder = checkpoint_folder
        self._checkpoint: CheckpointFile | None = None
        self.checkpoint_problem: str | None = None  # why the last look at the checkpoint took nothing
        self.tail = OutputTail(tail_bytes)
        self.grace_period = float(snapshot.get("grace_period") or 0.0)
        timeout = snapshot.get("timeout")
        self._monotonic = monotonic
        self.started = monotonic()
        self.deadline = None if timeout is None else self.started + float(timeout)
        self.stop_reason: StopReason | None = None
        self.kill_at: float | None = None
        self.killed = False
        self.start_error: str | None = None
        self._exited_at: float | None = None
        self._done = False
        self.output_fd: int | None = None  # the job's stdout+stderr, non-blocking; the worker selects on it
        self.exit_fd: int | None = None  # a pidfd: readable once the job exited (Linux 5.3+), else None
        self._saved_checkpoint_text = _checkpoint_text(checkpoint)
        self.proc: subprocess.Popen[bytes] | None = None
        self._spawn(checkpoint, run_as_job_user)

    # -- start -------------------------------------------------------------------------------------------
    def _spawn(self, checkpoint: Any, run_as_job_user: bool) -> None:
        user = self.snapshot.get("user")
        switch = bool(run_as_job_user and user and os.geteuid() == 0)
        try:
            try:
                account = account_for(user, switch)
            except KeyError:
                self.start_error = unknown_user_reason(str(user))
                self._done = True
                return
            self._checkpoint = CheckpointFile(
                self._checkpoint_folder,
                self._saved_checkpoint_text,
                (account.pw_uid, account.pw_gid) if switch else None,
            )
            env = job_environment(self.snapshot, self.run, account, checkpoint, self._checkpoint.path)
            argv = command_argv(self.snapshot["command"], env)
            cwd = self.snapshot.get("workdir") or (account.pw_dir if os.path.isdir(account.pw_dir) else "/")
            stdin_text = self.snapshot.get("stdin")
            extra: dict[str, Any] = {}
            if switch:
                extra = {
                    "user": account.pw_uid,
                    "group": account.pw_gid,
                    "extra_groups": os.getgrouplist(account.pw_name, account.pw_gid),
                }
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdin_text else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                process_group=0,
                close_fds=True,
                pass_fds=(self._checkpoint.fd,),
                **extra,
            )
        except (OSError, KeyError, ValueError, subprocess.SubprocessError) as exc:
            self.start_error = start_failure(exc, self._checkpoint_folder)
            self._done = True
            return
        assert self.proc.stdout is not None
        self.output_fd = self.proc.stdout.fileno()
        os.set_blocking(self.output_fd, False)
        self.exit_fd = _pidfd(self.proc.pid)
        if stdin_text and self.proc.stdin is not None:
            _feed_stdin(self.proc.stdin, stdin_text)

    def pump(self) -> bool:
        """Read what the job printed so far; False once its output is closed (EOF)."""
        if self.output_fd is None:
            return False
        try:
            while True:
                data = os.read(self.output_fd, _READ_CHUNK)
                if not data:
                    self._close_output()
                    return False
                self.tail.feed(data)
        except BlockingIOError:
            return True
        except OSError:
            self._close_output()
            return False

    def _close_output(self) -> None:
        if self.output_fd is not None:
            self._before_close(self.output_fd)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.output_fd = None

    def close_exit_fd(self) -> None:
        if self.exit_fd is not None:
            self._before_close(self.exit_fd)
            os.close(self.exit_fd)
            self.exit_fd = None

    # -- state ---------------------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def done(self) -> bool:
        """The command exited and its output was read, or leftover children held the pipe past a grace."""
        if self._done:
            return True
        open_output = self.pump()
        assert self.proc is not None
        if self.proc.poll() is None:
            return False
        if open_output:
            now = self._monotonic()
            if self._exited_at is None:
                self._exited_at = now
                return False
            if now - self._exited_at <= PIPE_HELD_GRACE:
                return False
            self._close_output()  # a daemonised grandchild keeps it open; stop waiting for it
        self.close_exit_fd()
        self._done = True
        return True

    @property
    def returncode(self) -> int | None:
        """Exit status; a signal that killed the job is reported as 128 + its number, as a shell would."""
        if self.proc is None or self.proc.returncode is None:
            return None
        code = self.proc.returncode
        return 128 - code if code < 0 else code

    def duration(self) -> float:
        return self._monotonic() - self.started

    # -- signals -------------------------------------------------------------------------------------------
    def stop(self, reason: StopReason, grace: float | None = None) -> None:
        """SIGTERM to the process group now; SIGKILL when the grace period is over."""
        if self.stop_reason is None:
            self.stop_reason = reason
        if self.kill_at is not None or self.done():
            return
        self.kill_at = self._monotonic() + (self.grace_period if grace is None else grace)
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        if not self.done():
            self.killed = True
            self._signal(signal.SIGKILL)

    def enforce(self) -> None:
        now = self._monotonic()
        if self.deadline is not None and now >= self.deadline and self.stop_reason is None:
            log.warning("run timed out", extra={"event": "run_timeout", **self.run.log_extra})
            self.stop(StopReason.TIMEOUT)
        if self.kill_at is not None and now >= self.kill_at and not self.killed:
            self.kill()

    def next_deadline(self) -> float | None:
        candidates = [t for t in (self.deadline if self.stop_reason is None else None, self.kill_at) if t]
        return min(candidates) if candidates else None

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    # -- checkpoint ----------------------------------------------------------------------------------------
    def read_checkpoint(self) -> Any:
        """The checkpoint the job wrote since the last call, or ``NO_CHECKPOINT`` when nothing new and valid."""
        if self._checkpoint is None:
            return NO_CHECKPOINT
        found = self._checkpoint.read(changed_only=True)
        if found.problem is not None:
            self._checkpoint_refused(found.problem)
            return NO_CHECKPOINT
        if found.value is NO_CHECKPOINT:
            return NO_CHECKPOINT
        self.checkpoint_problem = None
        canonical = _checkpoint_text(found.value)
        if canonical == self._saved_checkpoint_text:
            return NO_CHECKPOINT
        self._saved_checkpoint_text = canonical
        return found.value

    def reread_checkpoint(self) -> None:
        """The last value read could not be saved: offer it again at the next read."""
        if self._checkpoint is not None:
            self._checkpoint.forget_seen()
        self._saved_checkpoint_text = None

    def final_checkpoint(self) -> Any:
        """Whatever valid JSON the file holds now (saved with the outcome), or ``NO_CHECKPOINT``; when it holds
        something that cannot be taken, ``checkpoint_problem`` says why."""
        if self._checkpoint is None:
            return NO_CHECKPOINT
        found = self._checkpoint.read(changed_only=False)
        self.checkpoint_problem = found.problem
        if found.problem is not None:
            self._checkpoint_refused(found.problem)
        return found.value

    def _checkpoint_refused(self, problem: str) -> None:
        if problem != self.checkpoint_problem:  # once per kind, not at every heartbeat
            log.warning(problem, extra={"event": "checkpoint_refused", **self.run.log_extra})
        self.checkpoint_problem = problem

    def cleanup(self) -> None:
        """Close the checkpoint's descriptor: its file had no name, so nothing is left on disk, and nothing
        the job left anywhere is looked at."""
        if self._checkpoint is not None:
            self._checkpoint.close()


def _checkpoint_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _feed_stdin(pipe: Any, text: str) -> None:
    """Small input fits the pipe's buffer and is written at once; larger input gets a thread, so a job that
    prints before it reads cannot deadlock against us."""
    data = text.encode()
    if len(data) > _PIPE_BUFFER:
        threading.Thread(target=_write_all, args=(pipe, data), daemon=True).start()
    else:
        _write_all(pipe, data)


def _write_all(pipe: Any, data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
