"""`schedctl serve`: run the scheduler and/or the worker loop in one process, with signals and start-up checks.

Signals (installed in the main thread; the loops run in their own threads):
- SIGTERM / SIGINT: ``stopping`` — the scheduler finishes its pass, releases the lease and returns; the worker
  hands its runs back. The process exits 0.
- a second SIGTERM / SIGINT: ``killing`` — the worker kills its children now and hands their runs back; the
  process exits 0 once the loops are done (130 only when a loop is still stuck after the join timeout).
- SIGHUP: re-read the job files; a file that does not load keeps the old jobs and logs one error line.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import secrets
import signal
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from schedctl.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, SchemaMismatch, StoreUnavailable
from schedctl.jobs.job import Job, Role
from schedctl.leader.settings import SchedulerSettings
from schedctl.timing.backoff import Backoff
from schedctl.timing.clock import Clock, SystemClock
from schedctl.worker.settings import WorkerSettings

log = logging.getLogger("schedctl.service")


def default_identity() -> str:
    """``HOST:PID:SUFFIX``; the random suffix keeps a reused PID in a new container from looking like the old holder."""
    return (
        os.environ.get("SCHEDCTL_IDENTITY") or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
    )


START_BACKOFF_MIN = 0.5
START_BACKOFF_MAX = 10.0


@dataclass(frozen=True)
class ServeConfig:
    role: Role
    db_url: str
    jobs_path: str | None
    scheduler: SchedulerSettings
    worker: WorkerSettings
    migrate: bool = False
    allow_empty: bool = (
        False  # start (and reload) with job files that define no job, though the database knows some
    )
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None
    clock_skew: float = 0.0  # seconds; a testing aid that fakes a replica whose wall clock is wrong


class StartupInterrupted(BaseException):
    """A stop signal came while the main thread did start-up work that looks at no event.

    A BaseException, as KeyboardInterrupt is: raised wherever the parse happens to be, it must pass the
    loader's ``except Exception`` that turns a cron library's failure into one line about a job (exit 78).
    """


class _Signals:
    """Turns signals into events; the main loop does the logging (never log inside a signal handler)."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.killing = threading.Event()
        self.reload = threading.Event()
        self.wake: Callable[[], None] = lambda: None
        self._interrupt = False

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """Inside the block a stop signal raises StartupInterrupted in the main thread at once.

        Parsing a million jobs' TOML is one long call that could check no event: a SIGTERM then waited for
        it (15-25 s), and a supervisor's grace is shorter. The block must be one that is safe to abandon
        anywhere: it reads files and writes nothing.
        """
        self._interrupt = True
        try:
            if self.stopping.is_set():
                raise StartupInterrupted
            yield
        finally:
            self._interrupt = False

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping.is_set():
            self.killing.set()
        self.stopping.set()
        self.wake()
        if self._interrupt:
            self._interrupt = False
            raise StartupInterrupted

    def _on_hup(self, signum: int, frame: FrameType | None) -> None:
        self.reload.set()
        self.wake()


def serve(config: ServeConfig) -> int:
    """Run the configured roles until a signal stops them; returns the process exit status."""
    from schedctl.store import open_store
    from schedctl.store.bounds import Bounds

    signals = _Signals()
    signals.install()
    clock: Clock = SystemClock(skew=timedelta(seconds=config.clock_skew))
    runs_scheduler = config.role in (Role.SCHEDULER, Role.ALL)
    runs_worker = config.role in (Role.WORKER, Role.ALL)

    jobs: dict[str, Job] = {}
    if runs_scheduler:
        try:
            with signals.interruptible():
                jobs = load_job_files(config.jobs_path)  # a bad file at start-up is a config error: exit 78
        except StartupInterrupted:
            log.info("stopped while loading the job files", extra={"event": "stopped_starting"})
            return EXIT_OK
        warn_writable_job_files(config.jobs_path)
        if runs_worker:
            warn_job_users(jobs, config.worker.run_as_job_user)

    # Server-side timeouts follow the lease, so a stuck session's locks are gone before a take-over is due.
    store = open_store(config.db_url, bounds=Bounds.for_lease(config.scheduler.lease_duration))
    _refuse_missing_sqlite_file(store, config.migrate)
    log.info(
        "schedctl serve starting: role %s, identity %s, %d jobs",
        config.role,
        config.scheduler.identity,
        len(jobs),
        extra={"event": "serve_starting"},
    )
    # Probes first: while the database is unreachable the process is live but not ready, and says so.
    _start_metrics(config, store)
    if not wait_for_schema(store, config.migrate, signals.stopping):
        store.dispose()
        return EXIT_OK
    if config.metrics_port is not None:
        from schedctl.observability.queue import start_sampler

        # Queue depth and last success come from the database, so every replica reports them, leader or not;
        # only once the schema is there, or the first samples fail for want of the tables.
        start_sampler(store, signals.stopping)

    threads: list[threading.Thread] = []
    scheduler = None
    if runs_scheduler:
        from schedctl.leader.scheduler import Scheduler

        path, allow_empty = config.jobs_path, config.allow_empty
        refuse_empty_job_set(jobs, path, store, allow_empty)

        def reload_jobs() -> dict[str, Job]:
            loaded = load_job_files(path)
            refuse_empty_job_set(loaded, path, store, allow_empty)
            if runs_worker:
                warn_job_users(loaded, config.worker.run_as_job_user)
            return loaded

        # The job definitions and the plan live as long as a term: once built, move them out of the cyclic
        # GC's generations, or every collection during a 100,000-row pass rescans them (~20% of its CPU).
        scheduler = Scheduler(
            store, config.scheduler, reload_jobs, clock, jobs=jobs, after_take_over=gc.freeze
        )
        signals.wake = scheduler.wake
        threads.append(_thread("scheduler", lambda: scheduler.run(signals.stopping)))
    if runs_worker:
        from schedctl.worker.loop import Worker

        worker = Worker(store, config.worker, clock)
        if scheduler is not None:
            scheduler.on_queued = worker.nudge  # committed: the worker sees the rows when it claims
        threads.append(_thread("worker", lambda: worker.run(signals.stopping, signals.killing)))
    registry = None if runs_worker else _register_scheduler(store, config, clock, signals)
    for thread in threads:
        thread.start()
    status = _supervise(threads, signals, scheduler)
    if registry is not None:
        registry.join(timeout=3.0)  # its last write marks this process stopped
    if status != EXIT_INTERRUPTED:
        store.dispose()
    return status


