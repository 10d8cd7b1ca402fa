"""The one exception tree. ``cli`` maps ``exit_code`` to the process exit status.

Every exception's default message is its docstring, so ``raise StoreUnavailable()`` still says something useful.
"""

from __future__ import annotations

from dataclasses import dataclass

# Exit codes, documented in one table in the README and in ``schedctl --help``.
EXIT_OK = 0
EXIT_FAILURE = 1  # the operation failed, or a check found what it checks for
EXIT_USAGE = 2
EXIT_CONFIG = 78  # EX_CONFIG: systemd's RestartPreventExitStatus=78 stops a restart loop
EXIT_INTERRUPTED = 130


class SchedctlError(Exception):
    """schedctl failed."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class UsageError(SchedctlError):
    """The command line is wrong."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class Diagnostic:
    """One compiler-style finding: ``FILE:LINE: severity: message``."""

    file: str
    line: int | None
    message: str
    severity: str = "error"  # "error" or "warning"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        if self.severity == "error":
            return f"{where}: {self.message}"
        return f"{where}: {self.severity}: {self.message}"


class ConfigError(SchedctlError):
    """The job definitions are invalid."""

    exit_code = EXIT_CONFIG

    def __init__(self, diagnostics: list[Diagnostic] | str) -> None:
        if isinstance(diagnostics, str):
            diagnostics = [Diagnostic(file="-", line=None, message=diagnostics)]
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class ScheduleError(SchedctlError):
    """The schedule is not a cron expression schedctl accepts."""

    exit_code = EXIT_CONFIG

    def __init__(self, message: str | None = None, field: str | None = None) -> None:
        # ``field`` names the cron field at fault ("minute", "day of week", ...) when there is one.
        self.field = field
        super().__init__(message)


class ZoneError(SchedctlError):
    """The timezone is not an IANA region name schedctl accepts."""

    exit_code = EXIT_CONFIG


class StoreError(SchedctlError):
    """The database could not be used."""


class StoreUnavailable(StoreError):
    """The database is unreachable."""


class StoreAccessDenied(StoreError):
    """The database refused this user (wrong credentials, missing privileges); retrying will not help."""


class StoreConflict(StoreError):
    """The database aborted the transaction to break a deadlock or a serialisation conflict; retrying is safe."""


class SchemaMismatch(StoreError):
    """The database schema is not the one this schedctl understands; run `schedctl db upgrade`."""


class NotLeader(StoreError):
    """This process no longer holds the scheduler lease; the write was fenced off."""


class LeaseTooShort(NotLeader):
    """Still the holder, but with too little lease left to be sure of committing before it expires: the
    write was rolled back; renew, then write again."""


class RunNotFound(SchedctlError):
    """No such run."""


class JobNotFound(SchedctlError):
    """No such job."""


class ReplayRefused(SchedctlError):
    """The replay would exceed its bound; nothing was changed."""
