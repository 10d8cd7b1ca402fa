"""Crontab entries -> Jobs: ids, an explicit zone and catch-up policy for each, checked like any TOML job.

Nothing is guessed: the zone is the CRON_TZ above the line or ``--timezone``, never the host's; the catch-up
policy is ``--catch-up``. When either is missing for any job, no job is made and ``missing`` says which jobs
need what, and which flag supplies it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schedctl.crontab.diagnostics import error, one_line, warning
from schedctl.crontab.ids import dedupe, derive_id
from schedctl.crontab.parse import Entry
from schedctl.errors import ConfigError, Diagnostic, UsageError
from schedctl.jobs.job import CatchUp, Job
from schedctl.timing.crondialect import CRONIE_CRON_TZ, DEBIAN_CRON_TZ

_VALID_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,254}\Z")


@dataclass(frozen=True)
class ImportOptions:
    timezone: str | None = None
    catch_up: str | None = None
    max_catch_up: int | None = None


@dataclass
class Conversion:
    jobs: list[Job] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # one line per thing missing; empty when complete
    # FILE:LINE errors that, like ``missing``, stop the import with a usage error (also in ``diagnostics``).
    refused: list[Diagnostic] = field(default_factory=list)
    entries: dict[str, Entry] = field(default_factory=dict)  # id -> the line it came from


def check_options(options: ImportOptions) -> None:
    """Flags that contradict each other, or a zone that does not exist: a usage error before any reading."""
    from schedctl.errors import SchedctlError
    from schedctl.timing.cron import validate_zone

    if options.timezone is not None:
        try:
            validate_zone(options.timezone)
        except SchedctlError as exc:
            raise UsageError(f"--timezone: {exc}") from None
    if options.max_catch_up is not None and options.catch_up != CatchUp.ALL:
        raise UsageError("--max-catch-up only means something with --catch-up all")
    if options.max_catch_up is not None and not 1 <= options.max_catch_up <= 1_000_000:
        raise UsageError("--max-catch-up must be from 1 to 1000000")


def assign_ids(entries: Sequence[Entry], taken: Mapping[str, Job] | None = None) -> list[str]:
    """One id per entry. An entry equal to a job already in ``taken`` gets that job's id (so --merge sees it
    is there, whatever name this version of the importer would give it); a ``# schedctl: id=`` hint is
    honoured; other ids derive from the comment above the line or the command (schedctl.crontab.ids)."""
    taken = taken or {}
    wanted = []
    for entry in entries:
        hint = entry.id_hint if entry.id_hint and _VALID_ID.match(entry.id_hint) else None
        wanted.append(hint or derive_id(entry.command, entry.description))
    same: dict[tuple[object, ...], list[str]] = {}
    for job_id, job in taken.items():
        same.setdefault(_identity(job.schedule, job.command, job.user, job.stdin), []).append(job_id)
    ids: list[str | None] = [None] * len(entries)
    used: set[str] = set()
    for index, (entry, base) in enumerate(zip(entries, wanted, strict=True)):
        matches = same.get(_identity(entry.schedule, entry.command, entry.user, entry.stdin), [])
        # The ids this name would get (``backup``, ``backup-2``...) first, then any other equal job's.
        preferred = [i for i in _candidates(base, taken) if i in matches] + matches
        found = next((i for i in preferred if i not in used), None)
        if found is not None:
            ids[index] = found
            used.add(found)
    free = dedupe(
        [b for b, i in zip(wanted, ids, strict=True) if i is None], taken=[*taken, *filter(None, ids)]
    )
    fresh = iter(free)
    return [i if i is not None else next(fresh) for i in ids]


def _candidates(base: str, taken: Mapping[str, Job]) -> list[str]:
    out = [base] if base in taken else []
    n = 2
    while f"{base}-{n}" in taken:
        out.append(f"{base}-{n}")
        n += 1
    return out


def _identity(schedule: str, command: object, user: str | None, stdin: str | None) -> tuple[object, ...]:
    """What makes an imported line the same job as one in the --merge file."""
    return (schedule, command, user, stdin)


def convert(
    entries: Sequence[Entry], options: ImportOptions, now: datetime, taken: Mapping[str, Job] | None = None
) -> Conversion:
    result = Conversion()
    ids = assign_ids(entries, taken)
    result.entries = dict(zip(ids, entries, strict=True))
    cron_tz = _ignored_cron_tz(result.entries, options)
    result.diagnostics += cron_tz
    result.refused = [d for d in cron_tz if d.severity == "error"]
    result.missing = _missing(result.entries, options, zone_said=bool(result.refused))
    for entry in entries:
        _warn_host_maintenance(entry, result)
        _warn_mail(entry, result)
    if result.missing or result.refused:
        return result
    for job_id, entry in result.entries.items():
        job = _build(job_id, entry, options, now, result)
        if job is not None:
            result.jobs.append(job)
    return result


def _ignored_cron_tz(entries: Mapping[str, Entry], options: ImportOptions) -> list[Diagnostic]:
    """CRON_TZ under Debian's dialect, said once per file at its first such line: a warning when --timezone
    gives the zone (CRON_TZ stays a plain variable, as it was for Debian's cron); else an error that refuses
    the import, and is then all that is said about the jobs' zone."""
    first: dict[str, int] = {}
    for entry in entries.values():
        if entry.ignored_cron_tz is not None:
            first.setdefault(entry.file, entry.ignored_cron_tz)
    if options.timezone is None:
        text = f"{DEBIAN_CRON_TZ}: pass --timezone ZONE with that zone, or {CRONIE_CRON_TZ}"
        return [error(file, line, text) for file, line in first.items()]
    text = (
        f"{DEBIAN_CRON_TZ}: these jobs run in --timezone {options.timezone}, and CRON_TZ stays in their env "
        f"({CRONIE_CRON_TZ})"
    )
    return [warning(file, line, text) for file, line in first.items()]


def _missing(entries: Mapping[str, Entry], options: ImportOptions, zone_said: bool = False) -> list[str]:
    out = []
    # After the CRON_TZ refusal, which asks for --timezone (and every job here then needs it), nothing more.
    asked = options.timezone is None and not zone_said
    no_zone = [(i, e) for i, e in entries.items() if e.cron_tz is None] if asked else []
    if no_zone:
        named = _name_jobs(no_zone, len(entries))
        out.append(
            f"no timezone for {named} (no CRON_TZ above them): pass --timezone ZONE, e.g. "
            "--timezone Europe/London (the host's zone is never used)"
        )
    if options.catch_up is None and entries:
        out.append(
            f"no catch-up policy for {_name_jobs(list(entries.items()), len(entries))}: pass "
            "--catch-up skip|latest|all (all needs --max-catch-up N); change single jobs in the TOML after"
        )
    elif options.catch_up == CatchUp.ALL and options.max_catch_up is None and entries:
        out.append(
            f"--catch-up all needs --max-catch-up N for {_name_jobs(list(entries.items()), len(entries))}: "
            "the most missed ticks to run after downtime before refusing"
        )
    return out


def _name_jobs(jobs: list[tuple[str, Entry]], total: int, limit: int = 8) -> str:
    if len(jobs) == total and total > limit:
        return f"all {total} jobs"
    shown = ", ".join(f"{i} ({e.source})" for i, e in jobs[:limit])
    more = f" and {len(jobs) - limit} more" if len(jobs) > limit else ""
    return f"{'job' if len(jobs) == 1 else 'jobs'} {shown}{more}"


def _warn_host_maintenance(entry: Entry, result: Conversion) -> None:
    from schedctl.crontab.upkeep import host_upkeep

    why = host_upkeep(entry.command)
    if why:
        result.diagnostics.append(
            warning(
                entry.file,
                entry.line,
                one_line(
                    f"host upkeep ({why}): imported, but it would run on a worker, not on this host; delete it "
                    "from the TOML if it must stay with the host"
                ),
            )
        )


def _build(
    job_id: str, entry: Entry, options: ImportOptions, now: datetime, result: Conversion
) -> Job | None:
    from schedctl.jobs.config import job_from_mapping

    try:
        return job_from_mapping(job_id, _table(entry, options), entry.file, lambda _path: entry.line, now)
    except ConfigError as exc:
        for d in exc.diagnostics:
            result.diagnostics.append(error(entry.file, entry.line, one_line(d.message)))
        return None


def mail_keys(env: Mapping[str, str]) -> tuple[dict[str, str], str | None, str | None]:
    """cron's MAILTO / MAILFROM as the job's mailto / mailfrom (schedctl.worker.mail sends the mail): (the env
    without them, mailto, mailfrom). A value that is no address list stays in the env (_warn_mail says so)."""
    from schedctl.jobs.configkeys import CHECKS, Invalid

    out = dict(env)
    picked: dict[str, str | None] = {"MAILTO": None, "MAILFROM": None}
    for name, key in (("MAILTO", "mailto"), ("MAILFROM", "mailfrom")):
        value = out.get(name)
        if value is None or (name == "MAILFROM" and value == ""):
            continue
        try:
            CHECKS[key](value)
        except Invalid:
            continue
        picked[name] = out.pop(name)
    return out, picked["MAILTO"], picked["MAILFROM"]


def _warn_mail(entry: Entry, result: Conversion) -> None:
    env, _, _ = mail_keys(entry.env)
    for name in ("MAILTO", "MAILFROM"):
        if env.get(name):
            result.diagnostics.append(
                warning(
                    entry.file,
                    entry.line,
                    one_line(
                        f"{name} {env[name]!r} is not a mail address list: kept in env, no mail is sent"
                    ),
                )
            )


def _table(entry: Entry, options: ImportOptions) -> dict[str, Any]:
    table: dict[str, Any] = {
        "schedule": entry.schedule,
        "timezone": entry.cron_tz or options.timezone,
        "catch_up": options.catch_up,
        "command": entry.command,
        "source": entry.source,
    }
    if options.catch_up == CatchUp.ALL:
        table["max_catch_up"] = options.max_catch_up
    env, mailto, mailfrom = mail_keys(entry.env)
    optional = {
        "env": env or None,
        "mailto": mailto,
        "mailfrom": mailfrom,
        "stdin": entry.stdin,
        "user": entry.user,
        "description": entry.description,
        "jitter": f"{entry.random_delay}m" if entry.random_delay else None,
    }
    table.update({k: v for k, v in optional.items() if v is not None})
    return table
