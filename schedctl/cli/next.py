"""``schedctl next``: when a job, or any cron expression, fires next, in its zone and in UTC."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from schedctl.cli._complete import complete_job_ids
from schedctl.cli._options import jobs_option
from schedctl.cli._session import parse_time  # the same reading as `missed --since/--until`

if TYPE_CHECKING:
    from schedctl.timing.cron import Fire, Schedule

_RICH_MAX = 1000  # a terminal table is built in memory; beyond this, stream plain lines


@click.command("next", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job", required=False, shell_complete=complete_job_ids)
@jobs_option
@click.option("--schedule", "expr", metavar="EXPR", help="A cron expression, instead of a JOB.")
@click.option("--timezone", "zone", metavar="TZ", help="IANA zone for --schedule (required with it).")
@click.option("--dst-gap", type=click.Choice(["run", "skip"]), help="Override the cron DST rule for gaps.")
@click.option("--dst-overlap", type=click.Choice(["first", "last", "both"]), help="... and for overlaps.")
@click.option(
    "--from",
    "start",
    metavar="T",
    help="Fires strictly after T (RFC 3339, UTC when no offset, e.g. 6h or -6h for 6 hours ago, or now; default now).",
)
@click.option("--until", "end", metavar="T", help="Fires strictly before T (as --from).")
@click.option("--count", type=click.IntRange(min=1), help="At most N fires (default 10 unless --until).")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of {utc, local, gap_moved, overlap}.")
def next_(
    job: str | None, jobs_path: str, expr: str | None, zone: str | None, dst_gap: str | None,
    dst_overlap: str | None, start: str | None, end: str | None, count: int | None, as_json: bool,
) -> None:  # fmt: skip
    """Show when JOB, or --schedule EXPR --timezone TZ, fires next: local time, UTC, and DST marks.

    `>` marks a fire moved to the end of a spring-forward gap; `1`/`2` the first/second pass of a repeated
    (fall-back) wall time.
    """
    now = datetime.now(UTC)
    after = parse_time(start, "--from", now) or now
    until = parse_time(end, "--until", now)
    schedule = _schedule(job, jobs_path, expr, zone, dst_gap, dst_overlap, after)
    limit = count if count is not None else (None if until is not None else 10)
    fires = schedule.fires(after, until)
    stream: Iterator[Fire] = (
        fires if limit is None else (f for _, f in zip(range(limit), fires, strict=False))
    )
    if as_json:
        _json(stream)
    elif sys.stdout.isatty() and limit is not None and limit <= _RICH_MAX:
        _rich(schedule, stream)
    else:
        _plain(schedule, stream)


def _schedule(
    job: str | None, jobs_path: str, expr: str | None, zone: str | None, dst_gap: str | None,
    dst_overlap: str | None, now: datetime,
) -> Schedule:  # fmt: skip
    from schedctl.errors import SchedctlError
    from schedctl.timing import cron
    from schedctl.timing.zones import DstGap, DstOverlap, DstPolicy

    if job is not None:
        if expr or zone or dst_gap or dst_overlap:
            raise click.UsageError("give either JOB or --schedule/--timezone/--dst-*, not both")
        return _job_schedule(job, jobs_path, now)
    if expr is None or zone is None:
        raise click.UsageError("give a JOB, or --schedule EXPR with --timezone TZ")
    try:
        cron.validate_expression(expr, now=now)
    except SchedctlError as exc:
        raise click.BadParameter(str(exc), param_hint="--schedule") from None
    try:
        cron.validate_zone(zone)
    except SchedctlError as exc:
        raise click.BadParameter(str(exc), param_hint="--timezone") from None
    dst = None
    if dst_gap or dst_overlap:
        dst = DstPolicy(
            DstGap(dst_gap) if dst_gap else None, DstOverlap(dst_overlap) if dst_overlap else None
        )
    return cron.schedule_for(expr, zone, dst)


def _job_schedule(job_id: str, jobs_path: str, now: datetime) -> Schedule:
    import difflib

    from schedctl.errors import JobNotFound
    from schedctl.jobs.config import load_jobs
    from schedctl.text.printable import cut, quoted
    from schedctl.timing import cron

    jobs = load_jobs(jobs_path, now=now)
    if job_id not in jobs:
        close = difflib.get_close_matches(job_id, list(jobs), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise JobNotFound(f"no job {quoted(job_id)} in {cut(jobs_path)}{hint}")
    job = jobs[job_id]
    if job.paused:
        click.echo(
            f"schedctl: note: {job_id} is paused in its job file; these are the times it would fire", err=True
        )
    return cron.schedule_for(job.schedule, job.timezone, job.dst)


def _utc(fire: Fire) -> str:
    from schedctl.timing.timetext import instant_text

    return instant_text(fire.utc)


def _mark(schedule: Schedule, fire: Fire) -> str:
    if fire.gap_moved:
        return "> moved to the end of a DST gap"
    if fire.overlap is None:
        return ""
    from schedctl.timing.zones import DstOverlap

    first = fire.overlap == DstOverlap.FIRST
    if schedule.overlap == DstOverlap.BOTH:
        return "1 repeated time, first pass" if first else "2 repeated time, second pass"
    return f"{'1' if first else '2'} repeated time: runs at its {fire.overlap} pass only"


def _json(fires: Iterator[Fire]) -> None:
    # Streamed, so --count 1000000 does not build a list.
    out = sys.stdout
    out.write("[")
    for i, fire in enumerate(fires):
        row = {"utc": _utc(fire), "local": fire.local.isoformat(), "gap_moved": fire.gap_moved,
               "overlap": fire.overlap}  # fmt: skip
        out.write(("," if i else "") + "\n  " + json.dumps(row))
    out.write("\n]\n")


def _local(fire: Fire) -> str:
    return f"{fire.local:%Y-%m-%d %H:%M:%S%z} {fire.local.tzname()}"


def _plain(schedule: Schedule, fires: Iterator[Fire]) -> None:
    click.echo(f"# {schedule.describe()} ({schedule.zone})", err=True)
    width = 0
    for i, fire in enumerate(fires):
        local = _local(fire)
        if i == 0:
            width = max(len(local) + 2, len("LOCAL") + 2)
            click.echo(f"{'LOCAL':<{width}}{'UTC':<22}NOTE")
        click.echo(f"{local:<{width}}{_utc(fire):<22}{_mark(schedule, fire)}".rstrip())


def _rich(schedule: Schedule, fires: Iterator[Fire]) -> None:
    from rich.table import Table

    from schedctl.cli._render import console, text

    table = Table(title=text(f"{schedule.describe()} ({schedule.zone})"), title_justify="left", box=None)
    table.add_column("LOCAL", no_wrap=True)
    table.add_column("UTC", no_wrap=True)
    table.add_column("NOTE")
    for fire in fires:
        table.add_row(text(_local(fire)), text(_utc(fire)), text(_mark(schedule, fire)))
    console().print(table)
