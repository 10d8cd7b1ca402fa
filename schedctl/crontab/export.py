"""Jobs -> crontab text, so a migration can be rolled back (``schedctl export --format crontab``).

Zones become ``CRON_TZ`` lines and jitter ``RANDOM_DELAY`` (both cronie), environment lines are written where the
environment changes, commands and standard input are escaped with cron's ``%`` rule. A job cron cannot express
is written as a comment saying why. The text is then read back with the importer's own parser, and any job that
would not come back the same is reported: importing the export gives the jobs back (ids included, through a
``# schedctl: id=`` comment when the command alone would not give the id).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, replace
from dataclasses import fields as job_fields

from schedctl.crontab.ids import derive_id
from schedctl.crontab.parse import CONSUMED, SYSTEM, USER, Entry, looks_like_field, parse_crontab
from schedctl.crontab.percent import encode_command, encode_stdin
from schedctl.errors import SchedctlError, UsageError
from schedctl.jobs.job import Job
from schedctl.text.printable import escape_controls, has_controls
from schedctl.timing.crondialect import CRONIE, DEBIAN

# Keys a crontab has no place for; named in the report when a job sets them.
_DROPPED = (
    "concurrency",
    "starting_deadline",
    "timeout",
    "retries",
    "labels",
    "tags",
    "workdir",
    "pass_env",
    "on_failure",
    "on_success",
    "mail_on",
)
_DEFAULTS = {
    f.name: f.default_factory() if f.default is MISSING and f.default_factory is not MISSING else f.default
    for f in job_fields(Job)
    if f.name in _DROPPED
}


@dataclass
class ExportResult:
    text: str
    messages: list[str] = field(default_factory=list)
    written: int = 0  # jobs written as crontab lines (not as comments)
    private: bool = False  # the text holds environment values


@dataclass
class _Writer:
    fmt: str
    dialect: str = CRONIE
    host_zone: str | None = None  # debian: the zone of the host that will run the file (no CRON_TZ there)
    lines: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    zone: str | None = None
    delay: int = 0


def export_crontab(
    jobs: Sequence[Job],
    fmt: str | None = None,
    dialect: str = CRONIE,
    host_zone: str | None = None,
    user: str | None = None,
) -> ExportResult:
    """``fmt``: "user", "system", or None (system when any job has a user, else user). ``dialect``: the cron
    that will read the file; for ``debian``, ``host_zone`` is its host's zone (Debian's cron has no CRON_TZ,
    so a job in another zone cannot be written). ``user`` fills the user column of the jobs that name none;
    without it a system crontab of such jobs is refused (SchedctlError naming them): a rollback file must
    never drop a job silently."""
    ordered = sorted(jobs, key=_order)
    chosen = fmt or (SYSTEM if any(j.user for j in ordered) else USER)
    if user is not None and chosen != SYSTEM:
        raise UsageError("--user fills the user column of a system crontab; this export is a user crontab")
    if user is not None and (not user.strip() or any(c.isspace() for c in user)):
        raise UsageError(f"--user {user!r}: a user name is one word")
    if chosen == SYSTEM and user is None:
        userless = [j.id for j in ordered if not j.user]
        if userless:
            names = ", ".join(repr(i) for i in userless)
            raise SchedctlError(
                f"job{'s' if len(userless) > 1 else ''} {names} name{'' if len(userless) > 1 else 's'} no user, "
                "and a system crontab needs one in its user column: nothing written; pass --user NAME to run "
                "them as NAME, or export them apart with --format crontab-user"
            )
    if user is not None:
        ordered = [j if j.user else replace(j, user=user) for j in ordered]
    result = ExportResult(text="", private=any(j.env or j.mailto for j in ordered))
    writer = _Writer(chosen, dialect, host_zone)
    writer.lines += _header(chosen, len(ordered), dialect, host_zone)
    written: list[Job] = []
    for job in ordered:
        reason = _inexpressible(job, chosen, writer)
        if reason:
            writer.lines += ["", f"# schedctl: not exported ({reason}): {_flat(job)}", ""]
            result.messages.append(f"job {job.id!r} written as a comment: {reason}")
            continue
        _write(job, writer, result)
        written.append(job)
    result.text = "\n".join(writer.lines) + "\n"
    result.written = len(written)
    result.messages += _read_back(result.text, chosen, written, writer)
    return result


def _order(job: Job) -> tuple[str, int, str]:
    if job.source and ":" in job.source:
        file, _, line = job.source.rpartition(":")
        if line.isdigit():
            return (file, int(line), job.id)
    return ("\uffff", 0, job.id)


def _header(fmt: str, count: int, dialect: str, host_zone: str | None) -> list[str]:
    kind = "system crontab: a user column after the schedule" if fmt == SYSTEM else "user crontab"
    install = "copy it to /etc/cron.d/NAME" if fmt == SYSTEM else "install it with `crontab FILE`"
    needs = (
        f"For Debian's cron: no CRON_TZ, every job runs in the host's zone, {host_zone}."
        if dialect == DEBIAN
        else "CRON_TZ and RANDOM_DELAY need cronie."
    )
    return [
        f"# Written by schedctl export (format: {fmt}; {kind}) from {count} job{'s' if count != 1 else ''}.",
        f"# To roll back, {install}. {needs}",
        "# cron keeps no catch-up policy, concurrency, timeout or retries: those stay in the TOML only.",
    ]


def _inexpressible(job: Job, fmt: str, writer: _Writer) -> str | None:
    from schedctl.timing.cron import schedule_for

    debian = writer.dialect == DEBIAN
    if debian and job.timezone != writer.host_zone:
        return (
            f"its zone is {job.timezone}, not {writer.host_zone}: Debian's cron has no CRON_TZ and would run it "
            "in the host's zone"
        )
    if debian and job.jitter:
        return "jitter: Debian's cron has no RANDOM_DELAY"
    if len(job.schedule.split()) == 6:
        return "a 6-field schedule with seconds: cron has no seconds"
    if job.dst is not None:
        return "a dst override: cron has one fixed DST rule"
    if job.jitter and (job.jitter % 60 or job.jitter > 1440 * 60):
        return f"jitter of {job.jitter:g}s: cron's RANDOM_DELAY is whole minutes, up to 1440"
    if job.paused:
        return "paused"
    if schedule_for(job.schedule, job.timezone).has_seconds:
        return "a schedule with seconds: cron has none"
    for name in CONSUMED if not debian else ():
        if name in job.env:
            return f"env sets {name}, which cron itself reads"
    for name, value in _cron_env(job).items():
        if _env_line(name, value) is None:
            return f"env {name} holds a newline, or both kinds of quotes"
    command = _command_text(job)
    if any(has_controls(text) for text in (command or "", job.stdin or "", *job.env.values())):
        return "control characters (such as ESC) in the command, env or stdin: a crontab cannot escape them"
    if fmt == USER and command is not None and looks_like_field(command):
        return "the command starts with a word cron would read as a sixth time field"
    if command is None or encode_command(command, writer.dialect) is None:
        return "the command holds a newline, or backslashes before a % that cron cannot keep"
    if job.stdin is not None and encode_stdin(job.stdin) is None:
        return "the standard input cannot be written with cron's % rule (a backslash before a newline)"
    return None


def _command_text(job: Job) -> str | None:
    import shlex

    if isinstance(job.command, tuple):
        return shlex.join(job.command)
    return job.command


def _cron_env(job: Job) -> dict[str, str]:
    """The job's env as cron sets it: with MAILTO and MAILFROM from ``mailto`` and ``mailfrom``."""
    env = dict(job.env)
    if job.mailto is not None:
        env["MAILTO"] = ",".join(job.mailto)
    if job.mailfrom is not None:
        env["MAILFROM"] = job.mailfrom
    return env


