"""``schedctl status`` (one verdict per job, or one job's timeline) and ``schedctl pause`` / ``resume``."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from schedctl.cli._complete import complete_job_ids
from schedctl.cli._options import db_option, jobs_option, output_option
from schedctl.cli._render import emit, plain, table, utc_text
from schedctl.cli._session import on_job, report_session
from schedctl.cli.missed import iso
from schedctl.jobs.job import PauseSource
from schedctl.store.rows import RunRecord

if TYPE_CHECKING:
    from schedctl.inspect.status import JobStatus, TimelineEntry

_CTX = {"help_option_names": ["-h", "--help"]}
WARN = "!"  # the mark for anything missed, failed, refused or without a leader


@click.command(context_settings=_CTX)
@click.argument("job_id", metavar="[JOB]", required=False, shell_complete=complete_job_ids)
@click.option(
    "--last", "last_n", type=click.IntRange(min=0), default=10, show_default=True, help="Ticks shown."
)
@click.option(
    "--check",
    is_flag=True,
    help="Exit 1 when something is missed, failing, refused, leaderless, or queued with no alive worker "
    "that may take it.",
)
@jobs_option
@db_option
@output_option
def status(
    job_id: str | None,
    last_n: int,
    check: bool,
    jobs_path: str,
    db_url: str,
    output: str,
    as_json: bool,
) -> None:
    """Explain JOB in one verdict line: its definition, next fire, last ticks, and the lease holder.

    Without JOB: one line per job with its last result, next fire and a `!` for anything missed, failed or
    refused. Times are UTC.
    """
    from schedctl.inspect.status import all_status, job_status

    with report_session(jobs_path, job_id, db_url, output, as_json) as (store, jobs, now, fmt):
        if job_id:
            one = job_status(store, jobs[job_id], now, last_n)
            _show_one(one, fmt, now)
            bad = one.verdict_code.bad
        else:
            every = all_status(store, jobs, now)
            _show_all(every, fmt)
            bad = any(s.verdict_code.bad for s in every)
    if check and bad:
        # SystemExit, not ctx.exit: main() runs click with standalone_mode=False, which returns (and so
        # drops) the code of a ctx.exit.
        raise SystemExit(1)


def entry_json(e: TimelineEntry) -> dict[str, Any]:
    from schedctl.inspect.status import entry_reason

    run = e if isinstance(e, RunRecord) else None  # a missed tick has no run to describe
    reason, text = entry_reason(e)
    return {
        "scheduled_for": iso(e.scheduled_for),
        "state": e.state,
        "manual": run is not None and run.manual,
        "attempt": run.attempt if run else 0,
        "worker": run.worker if run else None,
        "queued_at": iso(run.queued_at) if run else None,
        "started_at": iso(run.started_at) if run else None,
        "finished_at": iso(run.finished_at) if run else None,
        "exit_status": run.exit_status if run else None,
        "duration_seconds": run.duration_seconds if run else None,
        "reason": reason,
        "reason_text": text,
    }


def status_json(s: JobStatus, timeline: bool = True) -> dict[str, Any]:
    job, last = s.job, s.last_finished
    out: dict[str, Any] = {
        "job_id": job.id,
        "verdict_code": str(s.verdict_code),
        "verdict": s.verdict,
        "warning": s.verdict_code.bad,
        "schedule": job.schedule,
        "timezone": job.timezone,
        "description": s.description,
        "catch_up": str(job.catch_up),
        "max_catch_up": job.max_catch_up,
        "concurrency": str(job.concurrency),
        "paused": job.paused or s.paused_at is not None,
        "paused_at": iso(s.paused_at),
        "paused_by": s.paused_by,
        "refused_at": iso(s.refused_at),
        "next_fire": iso(s.next_fire),
        "missed_count": len(s.missed),
        "last_state": last.state if last else None,
        "last_scheduled_for": iso(last.scheduled_for) if last else None,
        "last_exit_status": last.exit_status if last else None,
        "lease": None,
    }
    if s.lease is not None:
        out["lease"] = {
            "holder": s.lease.holder,
            "term": s.lease.term,
            "acquired_at": iso(s.lease.acquired_at),
            "renewed_at": iso(s.lease.renewed_at),
            "expires_at": iso(s.lease.expires_at),
            "held": s.lease_held,
        }
    if timeline:
        out["timeline"] = [entry_json(e) for e in s.timeline]
    return out


def _lease_text(s: JobStatus, now: datetime) -> str:
    if s.lease is not None and s.lease_held:
        left = max(0.0, (s.lease.expires_at - now).total_seconds())
        return f"{s.lease.holder} (term {s.lease.term}, since {utc_text(s.lease.acquired_at)}, expires in {left:.0f}s)"
    if s.last_leader is not None:
        t = s.last_leader
        return f"none held; last leader {t.holder} (term {t.term}) until {utc_text(t.held_until)}"
    return "none held, ever"


def _next_text(s: JobStatus) -> str:
    if s.paused_by == PauseSource.JOB_FILE:
        since = f" since {utc_text(s.paused_at)} UTC" if s.paused_at else ""
        return f"none: paused in its job file (paused = true){since}"
    if s.paused_at is not None:
        by = f" by {s.paused_by}" if s.paused_by else ""
        return f"none: paused since {utc_text(s.paused_at)} UTC{by} (`schedctl resume {s.job.id}`)"
    return f"{utc_text(s.next_fire)} UTC" if s.next_fire else "never"


def _entry_cells(e: TimelineEntry) -> list[str]:
    from schedctl.inspect.status import entry_reason

    run = e if isinstance(e, RunRecord) else None  # a missed tick has no run to describe
    reason, text = entry_reason(e)
    duration = run.duration_seconds if run else None
    return [
        utc_text(e.scheduled_for),
        e.state + (" (manual)" if run and run.manual else ""),
        str(run.exit_status) if run and run.exit_status is not None else "-",
        f"{duration:.1f}s" if duration is not None else "-",
        str(run.attempt) if run else "-",
        (run.worker if run else None) or "-",
        text or reason or "-",
    ]


def _show_one(s: JobStatus, fmt: str, now: datetime) -> None:
    if fmt in ("json", "jsonl"):
        emit(fmt, [status_json(s)])
        return
    job = s.job
    # Without job files the job (its id, schedule, and the lease holder) is what the database holds.
    click.echo(plain(f"{job.id}: {s.verdict}"))
    policy = f'catch_up = "{job.catch_up}"' + (
        f", max_catch_up = {job.max_catch_up}" if job.max_catch_up else ""
    )
    described = f", {s.description}" if s.description and s.description != job.schedule else ""
    click.echo(plain(f"  schedule:  {job.schedule} ({job.timezone}){described}"))
    click.echo(f'  policy:    {policy}, concurrency = "{job.concurrency}"')
    click.echo(plain(f"  next:      {_next_text(s)}"))
    click.echo(plain(f"  lease:     {_lease_text(s, now)}"))
    if s.missed:
        click.echo(
            plain(f"  missed:    {len(s.missed)} ticks in the window (`schedctl missed {job.id}` lists them)")
        )
    if s.timeline:
        click.echo("")
        table(
            [_entry_cells(e) for e in s.timeline],
            ("SCHEDULED (UTC)", "STATE", "EXIT", "DURATION", "ATTEMPT", "WORKER", "DETAIL"),
        )


def _show_all(every: list[JobStatus], fmt: str) -> None:
    if fmt in ("json", "jsonl"):
        emit(fmt, [status_json(s, timeline=False) for s in every])
        return
    rows = []
    for s in every:
        last = s.last_finished
        rows.append(
            [
                WARN if s.verdict_code.bad else "",
                s.job.id,
                f"{last.state} {utc_text(last.finished_at or last.scheduled_for)}" if last else "-",
                str(last.exit_status) if last and last.exit_status is not None else "-",
                "paused" if s.paused else utc_text(s.next_fire),
                str(len(s.missed)) if s.missed else "-",
                s.verdict,
            ]
        )
    table(rows, ("", "JOB", "LAST (UTC)", "EXIT", "NEXT (UTC)", "MISSED", "VERDICT"))


# -- pause / resume -----------------------------------------------------------------------------------------


@click.command(context_settings=_CTX)
@click.argument("job_id", metavar="JOB", shell_complete=complete_job_ids)
@jobs_option
@db_option
def pause(job_id: str, jobs_path: str, db_url: str) -> None:
    """Pause JOB: no tick is dispatched until `schedctl resume JOB`, whatever the job file says.

    Recorded in the database, so every scheduler replica honours it and `schedctl missed` explains the gap.
    """
    from schedctl.inspect.jobcontrol import pause as do_pause

    job, result = on_job(jobs_path, job_id, db_url, do_pause)
    if result.changed:
        click.echo(f"{job_id}: paused; nothing is dispatched until `schedctl resume {job_id}`")
    else:
        click.echo(f"{job_id}: already paused since {utc_text(result.paused_at)} UTC")


@click.command(context_settings=_CTX)
@click.argument("job_id", metavar="JOB", shell_complete=complete_job_ids)
@jobs_option
@db_option
def resume(job_id: str, jobs_path: str, db_url: str) -> None:
    """Resume JOB paused by `schedctl pause`; the ticks paused over go through its catch-up policy."""
    from schedctl.inspect.jobcontrol import resume as do_resume

    job, result = on_job(jobs_path, job_id, db_url, do_resume)
    if result.changed:
        click.echo(f'{job_id}: resumed; the ticks paused over go through catch_up = "{job.catch_up}"')
    else:
        click.echo(f"{job_id}: was not paused by `schedctl pause`")
    if result.paused_by_file:
        click.echo(f"{job_id}: still paused by its job file (paused = true)", err=True)
