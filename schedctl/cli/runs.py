"""``schedctl runs``, ``run``, ``logs`` and ``cancel``: look at runs, queue one by hand, stop one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from schedctl.cli._complete import complete_job_ids
from schedctl.cli._options import db_option, jobs_option, output_option, resolve_output
from schedctl.cli._render import utc_text
from schedctl.jobs.job import CancelResult, RunState
from schedctl.timing.timetext import instant_text, rfc3339

if TYPE_CHECKING:
    from schedctl.store.rows import RunRecord

_CTX = {"help_option_names": ["-h", "--help"]}
STATES = tuple(s.value for s in RunState)  # plain strings: click matches Enum choices by member name
COLUMNS = ("JOB", "SCHEDULED FOR", "STATE", "ATTEMPT", "WORKER", "STARTED", "DURATION", "EXIT")
WIDE = ("MANUAL", "REASON")


class Instant(click.ParamType):
    """A run's key: RFC 3339 (``2026-03-01T02:30:00Z``, ``...+01:00``); no offset means UTC."""

    name = "SCHEDULED_FOR"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        from schedctl.text.printable import quoted
        from schedctl.timing.timetext import parse_timestamp

        try:
            return parse_timestamp(str(value))
        except ValueError:
            self.fail(
                f"{quoted(str(value))} is not an RFC 3339 time such as 2026-03-01T02:30:00Z", param, ctx
            )


@click.command(context_settings=_CTX)
@click.argument("job_id", metavar="[JOB]", required=False, shell_complete=complete_job_ids)
@click.option("--state", type=click.Choice(STATES), help="Only runs in this state.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Runs shown.")
@db_option
@output_option
def runs(job_id: str | None, state: str | None, limit: int, db_url: str, output: str, as_json: bool) -> None:
    """List recent runs (newest tick first) with state, attempt, worker, start, duration and exit status."""
    from schedctl.cli._store import explained, open_checked_store
    from schedctl.store.runs import list_runs

    store = open_checked_store(db_url)
    try:
        with explained(store):
            found = list_runs(store, job_id, state, limit)
    finally:
        store.dispose()
    from schedctl.cli._render import listing

    listing(store, resolve_output(output, as_json), found, run_json, _row, COLUMNS, WIDE)


def run_json(r: RunRecord) -> dict[str, Any]:
    return {
        "job_id": r.job_id,
        "scheduled_for": _iso(r.scheduled_for),
        "state": r.state,
        "attempt": r.attempt,
        "worker": r.worker,
        "started_at": _iso(r.started_at),
        "finished_at": _iso(r.finished_at),
        "duration_seconds": None if r.duration_seconds is None else round(r.duration_seconds, 6),
        "exit_status": r.exit_status,
        "manual": r.manual,
        "reason": r.reason,
        "error": r.error,
        "cancel_requested": r.cancel_requested,
    }


def _row(r: RunRecord, wide: bool) -> list[str]:
    duration = "-" if r.duration_seconds is None else f"{r.duration_seconds:.1f}s"
    state = f"{r.state} (cancel requested)" if r.cancel_requested and r.state == RunState.RUNNING else r.state
    row = [
        r.job_id,
        instant_text(r.scheduled_for),
        state,
        str(r.attempt),
        r.worker or "-",
        utc_text(r.started_at),
        duration,
        "-" if r.exit_status is None else str(r.exit_status),
    ]
    if wide:
        row += ["yes" if r.manual else "no", r.error or r.reason or "-"]
    return row


@click.command(context_settings=_CTX)
@click.argument("job_id", metavar="JOB", shell_complete=complete_job_ids)
@jobs_option
@db_option
def run(job_id: str, jobs_path: str, db_url: str) -> None:
    """Queue a manual run of JOB now (keyed by this instant, to the microsecond); a worker runs it."""
    from schedctl.cli._session import load_selected
    from schedctl.cli._store import explained, open_checked_store
    from schedctl.store.runs import queue_manual

    now = datetime.now(UTC)
    job = load_selected(jobs_path, [job_id], now)[job_id]
    store = open_checked_store(db_url)
    try:
        with explained(store):
            key = queue_manual(store, job, now)
    finally:
        store.dispose()
    click.echo(f"queued {job_id} {instant_text(key)}")