def _register_scheduler(store: Any, config: ServeConfig, clock: Clock, signals: _Signals) -> threading.Thread:
    """A scheduler-only process in the worker registry, so `schedctl workers` and `top` show standbys too.

    (A worker, or `--role all`, is registered by the worker loop itself.)"""
    from schedctl.jobs.job import Role, ServeStopReason
    from schedctl.worker.registry import Registry

    s = config.scheduler
    registry = Registry(
        store,
        identity=s.identity,
        role=Role.SCHEDULER,
        interval=s.renew_interval,
        stale_after=max(3 * s.renew_interval, s.lease_duration),
        monotonic=clock.monotonic,
    )
    return registry.run_in_thread(
        signals.stopping,
        lambda: ServeStopReason.STOPPED_AT_ONCE if signals.killing.is_set() else ServeStopReason.SHUTDOWN,
    )


def _thread(name: str, target: Callable[[], None]) -> threading.Thread:
    def body() -> None:
        try:
            target()
        except Exception:
            log.exception("the %s loop stopped on an unexpected error", name, extra={"event": "loop_crashed"})
            raise

    # Daemon: after a second signal the process must be able to exit while a loop is still stuck.
    return threading.Thread(target=body, name=f"schedctl-{name}", daemon=True)


def _supervise(threads: list[threading.Thread], signals: _Signals, scheduler: Any) -> int:
    announced_stop = announced_kill = False
    while any(t.is_alive() for t in threads):
        time.sleep(0.1)
        if signals.reload.is_set():
            signals.reload.clear()
            if scheduler is not None:
                log.info("SIGHUP: re-reading the job files", extra={"event": "reload_requested"})
                scheduler.request_reload()
        if signals.stopping.is_set() and not announced_stop:
            announced_stop = True
            log.info(
                "stopping: finishing the current pass and handing work back", extra={"event": "stopping"}
            )
        if signals.killing.is_set() and not announced_kill:
            announced_kill = True
            log.warning("second signal: stopping now", extra={"event": "killing"})
            for t in threads:
                t.join(timeout=5.0 if t.name == "schedctl-worker" else 1.0)
            # A deploy's second SIGTERM is not a failure when the work was handed back (issue: "Exit 0").
            return EXIT_INTERRUPTED if any(t.is_alive() for t in threads) else EXIT_OK
        if not signals.stopping.is_set() and not all(t.is_alive() for t in threads):
            # A loop ended on its own: that is a bug or a crash; stop the rest so a supervisor restarts us.
            signals.stopping.set()
            signals.wake()
            for t in threads:
                t.join(timeout=30.0)
            return EXIT_FAILURE
    return EXIT_OK


def wait_for_schema(store: Any, migrate: bool, stopping: threading.Event) -> bool:
    """Wait for the database (one line, then quiet retries with backoff) and check its schema.

    Returns False when stopped while waiting. Raises SchemaMismatch (what to run) and other StoreErrors.
    """
    from sqlalchemy.exc import DBAPIError

    from schedctl.store import access, describe_target, translate_error
    from schedctl.store import migrate as migrations

    backoff, waiting = Backoff(START_BACKOFF_MIN, START_BACKOFF_MAX), False
    while not stopping.is_set():
        try:
            try:
                if migrate:
                    migrations.upgrade(store)
                migrations.require_current(store)
                access.require_writes(store)  # a read-only user is a configuration error, not an outage
            except DBAPIError as exc:
                raise translate_error(exc, store.url) from exc
        except SchemaMismatch:
            raise
        except StoreUnavailable as exc:
            if not waiting:
                log.warning("database unavailable, retrying: %s", exc, extra={"event": "db_unavailable"})
                waiting = True
            stopping.wait(backoff.delay)
            backoff.grow()
            continue
        if waiting:
            log.info("database reachable: %s", describe_target(store.url), extra={"event": "db_available"})
        return True
    return False


