"""The ``schedctl`` command. Commands are loaded lazily: ``--help`` and ``next`` must not pay for SQLAlchemy.

Each entry below names the module that defines the command and its one-line help, so the top-level help is
printed without importing any command module.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from schedctl import __version__
from schedctl.errors import EXIT_INTERRUPTED, SchedctlError

# name -> (module under schedctl.cli, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "serve": ("serve", "serve", "Run a scheduler, a worker, or both (--role)."),
    "jobs": ("jobs", "jobs", "List the job definitions with their next fire and last run."),
    "validate": ("jobs", "validate", "Check job files; exit 0 only when every job is valid."),
    "next": ("next", "next_", "Show when a job or a cron expression fires next, in its zone and in UTC."),
    "import": ("crontab", "import_", "Turn crontabs into TOML job definitions."),
    "export": ("crontab", "export", "Write the job set back as a crontab, for rolling back."),
    "db": ("db", "db", "Create, upgrade or check the database schema."),
    "leases": ("leases", "leases", "Show who holds the scheduler lease, and the last terms."),
    "workers": ("workers", "workers", "List workers: alive, stale or stopped, with slots in use and runs."),
    "top": ("top", "top", "A live view: leader, workers, running runs, queue, next fires, failures."),
    "runs": ("runs", "runs", "List recent runs with state, attempt, worker and exit status."),
    "run": ("runs", "run", "Queue a manual run of a job now."),
    "logs": ("runs", "logs", "Print the stored output of a run."),
    "cancel": ("runs", "cancel", "Cancel a queued or running run."),
    "missed": ("missed", "missed", "List ticks that did not run, each with its reason."),
    "replay": ("missed", "replay", "Dispatch missed ticks, bounded by --max."),
    "status": ("status", "status", "Explain a job's recent ticks in one verdict."),
    "pause": ("status", "pause", "Pause a job (recorded in the database)."),
    "resume": ("status", "resume", "Resume a paused job."),
    "completion": ("completion", "completion", "Print the bash, zsh or fish completion script."),
}

EXIT_CODES_HELP = """\b
Exit codes:
  0    success (an empty listing too)
  1    the operation failed, or found what it checks for
  2    usage error
  78   invalid job definitions (EX_CONFIG)
  130  interrupted"""


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, attr, _ = entry
        module = importlib.import_module(f"schedctl.cli.{module_name}")
        command: click.Command = getattr(module, attr)
        return command

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[Any]:
        """Command names complete from COMMANDS, so <TAB> does not import every command module."""
        from click.shell_completion import CompletionItem

        names = [
            CompletionItem(n, help=COMMANDS[n][2])
            for n in self.list_commands(ctx)
            if n.startswith(incomplete)
        ]
        return names + click.Command.shell_complete(self, ctx, incomplete)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, epilog=EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="schedctl")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """schedctl: cron for more than one machine.

    One leader (by database lease) inserts a run row per tick under a uniqueness constraint; workers claim
    and run them. Job definitions live in TOML (--jobs, SCHEDCTL_JOBS); the database is --db or
    SCHEDCTL_DATABASE_URL (default sqlite:///schedctl.db).
    """
    ctx.obj = {"verbose": verbose}


def main(argv: list[str] | None = None) -> None:
    """Entry point: the one place that turns schedctl's exceptions into exit codes."""
    verbose = "-v" in (argv or sys.argv[1:]) or "--verbose" in (argv or sys.argv[1:])
    try:
        # Without standalone mode click *returns* the code of ctx.exit(n) instead of exiting with it.
        code = cli.main(args=argv, prog_name="schedctl", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        from schedctl.text.printable import cut

        # click echoes what it refuses (an extra argument, a bad value) in full: escaped and cut like ours.
        # (Final in click's stubs; show() reads it, and the exception goes no further than here.)
        setattr(exc, "message", "\n".join(cut(line, 200) for line in exc.message.split("\n")))  # noqa: B010
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except SchedctlError as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        from schedctl.text.printable import escape_lines

        message = f"schedctl: {exc}" if not _is_located(exc) else str(exc)
        click.echo(escape_lines(message), err=True)
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        # `schedctl runs | head`: quiet, like other Unix tools.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)
    sys.exit(0)


def _is_located(exc: Any) -> bool:
    """Errors that already begin with FILE:LINE: print as they are, like a compiler's."""
    return bool(getattr(exc, "diagnostics", None))
