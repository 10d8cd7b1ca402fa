"""``schedctl leases``: who leads, until when, and the last terms (Kubernetes Lease vocabulary)."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

import click

from schedctl.cli._options import db_option, output_option, resolve_output
from schedctl.jobs.job import DEFAULT_LEASE_NAME
from schedctl.timing.timetext import ago, short_duration

TERM_COLUMNS = ("TERM", "HOLDER", "ACQUIRED", "RENEWED", "ENDED", "HOW", "SCHEDCTL", "TZDATA")


@click.command("leases")
@click.option(
    "--name", default=DEFAULT_LEASE_NAME, show_default=True, help="Lease name (one per installation)."
)
@click.option("--limit", default=10, show_default=True, type=click.IntRange(min=1), help="Terms to show.")
@db_option
@output_option
def leases(name: str, limit: int, db_url: str, output: str, as_json: bool) -> None:
    """Show who holds the scheduler lease, and the last terms.

    Every instant is the database's, so the figures do not depend on this machine's clock. `expires in` is
    negative once the lease has lapsed: no scheduler is dispatching until one takes it.
    """
    from schedctl.cli._store import explained, open_checked_store
    from schedctl.leader import lease
    from schedctl.store import workers as registry
    from schedctl.store.dialect import select_db_now

    store = open_checked_store(db_url)
    try:
        with explained(store):
            found = lease.report(store, name, limit)
            with store.read() as conn:
                skew = registry.version_skew(
                    registry.list_workers(conn, select_db_now(conn), with_runs=False)
                )
    finally:
        store.dispose()
    fmt = resolve_output(output, as_json)
    if fmt in ("json", "jsonl"):
        click.echo(json.dumps(as_document(found), indent=2 if fmt == "json" else None))
    else:
        from schedctl.cli._store import say_database

        say_database(store)
        render(found)
        from schedctl.cli._render import plain

        for line in skew:
            click.echo(plain(f"! version skew among alive schedulers and workers: {line}"), err=True)


def as_document(report: Any) -> dict[str, Any]:
    state, now = report.state, report.db_now
    doc: dict[str, Any] = {"name": report.name, "db_time": _iso(report.db_now)}
    doc.update(
        holder_identity=state.holder if state else None,
        held=state.held_at(now) if state else False,
        term=state.term if state else None,
        lease_transitions=state.transitions if state else None,
        lease_duration_seconds=_secs(state.duration) if state else None,
        acquire_time=_iso(state.acquired_at) if state else None,
        renew_time=_iso(state.renewed_at) if state else None,
        expire_time=_iso(state.expires_at) if state else None,
        expires_in_seconds=_secs(state.expires_in(now)) if state else None,
        renewed_ago_seconds=_secs(state.renewed_ago(now)) if state else None,
    )
    doc["terms"] = [
        {
            "term": t.term,
            "holder_identity": t.holder,
            "acquire_time": _iso(t.acquired_at),
            "renew_time": _iso(t.renewed_at),
            "expire_time": _iso(t.expires_at),
            "end_time": _iso(t.ended_at),
            "end_reason": t.end_reason,
            "schedctl_version": t.schedctl_version,
            "tzdata_version": t.tzdata_version,
            "catch_up_grace_seconds": t.catch_up_grace,
        }
        for t in report.terms
    ]
    return doc


def render(report: Any) -> None:
    from schedctl.cli._render import plain

    rows: list[tuple[str, ...]] = [
        tuple(
            plain(cell)
            for cell in (
                str(t.term),
                t.holder,
                _short(t.acquired_at),
                _short(t.renewed_at),
                _short(t.ended_at),
                t.end_reason or "-",
                t.schedctl_version,
                t.tzdata_version,
            )
        )
        for t in report.terms
    ]
    summary = plain(_summary(report))
    if sys.stdout.isatty():
        _render_rich(summary, rows)
        return
    click.echo(summary)
    if rows:
        click.echo()
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(TERM_COLUMNS)]
        for line in (TERM_COLUMNS, *rows):
            click.echo("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


def _render_rich(summary: str, rows: list[tuple[str, ...]]) -> None:
    from rich.table import Table

    from schedctl.cli._render import console as make_console
    from schedctl.cli._render import text

    console = make_console()
    console.print(text(f"{summary} (times UTC)"))
    if rows:
        table = Table(box=None, header_style="bold")
        for column in TERM_COLUMNS:
            # Identities fold rather than vanish behind an ellipsis; instants stay whole.
            table.add_column(column, overflow="fold", no_wrap=column in ("ACQUIRED", "RENEWED", "ENDED"))
        for row in rows:
            table.add_row(*(text(_compact(cell)) for cell in row))
        console.print(table)


def _compact(cell: str) -> str:
    # A terminal is narrow: "2026-12-01T09:33:42Z" -> "12-01 09:33:42" (still UTC, as the header line says).
    if len(cell) == 20 and cell.endswith("Z") and cell[10] == "T":
        return f"{cell[5:10]} {cell[11:19]}"
    return cell


def _summary(report: Any) -> str:
    s, now = report.state, report.db_now
    if s is None:
        return f"lease {report.name}: never held (no scheduler has run against this database)"
    if not s.held_at(now):
        return (
            f"lease {report.name}: no leader; term {s.term} of {s.holder} lapsed {ago(-s.expires_in(now), tenths=True)} "
            f"(renewed {ago(s.renewed_ago(now), tenths=True)}, {s.transitions} transitions)"
        )
    return (
        f"lease {report.name}: held by {s.holder}, term {s.term}, expires in {s.expires_in(now):.1f}s, "
        f"renewed {ago(s.renewed_ago(now), tenths=True)}, duration {short_duration(s.duration)}, {s.transitions} transitions"
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _short(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else "-"


def _secs(value: float) -> float:
    return round(value, 3)
