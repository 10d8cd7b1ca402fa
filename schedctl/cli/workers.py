"""``schedctl workers``: every `serve` process the registry knows, alive, stale or stopped, with its runs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from schedctl.cli._options import db_option, output_option, resolve_output
from schedctl.cli._render import plain, utc_text
from schedctl.timing.timetext import ago

if TYPE_CHECKING:
    from schedctl.store.workers import RunningRun, WorkerRecord

COLUMNS = ("WORKER", "STATE", "ROLE", "LABELS", "SLOTS", "RUNNING", "LAST SEEN", "VERSION")
WIDE = ("HOST", "PID", "STARTED (UTC)", "STOPPED (UTC)", "WHY", "TZDATA")


@click.command("workers", context_settings={"help_option_names": ["-h", "--help"]})
@db_option
@output_option
def workers(db_url: str, output: str, as_json: bool) -> None:
    """List workers (and scheduler processes): state, labels, slots in use, running runs, last seen, version.

    A process is `alive` while it refreshes its row (every heartbeat interval, busy or idle), `stale` once
    silent for its --stale-after (killed, crashed, cut off), `stopped` after a clean exit, with why. Stopped
    rows are pruned after a day, stale ones after a week. Every instant is the database's.
    """
    from schedctl.cli._store import explained, open_checked_store
    from schedctl.store import workers as registry
    from schedctl.store.dialect import select_db_now

    store = open_checked_store(db_url)
    try:
        with explained(store), store.read() as conn:  # never SQLite's writer lock, like `top`
            now = select_db_now(conn)
            found = registry.list_workers(conn, now)
    finally:
        store.dispose()
    from schedctl.cli._render import listing

    fmt = resolve_output(output, as_json)
    listing(store, fmt, found, worker_json, _row, COLUMNS, WIDE)
    if fmt in ("json", "jsonl"):
        return
    for line in registry.version_skew(found):
        click.echo(plain(f"! version skew among alive processes: {line}"), err=True)
    if not found:
        click.echo("no worker has registered with this database (start `schedctl serve`)", err=True)


def worker_json(w: WorkerRecord) -> dict[str, Any]:
    return {
        "identity": w.identity,
        "state": w.state,
        "role": w.role,
        "host": w.host,
        "pid": w.pid,
        "labels": w.labels,
        "slots": w.slots if w.runs_jobs else None,
        "slots_in_use": len(w.running) if w.runs_jobs else None,
        "running": [run_json(r) for r in w.running],
        "started_at": _iso(w.started_at),
        "last_seen_at": _iso(w.last_seen_at),
        "last_seen_seconds": round(w.seen_ago, 3),
        "stale_after_seconds": w.stale_after,
        "stopped_at": _iso(w.stopped_at),
        "stop_reason": w.stop_reason,
        "schedctl_version": w.schedctl_version,
        "tzdata_version": w.tzdata_version,
    }


def run_json(r: RunningRun) -> dict[str, Any]:
    return {
        "job_id": r.job_id,
        "scheduled_for": _iso(r.scheduled_for),
        "attempt": r.attempt,
        "started_at": _iso(r.started_at),
        "heartbeat_at": _iso(r.heartbeat_at),
        "checkpoint_at": _iso(r.checkpoint_at),
    }


def labels_text(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "-"


def _row(w: WorkerRecord, wide: bool) -> list[str]:
    running = ", ".join(f"{r.job_id}@{utc_text(r.scheduled_for)}" for r in w.running) or "-"
    row = [
        w.identity,
        w.state,
        w.role,
        labels_text(w.labels),
        f"{len(w.running)}/{w.slots}" if w.runs_jobs else "-",
        running,
        ago(w.seen_ago),
        w.schedctl_version,
    ]
    if wide:
        row += [
            w.host,
            str(w.pid),
            utc_text(w.started_at),
            utc_text(w.stopped_at),
            w.stop_reason or "-",
            w.tzdata_version,
        ]
    return row


def _iso(at: datetime | None) -> str | None:
    return at.astimezone(UTC).isoformat() if at is not None else None
