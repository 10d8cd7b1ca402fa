"""``schedctl jobs`` (list the job definitions) and ``schedctl validate`` (check job files)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from schedctl.cli._options import db_option, jobs_option, output_option, resolve_output
from schedctl.timing.timetext import ago, short_duration

if TYPE_CHECKING:
    from schedctl.inspect.joblist import JobRow
    from schedctl.store import Store

_COLUMNS = ("ID", "SCHEDULE", "DESCRIPTION", "TIMEZONE", "CATCH-UP", "NEXT", "LEFT", "LAST", "STATE")
_WIDE = ("CRON", "CONCURRENCY", "MAX-CATCH-UP", "PAUSED", "NEXT-UTC", "COMMAND")
_FREE_TEXT = ("SCHEDULE", "DESCRIPTION", "COMMAND")  # wrapped at 40 columns on a terminal


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@jobs_option
@db_option
@output_option
def jobs(jobs_path: str, db_url: str, output: str, as_json: bool) -> None:
    """List the job definitions with their next fire and last run.

    SCHEDULE is the schedule in plain English (-o wide adds the CRON expression), DESCRIPTION the job's
    description (from a crontab: the comment above the line). NEXT is in the job's zone. LAST and STATE come from the database when one with a current schema is there,
    and are `-` otherwise: this command never creates a database. Without job files (the path does not exist
    or defines no jobs) it lists the jobs as the leader stored them in the database. Sorted by next fire.
    """
    from schedctl.cli._options import DEFAULT_JOBS
    from schedctl.cli._store import explained, open_store_if_present
    from schedctl.errors import StoreError
    from schedctl.inspect.joblist import list_jobs
    from schedctl.inspect.jobsource import report_jobs

    now = datetime.now(UTC)
    store, unreadable = None, None
    try:
        store = open_store_if_present(db_url)
    except StoreError as exc:  # the job files alone still list; list_jobs says why LAST is missing
        unreadable = exc

    def database() -> Store | None:
        if unreadable is not None:
            raise unreadable
        return store

    try:
        if store is not None:
            with explained(store):
                found = report_jobs(jobs_path, [], now, store, default=jobs_path == DEFAULT_JOBS)
        else:
            # No job file, and the database that would stand in for it is unreadable: say why it is.
            if unreadable is not None and not Path(jobs_path).exists():
                raise unreadable
            found = report_jobs(jobs_path, [], now, None)
            if unreadable is not None and not found.jobs:
                raise unreadable
        for note in found.notes:
            click.echo(note, err=True)
        listing = list_jobs(found.jobs, now, database)
    finally:
        if store is not None:
            store.dispose()
    if listing.warning:
        click.echo(f"schedctl: warning: {listing.warning}", err=True)
    fmt = resolve_output(output, as_json)
    if fmt == "json":
        click.echo(json.dumps([r.to_json() for r in listing.rows], indent=2, ensure_ascii=False))
    elif fmt == "jsonl":
        for row in listing.rows:
            click.echo(json.dumps(row.to_json(), ensure_ascii=False))
    elif not listing.rows:
        click.echo(f"no jobs defined in {jobs_path}", err=True)
    else:
        _table(
            [_cells(r, now, wide=fmt == "wide") for r in listing.rows],
            _COLUMNS + (_WIDE if fmt == "wide" else ()),
        )


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(allow_dash=True))
@jobs_option
def validate(paths: tuple[str, ...], jobs_path: str) -> None:
    """Check job files (PATHS, default --jobs; - reads TOML from stdin); exit 0 only when every job is valid,
    78 otherwise.

    Every error is printed on one line as FILE:LINE: jobs.<id>.<key>: message.
    """
    from schedctl.cli._stdio import DASH, STDIN_NAME, load_jobs_from
    from schedctl.errors import ConfigError

    now = datetime.now(UTC)
    problems = []
    for path in paths or (jobs_path,):
        try:
            found = load_jobs_from(path, now)
        except ConfigError as exc:
            problems.extend(exc.diagnostics)
            continue
        name = STDIN_NAME if path == DASH else path
        click.echo(
            f"{name}: {len(found)} job{'s' if len(found) != 1 else ''} OK" if found else f"{name}: no jobs"
        )
    if problems:
        raise ConfigError(problems)


def _cells(row: JobRow, now: datetime, wide: bool) -> list[str]:
    job = row.job
    nxt = row.next_fire
    cells = [
        job.id,
        row.when,
        " ".join(job.description.split()) if job.description else "-",  # a comment block: one line
        job.timezone,
        str(job.catch_up),
        nxt.strftime("%Y-%m-%d %H:%M:%S %Z") if nxt else "-",
        short_duration((nxt - now).total_seconds()) if nxt else ("paused" if row.paused else "-"),
        _ago(row.last_run_at, now) if row.last_run_at else "-",
        row.last_run_state or "-",
    ]
    if wide:
        command = job.command if isinstance(job.command, str) else json.dumps(list(job.command))
        cells += [
            job.schedule,
            str(job.concurrency),
            str(job.max_catch_up) if job.max_catch_up is not None else "-",
            "yes" if row.paused else "no",
            nxt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") if nxt else "-",
            " ".join(command.split()),
        ]
    return cells


def _ago(moment: datetime, now: datetime) -> str:
    if moment > now:  # started after this machine's now (clocks apart): the instant says more than "0s ago"
        return moment.strftime("%Y-%m-%d %H:%M:%SZ")
    return ago((now - moment).total_seconds())


def _table(rows: list[list[str]], header: tuple[str, ...]) -> None:
    """A rich table on a terminal; plain aligned columns otherwise, so pipes and scripts get stable text."""
    from schedctl.cli._render import console as make_console
    from schedctl.cli._render import plain, text

    rows = [[plain(cell) for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    if sys.stdout.isatty():
        from rich.table import Table

        table = Table(box=None, header_style="bold", pad_edge=False)
        for name in header:
            # Free text wraps at 40; nothing else is cut: like kubectl, a wide table lets the terminal wrap.
            free = name in _FREE_TEXT
            table.add_column(name, no_wrap=not free, max_width=40 if free else None, overflow="fold")
        for row in rows:
            table.add_row(*(text(cell) for cell in row))
        console = make_console()
        natural = sum(
            min(w, 40) if h in _FREE_TEXT else w for w, h in zip(widths, header, strict=True)
        ) + 2 * len(header)
        console.width = max(console.width, natural)
        console.print(table)
        return
    for line in [list(header), *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
