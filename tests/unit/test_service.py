"""Start-up warnings of `schedctl serve` (issue 8: a job file others can write runs their commands)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from schedctl.jobs.job import CatchUp, Job
from schedctl.service import warn_job_users, warn_writable_job_files


def test_a_job_file_writable_by_others_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "jobs"
    folder.mkdir()
    safe, open_ = folder / "a.toml", folder / "b.toml"
    safe.write_text("")
    open_.write_text("")
    os.chmod(safe, 0o644)
    os.chmod(open_, 0o666)
    os.chmod(folder, 0o755)
    with caplog.at_level(logging.WARNING, logger="schedctl.service"):
        warn_writable_job_files(str(folder))
    lines = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "job_file_writable"]
    assert len(lines) == 1 and str(open_) in lines[0] and "chmod o-w" in lines[0]


def test_jobs_naming_a_user_without_run_as_job_user_get_one_info_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    jobs = {
        j: Job(j, "* * * * *", "UTC", CatchUp.SKIP, "true", user="backup" if j != "c" else None)
        for j in "abc"
    }
    with caplog.at_level(logging.INFO, logger="schedctl.service"):
        warn_job_users(jobs, run_as_job_user=False)
        warn_job_users(jobs, run_as_job_user=True)
    lines = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "job_user_ignored"]
    assert len(lines) == 1 and lines[0].startswith("2 job(s) name a user (a, b)")


def test_serve_passes_keep_missed_and_the_grace_on_to_the_loops() -> None:
    from schedctl.cli.serve import _config, serve
    from schedctl.jobs.job import DEFAULT_CATCH_UP_GRACE
    from schedctl.store.missedrecord import DEFAULT_KEEP_MISSED

    ctx = serve.make_context("serve", ["--keep-missed", "2d", "--catch-up-grace", "5s"])
    config = _config(ctx.params)
    assert config.worker.keep_missed == 2 * 86400 and config.scheduler.catch_up_grace == 5
    defaults = _config(serve.make_context("serve", []).params)
    assert defaults.worker.keep_missed == DEFAULT_KEEP_MISSED == 7 * 86400
    assert defaults.scheduler.catch_up_grace == DEFAULT_CATCH_UP_GRACE == 60


def test_a_stop_signal_while_loading_passes_the_loaders_catch_all_instead_of_failing_a_job() -> None:
    """The signal lands wherever the parse is, also inside the `except Exception` that turns a cron library's
    failure into one line about a job: it must still stop the start-up, not become exit 78."""
    import signal
    import time

    from schedctl import service
    from schedctl.jobs import configkeys

    signals = service._Signals()
    previous = signal.signal(signal.SIGTERM, signals._on_stop)
    try:
        with pytest.raises(service.StartupInterrupted), signals.interruptible():
            configkeys._guarded(lambda: (os.kill(os.getpid(), signal.SIGTERM), time.sleep(5)))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert signals.stopping.is_set()
