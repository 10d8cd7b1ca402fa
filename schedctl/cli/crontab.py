"""``schedctl import`` (crontabs -> TOML) and ``schedctl export`` (TOML -> crontab, for rolling back)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from schedctl.cli._options import jobs_option
from schedctl.timing.crondialect import CRONIE_CRON_TZ, DEBIAN_CRON_TZ

if TYPE_CHECKING:
    from schedctl.crontab.importer import ImportOutcome

_CONTEXT = {"help_option_names": ["-h", "--help"]}
STDOUT = "-"  # as -o: standard output, as for most Unix tools (`-o ./-` names a file called '-')
_DIALECT_HELP = (
    "Which cron the crontabs are for: debian (Debian/Ubuntu's Vixie cron) or cronie. Default auto: debian when "
    "/etc/os-release names Debian in ID or ID_LIKE, else cronie."
)


@click.command("import", context_settings=_CONTEXT)
@click.argument("paths", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="TOML file to write, whole or not at all; - (the default) is stdout.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["system", "user"]),
    help="Force the crontab format (system: a user column after the schedule). Default: per file.",
)
@click.option(
    "--dialect",
    type=click.Choice(["auto", "debian", "cronie"]),
    default="auto",
    show_default=True,
    help=_DIALECT_HELP,
)
@click.option(
    "--timezone",
    help="Zone of jobs with no CRON_TZ above them (an IANA name, e.g. Europe/London). With --dialect debian, "
    f"of every job: {DEBIAN_CRON_TZ} (or {CRONIE_CRON_TZ}).",
)
@click.option(
    "--catch-up",
    "catch_up",
    type=click.Choice(["skip", "latest", "all"]),
    help="What to do with ticks missed during downtime (required).",
)
@click.option(
    "--max-catch-up", "max_catch_up", type=int, help="With --catch-up all: most missed ticks to run."
)
@click.option("--force", is_flag=True, help="Replace the -o file if it exists.")
@click.option("--merge", is_flag=True, help="Add new jobs to the -o file; jobs already in it stay untouched.")
@click.option(
    "--skip-invalid", is_flag=True, help="Import the valid lines even when some are broken (exit 1)."
)
@click.option("--dry-run", is_flag=True, help="Print what would be written; write nothing.")
def import_(
    paths: tuple[str, ...],
    output: str | None,
    fmt: str | None,
    dialect: str,
    timezone: str | None,
    catch_up: str | None,
    max_catch_up: int | None,
    force: bool,
    merge: bool,
    skip_invalid: bool,
    dry_run: bool,
) -> None:
    """Turn crontabs (files, folders such as /etc/cron.d, or - for stdin) into TOML job definitions.

    Every job gets an explicit zone (CRON_TZ in the crontab, else --timezone, which --dialect debian always
    needs; never the host's) and catch-up policy (--catch-up). Problems are printed as FILE:LINE: error:
    reason; by default one broken line means nothing is written (exit 1).
    """
    from schedctl.crontab.convert import ImportOptions
    from schedctl.crontab.importer import ImportRequest, run_import
    from schedctl.errors import UsageError

    if output == STDOUT and merge:
        raise UsageError("--merge needs -o FILE: '-' is standard output, which holds no jobs to keep")
    output, force = (None, False) if output == STDOUT else (output, force)  # nothing on stdout to replace
    request = ImportRequest(
        paths,
        ImportOptions(timezone, catch_up, max_catch_up),
        fmt,
        dialect=dialect,
        output=output,
        force=force,
        merge=merge,
        skip_invalid=skip_invalid,
        dry_run=dry_run,
    )
    now = datetime.now(UTC)
    outcome = run_import(request, now, _read_stdin)
    _report(outcome, request.dry_run, now)
    if outcome.text is not None and (outcome.written is None):
        click.echo(outcome.text, nl=False)
    # sys.exit, not click's Exit: main() runs click with standalone_mode=False, which returns that code unused.
    sys.exit(outcome.exit_code)


def _read_stdin() -> bytes:
    from schedctl.cli._stdio import read_stdin

    return read_stdin("nothing to import")


def _report(outcome: ImportOutcome, dry_run: bool, now: datetime) -> None:
    from schedctl.crontab.diagnostics import render

    for diagnostic in outcome.diagnostics:
        click.echo(render(diagnostic), err=True)
    if outcome.missing:
        click.echo(
            "schedctl: nothing imported: every job needs an explicit timezone and catch-up policy", err=True
        )
        for line in outcome.missing:
            click.echo(f"  - {line}", err=True)
    # A refusal (CRON_TZ under Debian) is said in its own line and is no broken line: --skip-invalid won't do.
    broken = len(outcome.broken)
    if outcome.failed:
        if broken:
            hint = " (fix them, or pass --skip-invalid to import the rest)" if outcome.exit_code == 1 else ""
            click.echo(
                f"schedctl: nothing written: {broken} error{'s' if broken != 1 else ''}{hint}", err=True
            )
        return
    _summary(outcome, now)
    if broken:
        click.echo(
            f"schedctl: {broken} error{'s' if broken != 1 else ''}: those lines left out (--skip-invalid)",
            err=True,
        )
    if dry_run:
        click.echo("schedctl: dry run: nothing written", err=True)
    elif outcome.written:
        click.echo(
            f"schedctl: wrote {len(outcome.jobs)} job{'s' if len(outcome.jobs) != 1 else ''} to "
            f"{outcome.written}"
            + (f" ({len(outcome.kept)} already there, untouched)" if outcome.kept else ""),
            err=True,
        )


def _summary(outcome: ImportOutcome, now: datetime) -> None:
    from rich.table import Table

    from schedctl.cli._render import console as make_console
    from schedctl.cli._render import text
    from schedctl.crontab import summary

    console = make_console(stderr=True)
    if not console.is_terminal:
        console.width = 200  # a log or a pipe: keep one job per line rather than folding at 80 columns
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("ID", "SCHEDULE", "WHEN", "ZONE", "CATCH-UP", "SOURCE", "DST (next 12 months)"):
        table.add_column(column, overflow="fold")
    for row in summary.rows(outcome.jobs, now):
        cells = (row.id, row.schedule, row.description, row.zone, row.policy, row.source, row.dst or "-")
        table.add_row(*(text(cell) for cell in cells))
    if outcome.jobs:
        console.print(table)
    names = {"debian": "Debian's cron (Vixie cron 3.0 with Debian's patches)", "cronie": "cronie"}
    console.print(
        text(
            f"note: read as {names.get(outcome.dialect, outcome.dialect)} reads crontabs (--dialect "
            + (
                outcome.dialect
                if outcome.dialect_reason == "--dialect"
                else f"auto: {outcome.dialect_reason}"
            )
            + ")."
        )
    )
    for crontab in outcome.crontabs:
        # soft_wrap: one line per file however long, for grep and for the eye going down the list
        console.print(text(f"note: {summary.format_note(crontab)}"), soft_wrap=True)
    reboots = sum(1 for d in outcome.diagnostics if "@reboot" in d.message)
    for note in summary.notes(outcome.jobs, reboots):
        console.print(text(f"note: {note}"))


@click.command("export", context_settings=_CONTEXT)
@click.argument("paths", nargs=-1, type=click.Path(allow_dash=True))
@jobs_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["crontab", "crontab-user", "crontab-system"]),
    default="crontab",
    show_default=True,
    help="crontab: a system crontab (user column) when any job has a user, else a user crontab.",
)
@click.option(
    "--dialect",
    type=click.Choice(["auto", "debian", "cronie"]),
    default="auto",
    show_default=True,
    help="Which cron will read the file (auto: from /etc/os-release). debian needs --timezone.",
)
@click.option(
    "--timezone",
    help="With --dialect debian: the zone of the host that will run the file (it has no CRON_TZ).",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="File to write, whole or not at all; - (the default) is stdout.",
)
@click.option("--force", is_flag=True, help="Replace the -o file if it exists.")
@click.option(
    "--user",
    "user",
    metavar="NAME",
    help="System crontab: the user column for jobs that name no user (else such jobs make it fail).",
)
def export(
    paths: tuple[str, ...],
    jobs_path: str,
    fmt: str,
    dialect: str,
    timezone: str | None,
    output: str | None,
    force: bool,
    user: str | None,
) -> None:
    """Write the job set (PATHS, default --jobs; - reads TOML from stdin) back as a crontab, for rolling a
    migration back.

    For cronie, zones become CRON_TZ lines and jitter RANDOM_DELAY; Debian's cron has neither, so every job
    must be in the --timezone given. Jobs cron cannot express are written as comments and reported here. A
    system crontab needs a user for every job: jobs without one take --user NAME, or the export fails naming
    them (exit 1, nothing written).
    """
    from schedctl.cli._stdio import load_jobs_from
    from schedctl.crontab.export import export_crontab
    from schedctl.crontab.write import write_atomic
    from schedctl.errors import SchedctlError, UsageError
    from schedctl.timing.crondialect import DEBIAN, resolve
    from schedctl.timing.zones import validate_zone

    chosen, _ = resolve(dialect)
    if chosen == DEBIAN and not timezone:
        raise UsageError(
            "--dialect debian needs --timezone ZONE: the zone of the host that will run the file (Debian's cron "
            "has no CRON_TZ); jobs in other zones are written as comments"
        )
    if timezone:
        try:
            validate_zone(timezone)
        except SchedctlError as exc:
            raise UsageError(f"--timezone: {exc}") from None

    now = datetime.now(UTC)
    jobs = {}
    for path in paths or (jobs_path,):
        jobs.update(load_jobs_from(path, now))
    result = export_crontab(
        list(jobs.values()),
        {"crontab": None, "crontab-user": "user", "crontab-system": "system"}[fmt],
        chosen,
        timezone,
        user=user,
    )
    for message in result.messages:
        click.echo(f"schedctl: warning: {message}", err=True)
    if output is None or output == STDOUT:
        click.echo(result.text, nl=False)
        return
    from schedctl.jobs.files import check_output_target

    if check_output_target(output) is not None and not force:
        raise SchedctlError(f"{output} exists: nothing written; pass --force to replace it")
    write_atomic(output, result.text, private=result.private)
    click.echo(
        f"schedctl: wrote {result.written} job{'s' if result.written != 1 else ''} to {output}", err=True
    )
