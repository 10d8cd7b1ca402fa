"""Run one command the way cron would: its own process group, a clean environment, a bounded output tail.

The worker's own environment holds the database URL, so a job never inherits it: the job gets cron's few
variables, the ``pass_env`` names it asked for, its own ``env``, and the ``SCHEDCTL_*`` contract.
"""

from __future__ import annotations

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

from schedctl.instants import instant_text
from schedctl.outcome import StopReason

log = logging.getLogger("schedctl.executor")

DEFAULT_PATH = "/usr/bin:/bin"  # cron's default PATH
DEFAULT_SHELL = "/bin/sh"  # cron runs commands with /bin/sh unless the crontab sets SHELL
PIPE_HELD_GRACE = 1.0  # seconds a finished job's leftover children may keep its output pipe open


_READ_CHUNK = 65536
_PIPE_BUFFER = 65536  # Linux's default pipe capacity

_NO_CHECKPOINT = object()


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
    """The last ``limit`` bytes of a stream, in bounded memory however much the job prints."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self._buf = bytearray()
        self._lock = threading.Lock()

    def feed(self, data: bytes) -> None:
        with self._lock:
            self._buf += data
            if len(self._buf) > 2 * self.limit + _READ_CHUNK:
                del self._buf[: len(self._buf) - self.limit]

    def text(self) -> str:
        """The tail as text for people: undecodable bytes and NUL (which PostgreSQL's text cannot hold) become
        U+FFFD, and the result is trimmed again so that it still fits ``limit`` bytes of UTF-8."""
        with self._lock:
            data = bytes(self._buf[-self.limit :]) if self.limit else b""
        return clean_text(data.decode("utf-8", errors="replace"), self.limit)


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
    checkpoint_file: Path,
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
    env["SCHEDCTL_CHECKPOINT_FILE"] = str(checkpoint_file)
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
        checkpoint_file: Path,
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
        self.checkpoint_file = checkpoint_file
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
        self._checkpoint_mtime: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._own_folder = False
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
            self._prepare_checkpoint_file(checkpoint, account if switch else None)
            env = job_environment(self.snapshot, self.run, account, checkpoint, self.checkpoint_file)
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
                **extra,
            )
        except (OSError, KeyError, ValueError, subprocess.SubprocessError) as exc:
            self.start_error = f"cannot start the command: {exc}"
            self._done = True
            return
        assert self.proc.stdout is not None
        self.output_fd = self.proc.stdout.fileno()
        os.set_blocking(self.output_fd, False)
        self.exit_fd = _pidfd(self.proc.pid)
        if stdin_text and self.proc.stdin is not None:
            _feed_stdin(self.proc.stdin, stdin_text)

    def _prepare_checkpoint_file(self, checkpoint: Any, owner: pwd.struct_passwd | None) -> None:
        """Put the last checkpoint in the file too, so a shell job can simply `cat` it.

        A job running as another user gets a folder of its own (it must create the file), made 0700 with
        an unpredictable name beside the worker's folder, which stays 0700 and closed to that user: other
        local users never see another job's checkpoint (issue 16). Otherwise the worker's private folder
        serves every run, and no per-run folder is made (mkdir/rmdir per run show up in the throughput
        benchmark). The file is created 0600, never widened and then narrowed.
        """
        if owner is not None:
            import tempfile

            folder = Path(tempfile.mkdtemp(prefix="schedctl-run-", dir=self.checkpoint_file.parent.parent))
            self.checkpoint_file = folder / "checkpoint.json"
            self._own_folder = True
        folder = self.checkpoint_file.parent
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if checkpoint is not None:
            _write_private(self.checkpoint_file, self._saved_checkpoint_text or "")
        else:
            self.checkpoint_file.unlink(missing_ok=True)  # one call, not exists() then unlink()
        if owner is not None:
            os.chown(folder, owner.pw_uid, owner.pw_gid)
            if checkpoint is not None:
                os.chown(self.checkpoint_file, owner.pw_uid, owner.pw_gid)
        # Nothing else writes the file before the job starts: without a checkpoint there is none to stat.
        self._checkpoint_mtime = None if checkpoint is None else _mtime(self.checkpoint_file)

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
        mtime = _mtime(self.checkpoint_file)
        if mtime is None or mtime == self._checkpoint_mtime:
            return _NO_CHECKPOINT
        self._checkpoint_mtime = mtime
        try:
            text = self.checkpoint_file.read_text()
            value = json.loads(text)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            log.warning(
                "checkpoint file is not valid JSON; ignored",
                extra={"event": "checkpoint_invalid", "error": str(exc), **self.run.log_extra},
            )
            return _NO_CHECKPOINT
        canonical = _checkpoint_text(value)
        if canonical == self._saved_checkpoint_text:
            return _NO_CHECKPOINT
        self._saved_checkpoint_text = canonical
        return value

    def reread_checkpoint(self) -> None:
        """The last value read could not be saved: offer it again at the next read."""
        self._checkpoint_mtime = None
        self._saved_checkpoint_text = None

    def final_checkpoint(self) -> Any:
        """Whatever valid JSON the file holds now (saved with the outcome), or ``NO_CHECKPOINT``."""
        try:
            text = self.checkpoint_file.read_text()
        except (OSError, UnicodeDecodeError):
            return _NO_CHECKPOINT
        try:
            return json.loads(text)
        except ValueError as exc:
            log.warning(
                "checkpoint file is not valid JSON; ignored",
                extra={"event": "checkpoint_invalid", "error": str(exc), **self.run.log_extra},
            )
            return _NO_CHECKPOINT

    def cleanup(self) -> None:
        try:
            self.checkpoint_file.unlink(missing_ok=True)
            if self._own_folder:
                import shutil

                # The job's user may have left files (or a symlink) there; rmtree does not follow links.
                shutil.rmtree(self.checkpoint_file.parent, ignore_errors=True)
        except OSError:
            pass


NO_CHECKPOINT = _NO_CHECKPOINT


def _checkpoint_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _mtime(path: Path) -> int | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns ^ st.st_size


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
