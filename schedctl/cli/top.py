"""``schedctl top``: a live full-screen view of the cluster (rich ``Live``); ``--once`` prints one frame."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from schedctl.cli._options import db_option
from schedctl.jobs.job import DEFAULT_LEASE_NAME

if TYPE_CHECKING:
    from schedctl.inspect.top import Frame


@click.command("top", context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--once", is_flag=True, help="Print one frame and exit (also what happens when stdout is not a terminal)."
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=1.0,
    show_default=True,
    help="Seconds between frames.",
)
@click.option(
    "--name", default=DEFAULT_LEASE_NAME, show_default=True, help="Lease name (one per installation)."
)
@db_option
def top(once: bool, interval: float, name: str, db_url: str) -> None:
    """A live view: the leader and its term's age, standbys, workers with slot use, running runs with elapsed
    time and checkpoint age, queue depth and oldest queued age, the next fires, the last failures and missed
    ticks. Refreshed every --interval until `q` or Ctrl-C.

    Each frame is one read transaction of a fixed number of statements, whatever the number of jobs, and
    never takes SQLite's writer lock: it does not delay the scheduler or the workers.
    """
    from schedctl.cli._store import explained, open_checked_store
    from schedctl.inspect.top import ScheduleCache, read_frame
    from schedctl.store import describe_target

    store = open_checked_store(db_url)
    target = describe_target(store.url)
    schedules = ScheduleCache()
    try:
        if once or not sys.stdout.isatty():
            with explained(store):
                frame = read_frame(store, name, schedules)
            from schedctl.cli._render import console

            # Piped, a frame is not cut to 80 columns: lines stay whole for grep and for the tests.
            tty = sys.stdout.isatty()
            console(width=None if tty else 200, soft_wrap=not tty).print(render(frame, target))
            return
        _live(lambda: read_frame(store, name, schedules), target, interval)
    finally:
        store.dispose()


def _live(read: Any, target: str, interval: float) -> None:
    import select
    import termios
    import tty

    from rich.console import Group
    from rich.live import Live

    from schedctl.cli._render import console, text
    from schedctl.errors import StoreError

    def frame() -> Any:
        try:
            return render(read(), target)
        except StoreError as exc:  # keep trying: an outage is exactly when someone watches
            return Group(
                text(f"database: {target}"), text(exc), text(f"(retrying every {interval:g}s; q quits)")
            )

    stdin = sys.stdin.fileno() if sys.stdin.isatty() else None
    saved = termios.tcgetattr(stdin) if stdin is not None else None
    try:
        if stdin is not None:
            tty.setcbreak(stdin)
        with Live(frame(), console=console(), screen=True, auto_refresh=False) as live:
            while True:
                if stdin is not None:
                    ready, _, _ = select.select([stdin], [], [], interval)
                    if ready and sys.stdin.read(1) in ("q", "Q"):
                        return
                else:
                    select.select([], [], [], interval)
                live.update(frame(), refresh=True)
    except KeyboardInterrupt:
        return
    finally:
        if stdin is not None and saved is not None:
            termios.tcsetattr(stdin, termios.TCSADRAIN, saved)


def render(f: Frame, target: str) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from schedctl.cli._render import text
    from schedctl.cli.workers import labels_text
    from schedctl.jobs.job import WorkerState
    from schedctl.timing.timetext import ago, short_duration

    def table(*columns: str) -> Table:
        t = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
        for c in columns:
            t.add_column(c, overflow="fold")
        return t

    def row(t: Table, *cells: str) -> None:
        t.add_row(*(text(cell) for cell in cells))

    def heading(line: str) -> Text:  # a blank line, then the section's first line
        return Text.assemble("\n", text(line))

    now = f.now
    parts: list[Any] = [
        text(
            f"schedctl top - database: {target} - {now.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC - {f.job_count} jobs"
        )
    ]
    if f.leader_held and f.lease is not None:
        left = f.lease.expires_in(now)
        lead = (
            f"leader: {f.lease.holder}, term {f.lease.term} for {short_duration(_secs(f.lease.acquired_at, now))} "
            f"(expires in {left:.0f}s)"
        )
    elif f.lease is not None:
        lead = f"leader: NONE - term {f.lease.term} of {f.lease.holder} lapsed {ago(_secs(f.lease.expires_at, now))}"
    else:
        lead = "leader: NONE - no scheduler has ever held the lease"
    standbys = f.standbys()
    lead += "; standbys: " + (", ".join(p.identity for p in standbys) if standbys else "none")
    parts.append(text(lead))
    workers = f.workers()
    alive, stale, stopped = (sum(1 for w in workers if w.state == s) for s in WorkerState)
    used = sum(f.running_by_worker.get(w.identity, 0) for w in workers if w.state == WorkerState.ALIVE)
    slots = sum(w.slots for w in workers if w.state == WorkerState.ALIVE)
    parts.append(
        heading(f"workers: {alive} alive, {stale} stale, {stopped} stopped; slots {used}/{slots} in use")
    )
    for line in f.skew:
        parts.append(text(f"! version skew: {line}"))
    if workers:
        t = table("WORKER", "STATE", "LABELS", "SLOTS", "LAST SEEN", "VERSION")
        for w in workers:
            row(
                t,
                w.identity,
                w.state,
                labels_text(w.labels),
                f"{f.running_by_worker.get(w.identity, 0)}/{w.slots}",
                ago(w.seen_ago),
                w.schedctl_version,
            )
        parts.append(t)
    parts.append(heading(f"running: {f.running_total}"))
    if f.running:
        t = table("JOB", "SCHEDULED (UTC)", "WORKER", "ATTEMPT", "ELAPSED", "CHECKPOINT", "HEARTBEAT")
        for r in f.running:
            row(
                t,
                r.job_id,
                f"{r.scheduled_for.astimezone(UTC):%Y-%m-%d %H:%M:%S}",
                r.worker or "-",
                str(r.attempt),
                short_duration(_secs(r.started_at, now)) if r.started_at else "-",
                ago(_secs(r.checkpoint_at, now)) if r.checkpoint_at else "none",
                ago(_secs(r.heartbeat_at, now)) if r.heartbeat_at else "-",
            )
        parts.append(t)
        if f.running_total > len(f.running):
            parts.append(
                text(f"... and {f.running_total - len(f.running)} more (`schedctl runs --state running`)")
            )
    queue = f"queue: {f.queue_depth} due"
    if f.oldest_queued is not None:
        queue += f", oldest queued {ago(_secs(f.oldest_queued, now))}"
    if f.without_worker:
        queue += f"; ! {f.without_worker} with no alive worker that may take them (`schedctl status`)"
    parts.append(heading(queue))
    parts.append(heading("next fires:"))
    if f.next_fires:
        t = table("JOB", "ZONE", "LOCAL", "IN")
        for n in f.next_fires:
            local = _local(n.at, n.timezone)
            row(t, n.job_id, n.timezone, local, short_duration((n.at - now).total_seconds()))
        parts.append(t)
    else:
        parts.append(text("none known (no scheduler has led with jobs yet)"))
    for title, rows in (("last failures", f.failures), ("last missed ticks", f.missed)):
        parts.append(heading(f"{title}:" + ("" if rows else " none")))
        if rows:
            t = table("JOB", "SCHEDULED (UTC)", "STATE", "EXIT", "WHEN", "DETAIL")
            for done in rows:
                when = done.at or done.scheduled_for
                row(
                    t,
                    done.job_id,
                    f"{done.scheduled_for.astimezone(UTC):%Y-%m-%d %H:%M:%S}",
                    done.state,
                    "-" if done.exit_status is None else str(done.exit_status),
                    ago(_secs(when, now)),
                    (done.detail or "-").splitlines()[0][:80] if done.detail else "-",
                )
            parts.append(t)
    return Group(*parts)


def _secs(since: datetime, now: datetime) -> float:
    return (now - since).total_seconds()


def _local(at: datetime, zone: str) -> str:
    from zoneinfo import ZoneInfo

    try:
        return f"{at.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M:%S %Z}"
    except Exception:  # noqa: BLE001 - an unknown zone on this host: UTC then
        return f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
