"""What the import summary shows: each job in plain English, and what DST does to it in the next 12 months."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from schedctl.crontab.entries import Crontab
from schedctl.jobs.job import Job
from schedctl.timing.zones import DstOverlap

HORIZON = timedelta(days=365)


@dataclass(frozen=True)
class Row:
    id: str
    schedule: str
    description: str
    zone: str
    policy: str
    source: str
    dst: str  # "" when no fire of the next 12 months is moved or deduplicated


def rows(jobs: Iterable[Job], now: datetime) -> list[Row]:
    return [_row(job, now) for job in jobs]


def format_note(crontab: Crontab) -> str:
    """One line per file: the format it was read in and why, so a misread shows before a job runs."""
    if crontab.format_reason == "no job lines":
        return f"{crontab.file}: no job lines."
    return f"{crontab.file}: read as a {crontab.format} crontab: {crontab.format_reason}."


def notes(jobs: list[Job], skipped_reboot: int) -> list[str]:
    out = []
    unset = [j.id for j in jobs if j.mailto is None]
    if unset:
        shown = ", ".join(unset[:8]) + (f" and {len(unset) - 8} more" if len(unset) > 8 else "")
        out.append(
            f"cron mailed the output of {len(unset)} of these jobs to the crontab's owner (no MAILTO): {shown}; "
            "set mailto in the TOML to keep that mail (workers send it with serve --smtp URL)."
        )
    if any(j.mailto for j in jobs):
        out.append(
            "jobs with mailto mail their output as cron did only when the workers run with --smtp URL."
        )
    if jobs:
        out.append(
            "cron starts a job even while its last run is still going; these jobs get schedctl's default "
            'concurrency = "forbid" (such a tick is skipped): set concurrency = "allow" where overlap is wanted.'
        )
    if skipped_reboot:
        out.append(
            f"{skipped_reboot} @reboot line{'s were' if skipped_reboot != 1 else ' was'} left out: "
            "schedctl runs jobs at times, not at boot."
        )
    return out


def _row(job: Job, now: datetime) -> Row:
    from schedctl.timing.cron import schedule_for

    policy = str(job.catch_up) + (f" (max {job.max_catch_up})" if job.max_catch_up else "")
    try:
        schedule = schedule_for(job.schedule, job.timezone, job.dst)
        description, dst = schedule.describe(), _dst_note(schedule, now)
    except Exception as exc:  # noqa: BLE001 - a summary must never hide the import's result
        description, dst = f"({type(exc).__name__})", ""
    return Row(job.id, job.schedule, description, job.timezone, policy, job.source or "-", dst)


def _dst_note(schedule: object, now: datetime) -> str:
    from schedctl.timing.cron import Schedule, dst_adjusted_fires

    assert isinstance(schedule, Schedule)
    fires = dst_adjusted_fires(schedule, now, now + HORIZON)
    by_day: dict[str, list[str]] = {}
    for fire in fires:
        day = fire.local.strftime("%Y-%m-%d")
        if fire.gap_moved:
            text = f"moved to {fire.local:%H:%M} (clocks go forward)"
        elif fire.overlap == DstOverlap.LAST or (fire.overlap == DstOverlap.FIRST and schedule.wildcard):
            text = "repeated hour runs twice (clocks go back)"
        else:
            text = f"{fire.local:%H:%M} runs once, not twice (clocks go back)"
        if text not in by_day.setdefault(day, []):
            by_day[day].append(text)
    parts = [f"{day}: {', '.join(texts)}" for day, texts in sorted(by_day.items())]
    if parts and schedule.wildcard:
        parts.append("skipped wall times do not fire")
    return "; ".join(parts)
