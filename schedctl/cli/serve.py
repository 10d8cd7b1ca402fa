"""``schedctl serve``: parse the options, build the settings, hand over to ``schedctl.service``."""

from __future__ import annotations

from typing import Any

import click

from schedctl.cli._options import db_option, jobs_option
from schedctl.jobs.job import DEFAULT_CATCH_UP_GRACE
from schedctl.timing.timetext import parse_duration


class Duration(click.ParamType):
    """``"500ms"``, ``"90s"``, ``"2h30m"`` or plain seconds, as in the job files."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class SignedDuration(Duration):
    name = "signed duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        text = str(value).strip()
        sign = -1.0 if text.startswith("-") else 1.0
        return sign * super().convert(text.lstrip("+-"), param, ctx)


DURATION = Duration()


def _labels(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            from schedctl.text.printable import quoted

            raise click.BadParameter(f"expected KEY=VALUE, got {quoted(value)}", ctx=ctx, param=param)
        labels[key] = val
    return labels


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--role",
    type=click.Choice(["scheduler", "worker", "all"]),
    default="all",
    show_default=True,
    envvar="SCHEDCTL_ROLE",
    help="scheduler: compete for the lease and dispatch; worker: run queued runs; all: both (one machine).",
)
@db_option
@jobs_option
@click.option(
    "--migrate", is_flag=True, help="Upgrade the database schema first (the one-machine SQLite case)."
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Start (and reload) even when the job files define no jobs while the database knows some.",
)
@click.option(
    "--identity", envvar="SCHEDCTL_IDENTITY", help="Lease holder / worker name [default: HOST:PID:SUFFIX]."
)
@click.option(
    "--lease-duration", type=DURATION, default="15s", show_default=True, help="How long a lease lasts."
)
@click.option(
    "--renew-interval", type=DURATION, default="5s", show_default=True, help="How often the leader renews."
)
@click.option(
    "--catch-up-grace",
    type=DURATION,
    default=f"{DEFAULT_CATCH_UP_GRACE:g}s",
    show_default=True,
    help="A tick younger than this is late, not missed: dispatched normally (recorded with the lease term).",
)
@click.option(
    "--slots", type=click.IntRange(min=1), default=4, show_default=True, help="Runs executed at once."
)
@click.option(
    "--poll-interval", type=DURATION, default="1s", show_default=True, help="Worker poll when idle."
)
@click.option(
    "--heartbeat-interval",
    type=DURATION,
    default="15s",
    show_default=True,
    help="Worker heartbeat for its running runs, and its refresh in `schedctl workers` (also when idle).",
)
@click.option(
    "--stale-after",
    type=DURATION,
    default="60s",
    show_default=True,
    help="Take over runs silent this long; `schedctl workers` shows a silent worker as stale after it.",
)
@click.option(
    "--label", "labels", multiple=True, callback=_labels, metavar="KEY=VALUE", help="Worker label (repeat)."
)
@click.option("--run-as-job-user", is_flag=True, help="As root, run each job as the user it names.")
@click.option(
    "--smtp",
    envvar="SCHEDCTL_SMTP_URL",
    metavar="URL",
    help="Mail run output to each job's mailto via this server: smtp://HOST:PORT, smtps://..., "
    "smtp+starttls://... (user@ allowed; password from SCHEDCTL_SMTP_PASSWORD).",
)
@click.option(
    "--mail-hostname",
    envvar="SCHEDCTL_MAIL_HOSTNAME",
    metavar="NAME",
    help="Host name the mail gives, as cron does (From: schedctl@NAME, Subject: Cron <user@NAME> ...); "
    "default: this host's name.",
)
@click.option(
    "--successful-history",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Succeeded runs kept per job (older ones are pruned every minute).",
)
@click.option(
    "--failed-history",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Failed, timed-out or cancelled runs kept per job.",
)
@click.option(
    "--log-output",
    is_flag=True,
    help="Log each run's output tail (last 8 KiB) when it ends: job output in the serve log, for one machine.",
)
@click.option(
    "--output-interval",
    type=DURATION,
    default="2s",
    show_default=True,
    help="Store running runs' new output this often, for `schedctl logs -f` (0: only when a run ends).",
)
@click.option(
    "--keep-missed",
    type=DURATION,
    default="7d",
    show_default=True,
    help="Keep skipped and missed ticks this long for `missed`/`replay`, whatever the history limits.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    # The image sets it, so its HEALTHCHECK probes the port that serve listens on.
    envvar="SCHEDCTL_METRICS_PORT",
    show_envvar=True,
    help="Serve /metrics, /livez, /readyz here.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    envvar="SCHEDCTL_METRICS_HOST",
    show_envvar=True,
    show_default=True,
    help="Address the metrics port binds (0.0.0.0 for Kubernetes probes).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for a terminal; json: one object per line for a log shipper.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    help="schedctl's own loggers (SQLAlchemy and Alembic stay at warning).",
)
@click.option("--clock-skew", type=SignedDuration(), default="0", envvar="SCHEDCTL_CLOCK_SKEW", hidden=True)
def serve(**opts: Any) -> None:
    """Run a scheduler, a worker, or both.

    \b
    SIGTERM/SIGINT: finish the pass, release the lease, hand runs back, exit 0.
    A second SIGTERM/SIGINT: stop now, kill the jobs and hand their runs back;
    exit 0 (130 only if a loop is still stuck after a few seconds).
    SIGHUP: re-read the job files.
    """
    import sys

    from schedctl import service

    config = _config(opts)
    service.configure_logging(opts["log_format"], opts["log_level"])
    sys.exit(service.serve(config))


def _config(opts: dict[str, Any]) -> Any:
    from schedctl.errors import UsageError
    from schedctl.jobs.job import Role
    from schedctl.leader.settings import SchedulerSettings
    from schedctl.service import ServeConfig, default_identity
    from schedctl.worker.settings import WorkerSettings

    if opts["renew_interval"] >= opts["lease_duration"]:
        raise UsageError("--renew-interval must be shorter than --lease-duration")
    from schedctl.leader.leadership import dispatch_window

    window = dispatch_window(opts["lease_duration"])
    if opts["renew_interval"] >= window:
        # A leader dispatches only while it could still commit before its lease ends (the commit bound).
        raise UsageError(
            f"--renew-interval must be shorter than {window:g}s for a {opts['lease_duration']:g}s lease: a "
            "leader writes only while its lease outlasts the database's commit bound (docs/guarantees.md)"
        )
    identity = opts["identity"] or default_identity()
    _check_identity(identity)
    smtp = None
    if opts["smtp"]:
        import os

        from schedctl.worker.mail import PASSWORD_ENV, parse_smtp_url

        smtp = parse_smtp_url(opts["smtp"], os.environ.get(PASSWORD_ENV))
    return ServeConfig(
        role=Role(opts["role"]),
        db_url=opts["db_url"],
        jobs_path=opts["jobs_path"],
        migrate=opts["migrate"],
        allow_empty=opts["allow_empty"],
        scheduler=SchedulerSettings(
            identity=identity,
            lease_duration=opts["lease_duration"],
            renew_interval=opts["renew_interval"],
            catch_up_grace=opts["catch_up_grace"],
        ),
        worker=WorkerSettings(
            identity=identity,
            slots=opts["slots"],
            poll_interval=opts["poll_interval"],
            heartbeat_interval=opts["heartbeat_interval"],
            stale_after=opts["stale_after"],
            labels=opts["labels"],
            run_as_job_user=opts["run_as_job_user"],
            successful_history=opts["successful_history"],
            failed_history=opts["failed_history"],
            role=Role.ALL if opts["role"] == Role.ALL else Role.WORKER,
            log_output=opts["log_output"],
            smtp=smtp,
            mail_hostname=_mail_hostname(opts["mail_hostname"]),
            output_interval=opts["output_interval"],
            keep_missed=opts["keep_missed"],
        ),
        metrics_host=opts["metrics_host"],
        metrics_port=opts["metrics_port"],
        clock_skew=opts["clock_skew"],
    )


def _mail_hostname(name: str | None) -> str | None:
    """Checked at start: the name goes into mail headers, where a line break would start a header."""
    if name is None:
        return None
    from schedctl.errors import UsageError
    from schedctl.text.printable import cut, has_controls

    if not name.strip() or has_controls(name) or any(c in name for c in " \t\n<>@"):
        raise UsageError(
            f"--mail-hostname {cut(name, 40, quote=chr(39))}: give a host name such as db1.example.com"
        )
    return name.strip()


IDENTITY_MAX = 255  # the lease holder and run worker columns


def _check_identity(identity: str) -> None:
    """Checked before anything starts: a 300-character identity used to crash the scheduler loop at its first
    lease write."""
    from schedctl.errors import UsageError
    from schedctl.text.printable import cut, has_controls

    shown = cut(identity, 40)
    if not identity.strip():
        raise UsageError("--identity: must not be empty")
    if len(identity) > IDENTITY_MAX:
        raise UsageError(
            f"--identity {shown}: at most {IDENTITY_MAX} characters (it is stored with every lease)"
        )
    if has_controls(identity) or "\n" in identity or "\t" in identity:
        raise UsageError(f"--identity {shown}: control characters are not allowed")