def _write(job: Job, writer: _Writer, result: ExportResult) -> None:
    block = [""]
    for name, value in _cron_env(job).items():
        if writer.env.get(name) != value:
            block.append(_env_line(name, value) or "")
            writer.env[name] = value
    if writer.dialect == DEBIAN:
        pass  # no CRON_TZ: every job written is in the host's zone (checked in _inexpressible)
    elif job.timezone != writer.zone:
        block.append(f"CRON_TZ={job.timezone}")
        writer.zone = job.timezone
    delay = int((job.jitter or 0) // 60)
    if delay != writer.delay:
        block.append(f"RANDOM_DELAY={delay}")
        writer.delay = delay
    if derive_id(_command_text(job) or "", (job.description or "").strip() or None) != job.id:
        block.append(f"# schedctl: id={job.id}")
    if job.description:
        block += [f"# {line}".rstrip() for line in job.description.splitlines()]
    block.append(_job_line(job, writer.fmt, writer.dialect))
    writer.lines += block
    for name, key in (("MAILTO", "mailto"), ("MAILFROM", "mailfrom")):
        if name in job.env:
            result.messages.append(
                f"job {job.id!r}: env {name} is written as cron's {name}"
                + (f", over the job's {key}" if getattr(job, key) is not None else "")
                + f"; imported back it becomes {key}"
            )
    dropped = [n for n in _DROPPED if getattr(job, n) != _DEFAULTS[n]]
    if dropped:
        result.messages.append(f"job {job.id!r}: cron has no {', '.join(dropped)}; exported without")
    if writer.fmt == USER and job.user is not None:
        result.messages.append(
            f"job {job.id!r}: user {job.user!r} dropped (a user crontab runs as its owner)"
        )
    if job.stdin is not None and not (encode_stdin(job.stdin) or ("", True))[1]:
        result.messages.append(
            f"job {job.id!r}: cron ends standard input with a newline, which this one lacks"
        )


def _job_line(job: Job, fmt: str, dialect: str) -> str:
    command = encode_command(_command_text(job) or "", dialect) or ""
    parts = [job.schedule]
    if fmt == SYSTEM and job.user:
        parts.append(job.user)
    if job.stdin is not None:
        encoded = encode_stdin(job.stdin)
        # A command ending in a backslash would escape the separator; a blank keeps them apart.
        command += (" %" if command.endswith("\\") else "%") + (encoded[0] if encoded else "")
    parts.append(command)
    return " ".join(parts)


def _env_line(name: str, value: str) -> str | None:
    if "\n" in value or "\r" in value:
        return None
    if value and value == value.strip() and value[0] not in "'\"":
        return f"{name}={value}"
    if '"' not in value:
        return f'{name}="{value}"'
    if "'" not in value:
        return f"{name}='{value}'"
    return None


def _flat(job: Job) -> str:
    text = f"{job.schedule} {job.user + ' ' if job.user else ''}{_command_text(job) or ''}"
    return escape_controls(text)


def _read_back(text: str, fmt: str, written: list[Job], writer: _Writer) -> list[str]:
    """Parse the export as the importer would and name every job that would not come back the same."""
    crontab = parse_crontab(text, "<export>", fmt, writer.dialect, host_account=lambda _name: True)
    entries = crontab.entries
    messages = [
        f"the export does not read back cleanly: {d.message}"
        for d in crontab.diagnostics
        if d.severity == "error"
    ]
    if len(entries) != len(written):
        return [*messages, f"the export reads back as {len(entries)} jobs, not {len(written)}"]
    for job, entry in zip(written, entries, strict=True):
        differences = _differences(job, entry, fmt, writer)
        if differences:
            messages.append(
                f"job {job.id!r} reads back with a different {', '.join(differences)} "
                "(cron cannot unset a variable set above it)"
                if "env" in differences
                else f"job {job.id!r} reads back with a different {', '.join(differences)}"
            )
    return messages


def _differences(job: Job, entry: Entry, fmt: str, writer: _Writer) -> list[str]:
    wanted = {
        "schedule": job.schedule,
        "command": _command_text(job),
        "stdin": job.stdin if job.stdin is None or job.stdin.endswith("\n") else job.stdin + "\n",
        "env": _cron_env(job),
        "timezone": job.timezone,
        "jitter": int((job.jitter or 0) // 60) or None,
        "description": job.description.strip() if job.description else None,
        "user": job.user if fmt == SYSTEM else None,
    }
    got = {
        "schedule": entry.schedule,
        "command": entry.command,
        "stdin": entry.stdin,
        "env": dict(entry.env),
        "timezone": writer.host_zone if writer.dialect == DEBIAN else entry.cron_tz,
        "jitter": entry.random_delay,
        "description": entry.description,
        "user": entry.user,
    }
    return [k for k in wanted if wanted[k] != got[k]]
