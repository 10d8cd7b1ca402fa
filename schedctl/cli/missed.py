"""``schedctl missed`` (ticks that did not run, with reasons) and ``schedctl replay`` (dispatch them, bounded).

The prologue both share with ``status``, ``runs`` and ``pause`` is ``cli/_session.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from schedctl.cli._complete import complete_job_ids
from schedctl.cli._options import db_option, jobs_option, output_option
from schedctl.cli._render import emit, plain, table, utc_text
from schedctl.cli._session import db_clock, load_selected, open_db, parse_time, report_session

if TYPE_CHECKING:
    from schedctl.inspect.missed import MissedCount, MissedTick
    from schedctl.inspect.replay import ReplayPlan
    from schedctl.store import Store

_CTX = {"help_option_names": ["-h", "--help"]}
F = TypeVar("F", bound=Callable[..., Any])


def instant_option(name: str, help_text: str) -> Callable[[F], F]:
    def decorate(f: F) -> F:
        return click.option(name, metavar="TIME", default=None, help=help_text)(f)

    return decorate


def iso(at: datetime | None) -> str | None:
    from schedctl.timing.timetext import rfc3339

    return rfc3339(at) if at is not None else None


# -- missed -------------------------------------------------------------------------------------------------


@click.command(context_settings=_CTX)
@click.argument("job_id", metavar="[JOB]", required=False, shell_complete=complete_job_ids)
@instant_option(
    "--since", "First tick to look at (RFC 3339, UTC when no offset, e.g. 6h or -6h for 6 hours ago, or now)."
)
@instant_option(
    "--until",
    "Look at ticks before this time (default: now minus the leader's catch-up grace, and the skips the "
    "leader recorded since). With JOB, the other ticks younger than the grace that have not run are listed "
    "as late, not missed.",
)
@click.option("--check", is_flag=True, help="Exit 1 when any tick was missed (for monitoring).")
@jobs_option
@db_option
@output_option
def missed(
    job_id: str | None,
    since: str | None,
    until: str | None,
    check: bool,
    jobs_path: str,
    db_url: str,
    output: str,
    as_json: bool,
) -> None:
    """List the ticks of JOB that did not run, each with its reason; without JOB, a count per job.

    The default window starts when a scheduler first saw the job (or its first dispatch), at most 7 days
    back, and ends at now minus the catch-up grace the current leader recorded (`serve --catch-up-grace`): a
    younger tick is late, not missed, unless the leader already recorded it as skipped (listed at once, with
    its reason: nothing about it can change). With --until past the grace, the other younger ticks that have
    not run are listed with reason `late` (queued and waiting for a worker, or no leader since T); --check
    ignores them. Missed
    ticks stay listed for `serve --keep-missed` (7d), whatever the run history limits. Times are UTC.
    """
    from schedctl.inspect.missed import TickState, missed_counts
    from schedctl.inspect.missed import missed as find_missed

    host_now = datetime.now(UTC)
    lo, hi = parse_time(since, "--since", host_now), parse_time(until, "--until", host_now)
    with report_session(jobs_path, job_id, db_url, output, as_json) as (store, jobs, now, fmt):
        if job_id:
            ticks = find_missed(store, jobs[job_id], lo, hi, now, late=hi is not None)
            _show_ticks(job_id, ticks, fmt)
            found = any(t.state == TickState.MISSED for t in ticks)
        else:
            counts = missed_counts(store, jobs, now, lo, hi)
            _say_what_is_left_to_the_leader(store, hi, now, "not counted here (name a JOB to list them)")
            _show_counts(counts, fmt)
            found = any(c.count for c in counts)
    if check and found:
        # SystemExit, not ctx.exit: main() runs click with standalone_mode=False, which returns (and so
        # drops) the code of a ctx.exit.
        raise SystemExit(1)


def tick_json(job_id: str, t: MissedTick) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "scheduled_for": iso(t.scheduled_for),
        "reason": t.reason_code,
        "reason_text": t.reason_text,
        "row_state": t.row_state,
        "state": t.state,
    }


def _show_ticks(job_id: str, ticks: list[MissedTick], fmt: str) -> None:
    if fmt in ("json", "jsonl"):
        emit(fmt, [tick_json(job_id, t) for t in ticks])
    elif not ticks:
        click.echo(plain(f"{job_id}: no missed ticks"), err=True)
    else:
        rows = [[utc_text(t.scheduled_for), t.reason_code, t.row_state or "-", t.reason_text] for t in ticks]
        table(rows, ("SCHEDULED (UTC)", "REASON", "ROW", "WHY"))


def _show_counts(counts: list[MissedCount], fmt: str) -> None:
    if fmt in ("json", "jsonl"):
        emit(
            fmt,
            [
                {
                    "job_id": c.job_id,
                    "missed": c.count,
                    "reasons": dict(c.reasons),
                    "first": iso(c.first),
                    "last": iso(c.last),
                }
                for c in counts
            ],
        )
        return
    rows = [
        [
            c.job_id,
            str(c.count),
            ", ".join(f"{k} {v}" for k, v in sorted(c.reasons.items())) or "-",
            utc_text(c.first),
            utc_text(c.last),
        ]
        for c in counts
    ]
    table(rows, ("JOB", "MISSED", "REASONS", "FIRST (UTC)", "LAST (UTC)"))


# -- replay -------------------------------------------------------------------------------------------------


@click.command(context_settings=_CTX)
@click.argument("job_ids", metavar="[JOB]...", nargs=-1, shell_complete=complete_job_ids)
@click.option(
    "--max",
    "max_n",
    type=click.IntRange(min=0),
    required=True,
    help="Refuse if more ticks than this would run.",
)
@instant_option(
    "--since", "First tick to replay (RFC 3339, UTC when no offset, e.g. 6h or -6h for 6 hours ago, or now)."
)
@instant_option("--until", "Replay ticks before this time.")
@click.option("--dry-run", is_flag=True, help="List what would be replayed; change nothing.")
@click.option(
    "--yes", "-y", is_flag=True, help="Do not ask for confirmation (required when stdin is not a terminal)."
)
@jobs_option
@db_option
def replay(
    job_ids: tuple[str, ...],
    max_n: int,
    since: str | None,
    until: str | None,
    dry_run: bool,
    yes: bool,
    jobs_path: str,
    db_url: str,
) -> None:
    """Dispatch the missed ticks of JOBs (all jobs when none is named), oldest first, at most --max of them.

    Exactly the ticks `schedctl missed` lists are queued, through the same fire-once claim as the scheduler,
    so a tick that ran is never dispatched twice and replaying again does nothing. The job's skip/latest
    policy and starting_deadline do not filter an operator's replay; its concurrency still holds when the runs
    execute. A catch-up refusal is cleared so the scheduler resumes the job. Exit 0 when it replayed or found
    nothing to replay, 1 when it refused (and then nothing was changed).
    """
    from schedctl.errors import ReplayRefused
    from schedctl.inspect.replay import plan_replay, refusal_message
    from schedctl.inspect.replay import replay as run_replay

    if not dry_run and not yes and not stdin_is_terminal():
        raise click.UsageError(
            "replay changes the database: pass --yes to confirm when stdin is not a terminal"
        )
    now = datetime.now(UTC)
    lo, hi = parse_time(since, "--since", now), parse_time(until, "--until", now)
    jobs = load_selected(jobs_path, job_ids, now)
    store = open_db(db_url)
    now = db_clock(store)
    try:
        plan = plan_replay(store, jobs.values(), lo, hi, now)
        _say_what_is_left_to_the_leader(store, hi, now)
        if dry_run:
            _show_plan(plan)
        if len(plan.ticks) > max_n:
            raise ReplayRefused(refusal_message(plan, max_n))
        if plan.empty:
            click.echo("nothing to replay", err=True)
            return
        if dry_run:
            click.echo(f"would replay {len(plan.ticks)} ticks (--dry-run: nothing was changed)", err=True)
            return
        if not yes:
            _show_plan(plan)
            click.confirm(f"Replay {len(plan.ticks)} ticks?", abort=True, err=True)
        with _progress(len(plan.ticks)) as advance:
            result = run_replay(store, jobs, max_n, lo, hi, now, plan=plan, progress=advance)
    finally:
        store.dispose()
    _report(result.plan, result.dispatched, result.already)


def _say_what_is_left_to_the_leader(
    store: Store,
    until: datetime | None,
    now: datetime,
    what: str = "the leader dispatches them, replay does not",
) -> None:
    """An --until past the grace counts or replays nothing younger than it: say so rather than stay silent."""
    from datetime import timedelta

    from schedctl.store.snapshot import current_grace

    if until is None:
        return
    with store.read() as conn:
        grace = current_grace(conn)
    cutoff = now - timedelta(seconds=grace)
    if until > cutoff:
        click.echo(
            f"ticks after {utc_text(cutoff)} UTC not recorded as skipped are younger than the leader's catch-up "
            f"grace ({grace:g}s): late, not missed; {what}",
            err=True,
        )


def stdin_is_terminal() -> bool:
    """Whether someone can answer a confirmation (a seam for tests: CliRunner's stdin never is one)."""
    return sys.stdin.isatty()


def _show_plan(plan: ReplayPlan) -> None:
    rows = [[t.job_id, utc_text(t.scheduled_for), t.action, t.reason_code] for t in plan.ticks]
    if rows:
        table(rows, ("JOB", "SCHEDULED (UTC)", "ACTION", "MISSED BECAUSE"))
    for job_id in plan.clears:
        click.echo(
            plain(f"{job_id}: its catch-up refusal will be cleared, so the scheduler resumes it"), err=True
        )


def _report(plan: ReplayPlan, dispatched: int, already: int) -> None:
    for job_id, n in sorted(plan.per_job().items()):
        ticks = [t.scheduled_for for t in plan.ticks if t.job_id == job_id]
        click.echo(
            plain(f"{job_id}: {n} ticks queued ({utc_text(min(ticks))} .. {utc_text(max(ticks))} UTC)")
        )
    if already:
        click.echo(
            f"{already} of them had been dispatched by someone else meanwhile: not queued again", err=True
        )
    for job_id in plan.clears:
        click.echo(plain(f"{job_id}: catch-up refusal cleared; the scheduler resumes it"))
    click.echo(f"replayed {dispatched} ticks", err=True)


class _progress:
    """A rich progress bar on stderr for long replays on a terminal; silent otherwise."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar: Any = None

    def __enter__(self) -> Any:
        if self.total < 1000 or not sys.stderr.isatty():
            return None
        from rich.progress import Progress

        from schedctl.cli._render import console

        self.bar = Progress(console=console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task("replaying", total=self.total)
        return lambda done, total: self.bar.update(task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
