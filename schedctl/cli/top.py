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

    screen = console()

    def frame() -> Any:
        try:
            # The size at each frame: a resized terminal gets a frame that fits it at the next refresh.
            return render(read(), target, (screen.width, screen.height), interval)
        except StoreError as exc:  # keep trying: an outage is exactly when someone watches
            return Group(
                text(f"database: {target}"), text(exc), text(f"(retrying every {interval:g}s; {KEYS})")
            )

    stdin = sys.stdin.fileno() if sys.stdin.isatty() else None
    saved = termios.tcgetattr(stdin) if stdin is not None else None
    try:
        if stdin is not None:
            tty.setcbreak(stdin)
        with Live(frame(), console=screen, screen=True, auto_refresh=False) as live:
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


NAME_WIDTH = 18  # columns a name (job, worker, labels, detail) gets at most in the live view
KEYS = "q quit"  # the keys `top` reads (Ctrl-C too), on the last line of the live view


def render(f: Frame, target: str, size: tuple[int, int] | None = None, interval: float = 1.0) -> Any:
    """The frame as rich renderables. ``size`` (columns, rows) is the live view's terminal: every line is
    then one line, cut to the width, the lists share the rows left (``share_rows``; a heading says how many
    are not shown) and the key hints are the last line. Without it (``--once``), every list in full."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from schedctl.cli._render import text
    from schedctl.cli.workers import labels_text
    from schedctl.inspect.top import share_rows
    from schedctl.jobs.job import WorkerState
    from schedctl.timing.timetext import ago, short_duration

    fit = size is not None

    def line(value: str) -> Text:
        t = text(value)
        if fit:
            t.no_wrap, t.overflow = True, "ellipsis"
        return t

    def heading(value: str) -> Text:  # full: a blank line, then the section's first line
        return line(value) if fit else Text.assemble("\n", text(value))

    def table(columns: tuple[str, ...], rows: list[list[str]]) -> Table:
        t = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
        for c in columns:
            if fit:
                # Names and labels are cut before they push the short columns off the screen.
                wide = c in ("JOB", "WORKER", "LABELS", "DETAIL", "ZONE")
                t.add_column(c, no_wrap=True, overflow="ellipsis", max_width=NAME_WIDTH if wide else None)
            else:
                t.add_column(c, overflow="fold")
        for cells in rows:
            t.add_row(*(text(cell) for cell in cells))
        return t

    def at(when: datetime) -> str:  # a tick in UTC; the live view leaves out the year
        return (
            f"{when.astimezone(UTC):%m-%d %H:%M:%S}" if fit else f"{when.astimezone(UTC):%Y-%m-%d %H:%M:%S}"
        )

    now = f.now
    lines: list[Any] = [
        line(
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
    lines.append(line(lead))

    workers = f.workers()
    alive, stale, stopped = (sum(1 for w in workers if w.state == s) for s in WorkerState)
    used = sum(f.running_by_worker.get(w.identity, 0) for w in workers if w.state == WorkerState.ALIVE)
    slots = sum(w.slots for w in workers if w.state == WorkerState.ALIVE)
    worker_rows = [
        [
            w.identity,
            w.state,
            labels_text(w.labels),
            f"{f.running_by_worker.get(w.identity, 0)}/{w.slots}",
            ago(w.seen_ago),
            w.schedctl_version,
        ]
        for w in workers
    ]
    running_rows = [
        [
            r.job_id,
            at(r.scheduled_for),
            r.worker or "-",
            str(r.attempt),
            short_duration(_secs(r.started_at, now)) if r.started_at else "-",
            ago(_secs(r.checkpoint_at, now)) if r.checkpoint_at else "none",
            ago(_secs(r.heartbeat_at, now)) if r.heartbeat_at else "-",
        ]
        for r in f.running
    ]
    fire_rows = [
        [n.job_id, n.timezone, _local(n.at, n.timezone), short_duration((n.at - now).total_seconds())]
        for n in f.next_fires
    ]

    def done_rows(rows: list[Any]) -> list[list[str]]:
        return [
            [
                done.job_id,
                at(done.scheduled_for),
                done.state,
                "-" if done.exit_status is None else str(done.exit_status),
                ago(_secs(done.at or done.scheduled_for, now)),
                (done.detail or "-").splitlines()[0][:80] if done.detail else "-",
            ]
            for done in rows
        ]

    failure_rows, missed_rows = done_rows(f.failures), done_rows(f.missed)
    skew = [f"! version skew: {s}" for s in f.skew]
    queue = f"queue: {f.queue_depth} due"
    if f.oldest_queued is not None:
        queue += f", oldest queued {ago(_secs(f.oldest_queued, now))}"
    if f.without_worker:
        queue += f"; ! {f.without_worker} with no alive worker that may take them (`schedctl status`)"

    # The lists, most urgent first: what runs, who runs it, what failed, what comes, what was missed.
    lists = [running_rows, worker_rows, failure_rows, fire_rows, missed_rows]
    if fit:
        assert size is not None
        skew = skew[:1] if len(f.skew) <= 1 else [f"{skew[0]} (+{len(f.skew) - 1} more)"]
        fixed = len(lines) + len(skew) + 6 + 1  # the six headings and queue lines, the key hints
        shown = share_rows(size[1] - fixed, [len(rows) for rows in lists])
    else:
        shown = [len(rows) for rows in lists]
    running_n, workers_n, failures_n, fires_n, missed_n = shown

    def more(count: int, total: int) -> str:
        return f" ({total - count} not shown)" if fit and total > count else ""

    lines.append(
        heading(
            f"workers: {alive} alive, {stale} stale, {stopped} stopped; slots {used}/{slots} in use"
            + more(workers_n, len(worker_rows))
        )
    )
    lines.extend(line(s) for s in skew)
    if workers_n:
        lines.append(
            table(("WORKER", "STATE", "LABELS", "SLOTS", "LAST SEEN", "VERSION"), worker_rows[:workers_n])
        )
    lines.append(heading(f"running: {f.running_total}" + more(running_n, f.running_total)))
    if running_n:
        lines.append(
            table(
                ("JOB", "SCHEDULED (UTC)", "WORKER", "ATTEMPT", "ELAPSED", "CHECKPOINT", "HEARTBEAT"),
                running_rows[:running_n],
            )
        )
    if not fit and f.running_total > len(f.running):
        lines.append(
            text(f"... and {f.running_total - len(f.running)} more (`schedctl runs --state running`)")
        )
    lines.append(heading(queue))
    if f.next_fires:
        lines.append(heading("next fires:" + more(fires_n, len(fire_rows))))
        if fires_n:
            lines.append(table(("JOB", "ZONE", "LOCAL", "IN"), fire_rows[:fires_n]))
    elif fit:
        lines.append(line("next fires: none known (no scheduler has led with jobs yet)"))
    else:
        lines.append(heading("next fires:"))
        lines.append(text("none known (no scheduler has led with jobs yet)"))
    for title, rows, count in (
        ("last failures", failure_rows, failures_n),
        ("last missed ticks", missed_rows, missed_n),
    ):
        lines.append(heading(f"{title}:" + ("" if rows else " none") + more(count, len(rows))))
        if count:
            lines.append(table(("JOB", "SCHEDULED (UTC)", "STATE", "EXIT", "WHEN", "DETAIL"), rows[:count]))
    if fit:
        assert size is not None
        used_rows = sum(1 if isinstance(x, Text) else x.row_count + 1 for x in lines)
        lines.extend(Text("") for _ in range(max(0, size[1] - 1 - used_rows)))  # the hints at the bottom
        lines.append(line(f"{KEYS} · every {interval:g}s"))
    return Group(*lines)


def _secs(since: datetime, now: datetime) -> float:
    return (now - since).total_seconds()


def _local(at: datetime, zone: str) -> str:
    from zoneinfo import ZoneInfo

    try:
        return f"{at.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M:%S %Z}"
    except Exception:  # noqa: BLE001 - an unknown zone on this host: UTC then
        return f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