@click.command(context_settings=_CTX)
@click.argument("job_id", metavar="JOB", shell_complete=complete_job_ids)
@click.argument("scheduled_for", type=Instant(), required=False)
@click.option(
    "--raw", is_flag=True, help="Print the output as stored even on a terminal (control characters included)."
)
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Follow the run's output while it runs (default run: the one running, else the next queued) and "
    "exit 0 when it ends; its outcome is the last line on stderr.",
)
@db_option
def logs(job_id: str, scheduled_for: datetime | None, raw: bool, follow: bool, db_url: str) -> None:
    """Print the stored output tail of a run of JOB (default: its latest run that started).

    On a terminal, control characters other than newline and tab are shown escaped (\\x1b); in a pipe, or
    with --raw, the output is exactly as stored. With -f, new output is printed as the worker stores it
    (every `serve --output-interval`, 2s by default) until the run ends; a retry's output follows."""
    from schedctl.cli._store import explained, open_checked_store
    from schedctl.store.runs import resolve_tick, run_output

    store = open_checked_store(db_url)
    if follow:
        try:
            with explained(store):
                _follow(store, job_id, scheduled_for, raw)
        finally:
            store.dispose()
        return
    try:
        with explained(store):
            if scheduled_for is not None:
                scheduled_for = resolve_tick(store, job_id, scheduled_for)
            found, text = run_output(store, job_id, scheduled_for)
    finally:
        store.dispose()
    import sys

    from schedctl.text.printable import escape_controls, escape_output

    header = f"# {found.job_id} {instant_text(found.scheduled_for)} attempt {found.attempt}: {found.state}"
    click.echo(escape_controls(header), err=True)
    text = text or ""
    click.echo(text if raw or not sys.stdout.isatty() else escape_output(text), nl=False)


def _follow(store: Any, job_id: str, scheduled_for: datetime | None, raw: bool) -> None:
    import sys

    from schedctl.inspect.follow import follow
    from schedctl.store.runs import current_run, resolve_tick
    from schedctl.text.printable import escape_controls, escape_output

    key = (
        resolve_tick(store, job_id, scheduled_for)
        if scheduled_for is not None
        else current_run(store, job_id)
    )
    shown = (lambda t: t) if raw or not sys.stdout.isatty() else escape_output
    first = True
    for update in follow(store, job_id, key):
        r = update.record
        head = f"# {r.job_id} {instant_text(r.scheduled_for)} attempt {r.attempt}"
        if first and not update.ended:
            click.echo(escape_controls(f"{head}: {r.state}, following (Ctrl-C stops)"), err=True)
        if update.note is not None:
            click.echo(escape_controls(f"{head}: {update.note}"), err=True)
        if update.output:
            click.echo(shown(update.output), nl=False)
        if update.ended:
            status = "" if r.exit_status is None else f", exit status {r.exit_status}"
            click.echo(escape_controls(f"{head}: {r.state}{status}"), err=True)
        first = False


@click.command(context_settings=_CTX)
@click.argument("job_id", metavar="JOB", shell_complete=complete_job_ids)
@click.argument("scheduled_for", type=Instant())
@db_option
def cancel(job_id: str, scheduled_for: datetime, db_url: str) -> None:
    """Cancel a run: a queued one at once, a running one by asking its worker (SIGTERM, grace, SIGKILL).

    SCHEDULED_FOR may be given to the second (`2026-03-01T02:30:00Z`) even for a manual run, keyed to the
    microsecond: the one run in that second is cancelled, and several are listed for you to choose.
    """
    from schedctl.cli._store import explained, open_checked_store
    from schedctl.store.runs import cancel as cancel_run
    from schedctl.store.runs import resolve_tick

    store = open_checked_store(db_url)
    try:
        with explained(store):
            scheduled_for = resolve_tick(store, job_id, scheduled_for)
            result = cancel_run(store, job_id, scheduled_for)
    finally:
        store.dispose()
    from schedctl.text.printable import escape_controls, quoted

    key = f"{escape_controls(job_id)} {instant_text(scheduled_for)}"
    if result == CancelResult.CANCELLED:
        click.echo(f"cancelled {key}")
    elif result == CancelResult.CANCEL_REQUESTED:
        click.echo(f"cancel requested for {key}: its worker stops it at its next heartbeat")
    else:
        from schedctl.errors import SchedctlError

        raise SchedctlError(
            f"{quoted(job_id)} {instant_text(scheduled_for)} already ended ({result}); nothing to cancel"
        )


def _iso(at: datetime | None) -> str | None:
    return rfc3339(at) if at is not None else None