def _refuse_missing_sqlite_file(store: Any, migrate: bool) -> None:
    """Without --migrate a new SQLite file could only be refused for having no schema; connecting to check
    would leave an empty file behind. Say what to run before anything creates it."""
    from schedctl.store import describe_target, urls
    from schedctl.store.sqlitefile import sqlite_path

    path = sqlite_path(store.url)
    if path is None or migrate or path.exists():
        return
    store.dispose()
    problem = urls.missing_sqlite_folder(store.url)
    if problem is not None:
        raise problem
    raise SchemaMismatch(
        f"{describe_target(store.url)} does not exist: run `schedctl db upgrade` to create it, "
        "or serve with --migrate"
    )


def refuse_empty_job_set(jobs: dict[str, Job], path: str | None, store: Any, allow_empty: bool) -> None:
    """No jobs in the files while the database knows some: a truncated deploy, most likely, that would stop
    every job with exit 0. Raises ConfigError (start-up: exit 78; SIGHUP: the old jobs stay) unless
    ``allow_empty``; with it, says once that the set is empty on purpose."""
    if jobs or path is None:
        return
    from sqlalchemy import func, select

    from schedctl.errors import ConfigError, Diagnostic
    from schedctl.store.schema import job_state

    with store.read() as conn:
        known = int(conn.execute(select(func.count()).select_from(job_state)).scalar_one())
    if not known:
        return
    if allow_empty:
        log.warning(
            "%s defines no jobs; the database knows %d: none will be dispatched (--allow-empty)",
            path,
            known,
            extra={"event": "job_set_empty"},
        )
        return
    raise ConfigError(
        [
            Diagnostic(
                path,
                None,
                f"defines no jobs, but the database knows {known}: refusing to stop them all "
                "(a truncated file?); pass --allow-empty if that is meant",
            )
        ]
    )


def load_job_files(path: str | None) -> dict[str, Job]:
    from schedctl.jobs.config import load_jobs

    if path is None:
        return {}
    return load_jobs(path)


def job_files(path: str | None) -> list[Path]:
    if path is None:
        return []
    root = Path(path)
    if root.is_dir():
        return [root, *sorted(root.glob("*.toml"))]
    return [root] if root.exists() else []


def warn_writable_job_files(path: str | None) -> None:
    """Anyone who can write a job file can run commands as the worker's user: say so once at start."""
    for file in job_files(path):
        try:
            mode = file.stat().st_mode
        except OSError:
            continue
        if mode & stat.S_IWOTH:
            log.warning(
                "%s is writable by other users: anyone on this host can change what the workers run "
                "(chmod o-w %s)",
                file,
                file,
                extra={"event": "job_file_writable"},
            )


def warn_job_users(jobs: dict[str, Job], run_as_job_user: bool) -> None:
    if run_as_job_user:
        report_unknown_users(jobs)
        return
    with_user = [job.id for job in jobs.values() if job.user]
    if not with_user:
        return
    shown = ", ".join(with_user[:5]) + (", ..." if len(with_user) > 5 else "")
    log.info(
        "%d job(s) name a user (%s) but --run-as-job-user is not given: they run as %s",
        len(with_user),
        shown,
        _current_user(),
        extra={"event": "job_user_ignored"},
    )


def report_unknown_users(jobs: dict[str, Job]) -> None:
    """One line per user the jobs name that this host does not have: their runs would fail every time."""
    from schedctl.worker.executor import unknown_user_reason, unknown_users

    by_user: dict[str, list[str]] = {}
    for job in jobs.values():
        if job.user:
            by_user.setdefault(job.user, []).append(job.id)
    for user in unknown_users(list(by_user)):
        ids = by_user[user]
        shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        log.error(
            "%s; %d job(s) name it: %s",
            unknown_user_reason(user),
            len(ids),
            shown,
            extra={"event": "job_user_unknown", "user": user},
        )


def _current_user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return str(os.getuid())


def _start_metrics(config: ServeConfig, store: Any) -> None:
    if config.metrics_port is None:
        return
    from schedctl.observability import http

    server = http.start(config.metrics_host, config.metrics_port, store)
    log.info(
        "metrics on http://%s:%d/metrics",
        config.metrics_host,
        server.port,
        extra={"event": "metrics_listening"},
    )


def configure_logging(fmt: str, level: str) -> None:
    from schedctl.observability.logging import configure

    configure(fmt, level)
